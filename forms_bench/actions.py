"""BrowserGym high-level actions: one definition feeds the prompt, the parser and the tool schema.

Each action is a plain function below whose signature and docstring are the single source of
truth (the way BrowserGym's ``HighLevelActionSet`` documents its actions). The functions are
never called to act on a page: a world applies a parsed :class:`Action` itself. Text from a
model is parsed with :mod:`ast` and a linear bracket scanner only — never ``exec``/``eval`` —
so a string like ``__import__('os').system('…')`` is just a parse error.

The same call syntax serves the evidence-ledger tool world (``get_charge(charge_id='C2')``):
:func:`parse_call` is the generic parser, :func:`parse_action` the web-action one.
"""

from __future__ import annotations

import ast
import functools
import inspect
import io
import re
import tokenize
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

MAX_CALL_CHARS = 8192
"""Longest call text considered (characters); longer calls are rejected with a clear error."""
MAX_CALL_TOKENS = 512
"""Most Python tokens a call may have: a string or number literal is one token, so every call of
the web action set and of the ledger's tools (scalar parameters) needs a few dozen at most. More is
refused before parsing, so a long expression such as ``1+1+…`` gets the same message whatever the
interpreter's recursion limit (its syntax tree is as deep as it is long)."""


def _token_count(call_text: str) -> int | None:
    """Python tokens in ``call_text`` (not counting the end markers), stopping once past
    :data:`MAX_CALL_TOKENS`; None where the tokenizer meets an error (an unterminated string: the
    parser names that). Linear in the text, no recursion."""
    n = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(call_text).readline):
            if tok.type == tokenize.ERRORTOKEN:
                return None
            if tok.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT,
                                tokenize.DEDENT, tokenize.COMMENT):
                n += 1
                if n > MAX_CALL_TOKENS:
                    break
    except (tokenize.TokenError, SyntaxError):
        return None
    return n


# --------------------------------------------------------------------------------------------
# The action set (BrowserGym names and argument order).
# --------------------------------------------------------------------------------------------

def fill(bid: str, value: str):
    """Fill the text box or text area with id `bid` with `value`, replacing what it held.

    Examples:
        fill('12', 'Jane Doe')
        fill('31', '148.50')
    """


def select_option(bid: str, option: str):
    """Select the option whose visible text is `option` in the drop-down list `bid`, or the radio
    button labelled `option` in the radio group `bid`.

    Examples:
        select_option('14', 'Express')
    """


def check(bid: str):
    """Tick the checkbox `bid` (no effect if it is already ticked).

    Examples:
        check('15')
    """


def uncheck(bid: str):
    """Clear the checkbox `bid` (no effect if it is already clear).

    Examples:
        uncheck('15')
    """


def click(bid: str):
    """Click the element `bid` (a button; clicking a checkbox toggles it).

    Examples:
        click('20')
    """


def send_msg_to_user(text: str):
    """Send a final message to the user. This ends the episode.

    Examples:
        send_msg_to_user('The claim form has been submitted.')
    """


def noop():
    """Do nothing for one step.

    Examples:
        noop()
    """


ACTION_FUNCTIONS: tuple[Callable[..., Any], ...] = (
    fill, select_option, check, uncheck, click, send_msg_to_user, noop,
)
"""The seven actions, in the order the prompt lists them."""


@dataclass(frozen=True)
class CallSpec:
    """Name, parameter names and description of one callable (a web action or a tool).

    Attributes:
        name: the function name used in call syntax.
        params: parameter names in positional order.
        required: how many leading parameters are required.
        description: text shown to the model.
        param_types: JSON-schema type per parameter (``"string"``, ``"number"``, ``"integer"``,
            ``"boolean"``, ``"array"``, ``"object"``); default ``"string"``.
    """

    name: str
    params: tuple[str, ...]
    required: int
    description: str
    param_types: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_function(cls, fn: Callable[..., Any]) -> "CallSpec":
        sig = inspect.signature(fn)
        params = tuple(sig.parameters)
        required = sum(1 for p in sig.parameters.values() if p.default is inspect.Parameter.empty)
        return cls(fn.__name__, params, required, inspect.getdoc(fn) or "",
                   {p: "string" for p in params})

    def json_schema(self) -> dict:
        """An OpenAI-style function/tool schema for this call."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description.split("\n\n")[0],
                "parameters": {
                    "type": "object",
                    "properties": {p: {"type": self.param_types.get(p, "string")} for p in self.params},
                    "required": list(self.params[: self.required]),
                    "additionalProperties": False,
                },
            },
        }


ACTION_SPECS: dict[str, CallSpec] = {fn.__name__: CallSpec.from_function(fn) for fn in ACTION_FUNCTIONS}
"""Web actions by name."""


@dataclass(frozen=True)
class Action:
    """One parsed web action.

    Attributes:
        name: one of :data:`ACTION_SPECS` (``fill``, ``select_option``, …).
        args: the arguments in positional order, all strings (a bid given as an integer is
            turned into its decimal string).
    """

    name: str
    args: tuple[str, ...] = ()

    @property
    def bid(self) -> str | None:
        """The element id this action targets, or None for ``send_msg_to_user``/``noop``."""
        if self.name in ("send_msg_to_user", "noop") or not self.args:
            return None
        return self.args[0]

    def to_text(self) -> str:
        """Canonical call text, e.g. ``fill('12', 'Jane Doe')``; parses back to an equal Action."""
        return f"{self.name}({', '.join(repr(a) for a in self.args)})"


@dataclass(frozen=True)
class Call:
    """A parsed call: name plus keyword arguments (positional ones mapped to parameter names),
    in parameter order whatever order the text gave them in."""

    name: str
    kwargs: Mapping[str, Any]
    text: str

    def to_text(self) -> str:
        """Canonical call text, keyword arguments in parameter order:
        ``refund_charge(charge_id='CH-2', amount=12.5)``; parses back to an equal call."""
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in self.kwargs.items())})"


class ActionParseError(ValueError):
    """Raised when text does not hold exactly one valid call; the message says precisely why.

    Attributes:
        name: the call's name when the text holds exactly one call to a known name and only
            that call is malformed (its argument list or its syntax); None when there is no
            such call (no call, an unknown name, several calls, not a string).
        kwargs: the arguments of that call that could be read, by parameter name (``{}`` if
            none), e.g. ``{"charge_id": "CH-2"}`` for ``refund_charge(charge_id='CH-2', x=1)``.
    """

    def __init__(self, message: str, name: str | None = None, kwargs: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.name = name
        self.kwargs: dict[str, Any] = dict(kwargs or {})


_IDENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_SPECIAL = re.compile(r"[()\[\]{}'\"#\\\n\r]")
"""The only characters bracket matching looks at: brackets, quotes, ``#``, backslash, line ends."""
_FAIL = -1


@functools.lru_cache(maxsize=64)
def _calls_re(names: tuple[str, ...]) -> re.Pattern:
    """``name(`` for one of ``names``, as a whole identifier (what :data:`_IDENT` finds)."""
    alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"\b({alts})\s*\(")


def _call_spans(text: str, names: Sequence[str]) -> list[tuple[int, int]]:
    """Spans ``(start, end)`` of balanced ``name(...)`` calls to known names, left to right.

    A candidate is a known identifier followed by ``(``; from that parenthesis on the text is
    read as Python code (:func:`_bracket_closes`), so brackets inside string literals and
    comments do not count. A candidate that never balances is skipped and the next one is
    tried; a call nested inside an accepted one is part of it, not a second call.

    Linear in the length of the text: one right-to-left pass finds the matching bracket of
    every candidate at once, however many of them fail (``"fill(" * 40_000`` included).

    Args:
        text: any string.
        names: the known call names.

    Returns:
        ``[(start, end), ...]`` where ``text[start:end]`` is ``name(...)`` up to and including
        its closing bracket.
    """
    if not names:
        return []
    calls = _calls_re(tuple(names))
    first = calls.search(text)
    if first is None:
        return []
    pos, close = _bracket_closes(text, first.end() - 1)
    spans: list[tuple[int, int]] = []
    after = k = 0
    for m in calls.finditer(text, first.start()):
        start, paren = m.start(1), m.end() - 1
        while pos[k] < paren:  # the event of this parenthesis (events and candidates increase)
            k += 1
        j = close[k + 1]
        if start >= after and j != _FAIL:  # not inside an accepted call, and balanced
            after = pos[j] + 1
            spans.append((start, after))
    return spans


def _bracket_closes(text: str, start: int = 0) -> tuple[list[int], list[int]]:
    """Matching closing brackets of ``text[start:]`` read as Python code, from every point at once.

    Only the characters of :data:`_SPECIAL` are looked at: event ``k`` is ``text[pos[k]]``.
    Read as code, the way :mod:`tokenize` reads it: ``([{`` open a level and ``)]}`` close one
    (any kind closes any kind); ``#`` skips to the end of the line (``\\n`` or ``\\r``); a quote
    starts a string literal that ends at the next unescaped same quote (a triple quote at the
    next unescaped triple, across lines); a backslash escapes the next character (a newline
    too: a continued literal). A single-quoted literal that meets an unescaped newline is no
    literal: on its first line the quote is a stray character and reading goes on right after
    it; on a continuation line the rest of that line is skipped. An unterminated triple-quoted
    or continued literal, or the end of the text with levels still open, means no match.

    Args:
        text: any string.
        start: where the events begin (text before it is never read).

    Returns:
        ``(pos, close)``: ``pos`` (length m) the text index of each event, increasing;
        ``close`` (length m + 3): ``close[k]`` is the event of the first closing bracket,
        reading as code from event ``k``, at which the depth drops below the depth at ``k``, or
        ``-1`` if there is none. So the bracket at event ``k`` is closed by event ``close[k + 1]``.

    Every quantity at event ``k`` depends only on later events, so one right-to-left pass
    computes them all: O(len(text)) time, and memory for three lists of the events.
    """
    chars: list[str] = _SPECIAL.findall(text, start)
    pos: list[int] = [m.start() for m in _SPECIAL.finditer(text, start)]
    n = len(pos)
    fail = _FAIL
    # close[k]: reading as code from event k, the event of the first closing bracket at which
    # the depth drops below the depth at k, or -1. The bracket at event k closes at close[k + 1].
    close = [fail] * (n + 3)
    # Where the content of a literal starting at an event stops, as a tuple (sq1, sq2, tq1, tq2):
    # for '…' / "…" the event of its closing quote, of the unescaped newline that ends it, or n
    # (end of text); for '''…''' / """…""" the event of the first quote of its closing triple,
    # or -1 (unterminated). Only the values at events k+1, k+2, k+3 are ever read: h1, h2, h3.
    h1 = h2 = h3 = (n, n, fail, fail)
    nl = eol = n  # first "\n" event, first "\n" or "\r" event (a comment's end) after k
    for k in range(n - 1, -1, -1):
        c = chars[k]
        if c in ")]}":
            close[k] = k
            h0 = h1
        elif c in "([{":
            j = close[k + 1]
            if j != fail:
                close[k] = close[j + 1]
            h0 = h1
        elif c == "'" or c == '"':
            p = pos[k]
            triple = text[p + 1:p + 3] == c + c  # events k+1 and k+2 are the same quote
            sq1, sq2, tq1, tq2 = h1
            if c == "'":
                e = h3[2] if triple else sq1
                h0 = (k, sq2, k if triple else tq1, tq2)
            else:
                e = h3[3] if triple else sq2
                h0 = (sq1, k, tq1, k if triple else tq2)
            if triple:
                if e != fail:
                    close[k] = close[e + 3]
            elif e < n and chars[e] == c:  # a closed literal
                close[k] = close[e + 1]
            elif nl >= e:  # unterminated on its own line: a stray quote
                close[k] = close[k + 1]
            elif e != n:  # a continued literal, unterminated on a later line: skip that line
                close[k] = close[e + 1]
        elif c == "#":
            close[k] = close[eol]
            h0 = h1
        elif c == "\\":
            p = pos[k]
            escaped = text[p + 1:p + 2]
            if escaped == "\r" and text[p + 2:p + 3] == "\n":
                h0 = h3  # skip an escaped \r\n (events k+1, k+2)
            elif escaped and _SPECIAL.match(escaped):
                h0 = h2  # skip the escaped event k+1
            else:
                h0 = h1
            close[k] = close[k + 1]
        elif c == "\n":
            h0 = (k, k, h1[2], h1[3])
            close[k] = close[k + 1]
            nl = eol = k
        else:  # "\r": ends a comment, nothing else
            h0 = h1
            close[k] = close[k + 1]
            eol = k
        h3 = h2
        h2 = h1
        h1 = h0
    return pos, close


def _literal(node: ast.AST, where: str, source: str) -> Any:
    """``node``'s Python literal value; the error quotes the argument's own text from ``source``
    (``ast.get_source_segment``: a slice, linear — ``ast.unparse`` recurses and overflows the stack
    on a 10-token ``-------…1``)."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        text = ast.get_source_segment(source, node) or ""
        raise ActionParseError(f"{where} must be a literal (a quoted string or a number), "
                               f"got `{text[:80]}`") from None


def parse_call(text: str, specs: Mapping[str, CallSpec]) -> Call:
    """Parse exactly one call to one of ``specs`` from model text.

    Text around the call is allowed (``"I will submit now: click('20')"``), as are Markdown code
    fences; two or more calls are an error. Arguments must be Python literals; positional
    arguments are mapped to parameter names in order; unknown keywords, missing required
    arguments and too many arguments are errors.

    Args:
        text: raw model output (any length; calls longer than :data:`MAX_CALL_CHARS` characters
            or :data:`MAX_CALL_TOKENS` tokens rejected).
        specs: the allowed calls by name.

    Returns:
        :class:`Call` with ``kwargs`` holding every given argument by parameter name.

    Raises:
        ActionParseError: with a message naming what is wrong.
    """
    if not isinstance(text, str):
        raise ActionParseError(f"action must be a string, got {type(text).__name__}")
    spans = _call_spans(text, list(specs))
    if not spans:
        stripped = text.strip()
        m = _IDENT.search(stripped)
        if not stripped:
            raise ActionParseError("empty action; expected one call such as "
                                   f"{next(iter(specs))}(…)")
        if m and m.group(1) not in specs:
            raise ActionParseError(f"unknown action `{m.group(1)}`; valid actions: "
                                   + ", ".join(specs))
        raise ActionParseError("no complete call found (unbalanced parentheses or quotes?); "
                               "valid actions: " + ", ".join(specs))
    if len(spans) > 1:
        raise ActionParseError(f"found {len(spans)} calls; exactly one action per step is allowed")
    start, end = spans[0]
    call_text = text[start:end]
    spec = specs[_IDENT.match(call_text).group(1)]  # a span starts with a known name
    if len(call_text) > MAX_CALL_CHARS:
        raise ActionParseError(f"call is {len(call_text)} characters long; at most {MAX_CALL_CHARS}",
                               name=spec.name)
    if (_token_count(call_text) or 0) > MAX_CALL_TOKENS:
        raise ActionParseError(f"call has more than {MAX_CALL_TOKENS} tokens (`{call_text[:80]}`): arguments must "
                               "be literals such as '12' or ['a', 'b']", name=spec.name)
    try:
        with warnings.catch_warnings():  # model text: an invalid escape such as '\_' is its content, not a bug here
            warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
            tree = ast.parse(call_text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        why = getattr(exc, "msg", None) or exc.__class__.__name__
        raise ActionParseError(f"invalid call syntax in `{call_text[:80]}`: {why}", name=spec.name) from None
    node = tree.body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ActionParseError(f"`{call_text[:80]}` is not a plain function call", name=spec.name)
    # Every argument is read; the first problem (in argument order) is the error, and the
    # arguments that could be read go with it.
    problems: list[str] = []
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        problems.append(f"{spec.name}: *args/**kwargs are not allowed")
    if len(node.args) > len(spec.params):
        problems.append(f"{spec.name} takes {len(spec.params)} argument(s) "
                        f"({', '.join(spec.params) or 'none'}), got {len(node.args)}")
    kwargs: dict[str, Any] = {}
    for name, arg in zip(spec.params, node.args):
        if isinstance(arg, ast.Starred):
            break
        try:
            kwargs[name] = _literal(arg, f"{spec.name}: argument `{name}`", call_text)
        except ActionParseError as exc:
            problems.append(str(exc))
    for kw in node.keywords:
        if kw.arg is None:
            continue
        if kw.arg not in spec.params:
            problems.append(f"{spec.name}: unknown argument `{kw.arg}`; "
                            f"expected {', '.join(spec.params) or 'no arguments'}")
        elif kw.arg in kwargs:
            problems.append(f"{spec.name}: argument `{kw.arg}` given twice")
        else:
            try:
                kwargs[kw.arg] = _literal(kw.value, f"{spec.name}: argument `{kw.arg}`", call_text)
            except ActionParseError as exc:
                problems.append(str(exc))
    missing = [p for p in spec.params[: spec.required] if p not in kwargs]
    if missing and not problems:
        problems.append(f"{spec.name}: missing argument(s) {', '.join(missing)}")
    if problems:
        raise ActionParseError(problems[0], name=spec.name, kwargs=kwargs)
    ordered = {p: kwargs[p] for p in spec.params if p in kwargs}  # parameter order, however written
    return Call(spec.name, ordered, call_text)


def parse_action(text: str) -> Action:
    """Parse one BrowserGym web action from model text.

    Every argument must be a string; an element id (``bid``) may also be given as a
    non-negative integer (``click(20)``).

    Raises:
        ActionParseError: unknown action, wrong arity, non-string argument, several calls, …
    """
    call = parse_call(text, ACTION_SPECS)
    spec = ACTION_SPECS[call.name]
    args: list[str] = []
    for p in spec.params:
        v = call.kwargs[p]
        if p == "bid" and isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            v = str(v)
        if not isinstance(v, str):
            raise ActionParseError(f"{call.name}: argument `{p}` must be a string, got {type(v).__name__}",
                                   name=call.name, kwargs=call.kwargs)
        args.append(v)
    return Action(call.name, tuple(args))


def action_prompt() -> str:
    """The action section of the executor prompt, made from the functions' signatures and docstrings."""
    lines = ["Answer with exactly one action, written as a function call:"]
    for fn in ACTION_FUNCTIONS:
        sig = inspect.signature(fn)
        lines.append(f"\n{fn.__name__}{sig}".replace("'", ""))
        lines.extend("    " + ln for ln in (inspect.getdoc(fn) or "").splitlines())
    return "\n".join(lines)


def tool_schemas() -> list[dict]:
    """OpenAI-style tool schemas for the seven actions (for tool-calling servers)."""
    return [ACTION_SPECS[fn.__name__].json_schema() for fn in ACTION_FUNCTIONS]
