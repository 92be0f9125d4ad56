"""BrowserGym high-level actions: one definition feeds the prompt, the parser and the tool schema.

Each action is a plain function below whose signature and docstring are the single source of
truth (the way BrowserGym's ``HighLevelActionSet`` documents its actions). The functions are
never called to act on a page: a world applies a parsed :class:`Action` itself. Text from a
model is parsed with :mod:`ast` and :mod:`tokenize` only — never ``exec``/``eval`` — so a string
like ``__import__('os').system('…')`` is just a parse error.

The same call syntax serves the evidence-ledger tool world (``get_charge(charge_id='C2')``):
:func:`parse_call` is the generic parser, :func:`parse_action` the web-action one.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

MAX_CALL_CHARS = 8192
"""Longest call text considered (characters); longer calls are rejected with a clear error."""


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
    """A parsed call: name plus keyword arguments (positional ones mapped to parameter names)."""

    name: str
    kwargs: Mapping[str, Any]
    text: str


class ActionParseError(ValueError):
    """Raised when text does not hold exactly one valid call; the message says precisely why."""


_IDENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def _call_spans(text: str, names: Sequence[str]) -> list[tuple[int, int]]:
    """Spans ``(start, end)`` of balanced ``name(...)`` calls to known names, left to right.

    Parenthesis depth is tracked with :mod:`tokenize`, so parentheses inside string literals do
    not count. Linear in the length of the text.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    known = set(names)
    while True:
        m = _IDENT.search(text, pos)
        if m is None:
            return spans
        if m.group(1) not in known:
            pos = m.end(1)
            continue
        start = m.start(1)
        end = _balanced_end(text, m.end() - 1)
        if end is None:
            pos = m.end()
            continue
        spans.append((start, end))
        pos = end


def _balanced_end(text: str, open_paren: int) -> int | None:
    """Index just past the ``)`` matching the ``(`` at ``open_paren``, or None if unbalanced."""
    sub = text[open_paren:]
    # tokenize works line by line; keep absolute offsets per line.
    line_starts = [0]
    for i, ch in enumerate(sub):
        if ch == "\n":
            line_starts.append(i + 1)
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(sub).readline):
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth -= 1
                if depth == 0:
                    row, col = tok.end
                    return open_paren + line_starts[row - 1] + col
            elif tok.type in (tokenize.ENDMARKER,):
                return None
    except (tokenize.TokenError, IndentationError, SyntaxError, ValueError):
        return None
    return None


def _literal(node: ast.AST, where: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ActionParseError(f"{where} must be a literal (a quoted string or a number), "
                               f"got `{ast.unparse(node)[:80]}`") from None


def parse_call(text: str, specs: Mapping[str, CallSpec]) -> Call:
    """Parse exactly one call to one of ``specs`` from model text.

    Text around the call is allowed (``"I will submit now: click('20')"``), as are Markdown code
    fences; two or more calls are an error. Arguments must be Python literals; positional
    arguments are mapped to parameter names in order; unknown keywords, missing required
    arguments and too many arguments are errors.

    Args:
        text: raw model output (any length; calls longer than :data:`MAX_CALL_CHARS` rejected).
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
    if len(call_text) > MAX_CALL_CHARS:
        raise ActionParseError(f"call is {len(call_text)} characters long; at most {MAX_CALL_CHARS}")
    try:
        tree = ast.parse(call_text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        why = getattr(exc, "msg", None) or exc.__class__.__name__
        raise ActionParseError(f"invalid call syntax in `{call_text[:80]}`: {why}") from None
    node = tree.body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ActionParseError(f"`{call_text[:80]}` is not a plain function call")
    spec = specs[node.func.id]
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        raise ActionParseError(f"{spec.name}: *args/**kwargs are not allowed")
    if len(node.args) > len(spec.params):
        raise ActionParseError(f"{spec.name} takes {len(spec.params)} argument(s) "
                               f"({', '.join(spec.params) or 'none'}), got {len(node.args)}")
    kwargs: dict[str, Any] = {}
    for name, arg in zip(spec.params, node.args):
        kwargs[name] = _literal(arg, f"{spec.name}: argument `{name}`")
    for kw in node.keywords:
        if kw.arg not in spec.params:
            raise ActionParseError(f"{spec.name}: unknown argument `{kw.arg}`; "
                                   f"expected {', '.join(spec.params) or 'no arguments'}")
        if kw.arg in kwargs:
            raise ActionParseError(f"{spec.name}: argument `{kw.arg}` given twice")
        kwargs[kw.arg] = _literal(kw.value, f"{spec.name}: argument `{kw.arg}`")
    missing = [p for p in spec.params[: spec.required] if p not in kwargs]
    if missing:
        raise ActionParseError(f"{spec.name}: missing argument(s) {', '.join(missing)}")
    return Call(spec.name, kwargs, call_text)


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
            raise ActionParseError(f"{call.name}: argument `{p}` must be a string, got {type(v).__name__}")
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
