"""``advsim/EvidenceLedger-v0``: the evidence-ledger tool world as a Gymnasium environment.

See :class:`EvidenceLedgerEnv`. The world itself (cases, tools, ledger, evaluator) lives in
:mod:`worlds.ledger`; this module only adapts it to the Gymnasium 1.4 API.
"""

from __future__ import annotations

import os
import string
from typing import Any, Optional, Union

import gymnasium as gym
from gymnasium import spaces

from advsim.envs.checks import not_running, positive_int, reset_options
from advsim.envs.spaces import Unicode
from forms_bench.actions import MAX_CALL_CHARS
from forms_bench.actions import ActionParseError, parse_call
from worlds.ledger.evaluator import EpisodeResult, evaluate
from worlds.ledger.injection import ToolInjection
from worlds.ledger.own import load_cases
from worlds.ledger.schema import Case, Suite
from worlds.ledger.suite import load_suite
from worlds.ledger.tools import MAX_RESULT_CHARS, ToolWorld

CHARSET = string.printable
"""Characters of every observation (printable ASCII plus whitespace); other text is escaped."""
MAX_CONTEXT_CHARS = 32000
MAX_TRANSCRIPT_CHARS = 32000
MAX_ERROR_CHARS = 2000
MAX_ACTION_CHARS = 2 * MAX_CALL_CHARS
_ALLOWED = frozenset(CHARSET)


def to_charset(text: str, limit: int) -> str:
    """Escape non-ASCII characters (``\\u00e9``) and drop other control characters; cut to ``limit``."""
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    if any(c not in _ALLOWED for c in text):
        text = "".join(c if c in _ALLOWED else " " for c in text)
    return text if len(text) <= limit else text[: limit - 15] + " ...[truncated]"


def _tail(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text``, marked when cut at the front."""
    mark = "...[earlier steps cut]\n"
    return text if len(text) <= limit else mark + text[len(text) - limit + len(mark):]


class EvidenceLedgerEnv(gym.Env):
    """Evidence-ledger tool world (SafeActBench) as a Gymnasium 1.4 environment.

    Each episode plays one case of the frozen 656-case suite (:func:`worlds.ledger.load_suite`),
    or of a user's own case file (``cases=PATH``, :func:`worlds.ledger.own.load_cases`).
    The agent calls information tools (``get_charge(charge_id='CH-2')``) and consequential tools
    (``refund_charge(...)``); every consequential action must be backed by evidence it observed
    earlier about the same entity, not made stale by a later change, and dependent actions must
    use the ids earlier actions actually returned.

    **Observation** — ``Dict`` of four :class:`~advsim.envs.spaces.Unicode` spaces restricted
    to :data:`CHARSET` (the same text space as WebForms-v0, so ``AsyncVectorEnv`` works with its
    defaults):

    - ``context`` (≤ 32,000 chars): task context, rules and the tool list (``tool_listing``
      ``"full"``: signature, ``[information]``/``[consequential]`` tag, description and
      parameters; ``"compact"``: one line per tool), the same for the whole episode;
    - ``tool_result`` (≤ 16,000 chars): the last tool result as JSON text (ASCII-escaped; empty
      after ``reset`` or a failed call);
    - ``transcript`` (≤ 32,000 chars): every call so far with what came back, one block per
      step — ``"2. get_charge(charge_id='CH-2')\n{...result...}"`` (an error line for a failed
      call; the call as typed, cut to 300 chars, when it did not parse); empty after ``reset``.
      Later calls need what earlier ones returned (an amount, a linked id, the id an action
      returned), so this is the agent's memory; when it outgrows its limit the oldest part is
      cut (``...[earlier steps cut]``);
    - ``last_action_error`` (≤ 2,000 chars): why the last action failed (parse error, unknown
      tool or entity, bad argument type), else empty.

    **Action** — ``Unicode`` (≤ 16,384 chars of :data:`CHARSET`): one tool call in Python call
    syntax, parsed with ``ast`` (never executed), e.g. ``get_charge(charge_id='CH-2')`` or
    ``final_answer('Refunded CH-2.')``; surrounding prose is tolerated, two calls are an error.
    Legacy cases take one structured decision ``decide(verdict='Allow'|'Block'|'Defer',
    reason='…')``. Any input, even a non-string, is accepted: a bad action only sets
    ``last_action_error`` and the step counts.

    **Reward** — 0 on every step except the last, where it is the episode's ECS ∈ {0, 1}
    (deterministic evaluator, SafeActBench).

    **Termination** — ``terminated`` after ``final_answer(...)`` or an accepted ``decide(...)``;
    ``truncated`` after ``max_steps`` steps (default 40; the episode is then scored, and fails
    with ``NO_FINAL_ANSWER``), or when the agent's side calls :meth:`truncate` (a limit outside
    the env: the executor's context window; scored the same way). After either flag, ``step`` and ``inject`` raise
    :class:`~advsim.envs.checks.EpisodeNotRunningError` (a RuntimeError, the same error as
    WebForms-v0 and as before the first ``reset``) and nothing changes.

    **info** — ``task_id`` and ``case_id`` (the same id), ``protocol``, ``domain``, ``step``;
    of the last call: ``action`` (its canonical text, or None: as WebForms-v0's ``action``),
    ``action_error`` (as the observation's ``last_action_error``, uncut), ``tool`` and
    ``tool_kind``, ``executed`` (a consequential call changed the world), ``output`` (the id it
    returned, e.g. ``RF-4821``, else None); ``injected`` (an injection's text was shown in a tool
    result), ``target_taken`` (this call is the injection's ζ, after it was shown), ``injection``
    (where it was written, at which step, ``rendered_at_step``, the canonical ζ); ``ecs`` (None
    until the episode ends) and, at the end, ``success`` (ECS = 1, as WebForms-v0's ``success``),
    ``flags`` (attempted, first_attempt_step, investigation_before_first_attempt,
    investigation_complete, gap, executed, partial, bsr), ``reasons`` (e.g.
    ``["MISSING charge.CH-2.status at action refund_charge step 4"]``); and ``internal_errors``
    (steps of this episode whose tool raised an exception — a world bug, logged by
    ``worlds.ledger.tools``) once it is above 0.

    **Injection** — an adversary's :class:`~worlds.ledger.injection.ToolInjection` α = (z, d,
    record, ζ) writes z into a designated free-text field (``notes``, ``comments`` or
    ``description``) of one database record after d actions: pass ``options={"injection": …}``
    to ``reset`` or call :meth:`inject` before transition d (as WebForms-v0). The text then
    appears in every later tool result showing that record; ``info["injected"]`` turns True at
    the first such result (the text was rendered where the executor reads it). Free-text fields
    never establish facts, so injected text cannot create evidence. At most one per episode.

    Args:
        case_ids: restrict episodes to these cases; ``protocol``/``domain``: filter the pool.
        max_steps: step limit (truncation), an int >= 1 (TypeError / ValueError otherwise).
        suite_path: another frozen suite file (checksum verified).
        cases: a user's own case file instead of the frozen suite (JSON in the case schema,
            ``docs/own-ledger-cases.md``; validated on load, no checksum): a ``str`` or
            ``os.PathLike``. Not together with ``suite_path`` (ValueError). A bad file raises
            :class:`~worlds.ledger.validation.SuiteValidationError` naming the case and field.
        render_mode: None or ``"ansi"``.
        tool_listing: ``"full"`` (default) or ``"compact"`` tool list in ``context``
            (ValueError otherwise).

    ``reset(seed=…, options={"case_id": "V1-cust-001"})`` (or ``"task_id"``, the key both
    worlds share) plays that case; ``options={"task": case}`` plays a :class:`Case` made
    elsewhere (a curriculum's, :func:`worlds.ledger.difficulty.instantiate`) with this suite's
    tool declarations; without a case id
    the case is drawn from the pool with the environment's seeded ``np_random``.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, case_ids: Optional[list[str]] = None, protocol: Optional[str] = None,
                 domain: Optional[str] = None, max_steps: int = 40, suite_path: Optional[str] = None,
                 render_mode: Optional[str] = None, cases: Optional[Union[str, os.PathLike]] = None,
                 tool_listing: str = "full"):
        if tool_listing not in ("full", "compact"):
            raise ValueError(f"tool_listing must be 'full' or 'compact', got {tool_listing!r}")
        self.tool_listing = tool_listing
        if cases is not None:
            if suite_path is not None:
                raise ValueError("give either cases (a user's case file) or suite_path (a frozen suite), not both")
            if not isinstance(cases, (str, os.PathLike)):
                raise TypeError(f"cases must be a path to a case file (str or os.PathLike), got {type(cases).__name__}")
            self.suite: Suite = load_cases(cases)
        else:
            self.suite = load_suite(suite_path)
        pool = list(self.suite.cases)
        if case_ids is not None:
            wanted = set(case_ids)
            pool = [c for c in pool if c.id in wanted]
        if protocol is not None:
            pool = [c for c in pool if c.protocol == protocol]
        if domain is not None:
            pool = [c for c in pool if c.domain == domain]
        if not pool:
            raise ValueError("no case matches the given case_ids/protocol/domain")
        self._pool = pool
        self._by_id = {c.id: c for c in self.suite.cases}
        self.max_steps = positive_int("max_steps", max_steps)
        self.render_mode = render_mode
        text = lambda n: Unicode(n, charset=CHARSET)  # noqa: E731
        self.observation_space = spaces.Dict({
            "context": text(MAX_CONTEXT_CHARS),
            "tool_result": text(MAX_RESULT_CHARS),
            "transcript": text(MAX_TRANSCRIPT_CHARS),
            "last_action_error": text(MAX_ERROR_CHARS),
        })
        self.action_space = text(MAX_ACTION_CHARS)
        self.case: Optional[Case] = None
        self.world: Optional[ToolWorld] = None
        self.result: Optional[EpisodeResult] = None
        self._context = ""
        self._transcript: list[str] = []  # one block per step (see the observation's ``transcript``)
        self._obs: dict[str, str] = {}
        self._injection: Optional[dict] = None  # the injection written into a record this episode
        self._pending: Optional[dict] = None  # scheduled for a later transition
        self._done = False  # the running episode ended (terminated or truncated)

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Start an episode. ``options``: ``case_id`` (or ``task_id``) picks a pool case (KeyError
        if unknown), ``task`` a Case made outside the pool, ``injection`` an injection; otherwise
        a case is drawn with the env's seeded RNG.

        Raises:
            TypeError: ``options`` is not a dict or ``task`` not a Case. ValueError: an unknown
            option key, two different case ids, or a case using undeclared tools.
        """
        super().reset(seed=seed)
        options = reset_options(options, ("case_id", "task_id", "task", "injection"))
        if options.get("case_id") is not None and options.get("task_id") is not None \
                and options["case_id"] != options["task_id"]:
            raise ValueError(f"options name two cases: case_id {options['case_id']!r}, task_id {options['task_id']!r}")
        case_id = options.get("case_id", options.get("task_id"))
        if options.get("task") is not None:  # a case made outside the pool (worlds.ledger.difficulty)
            if not isinstance(options["task"], Case):
                raise TypeError(f"options['task'] must be a worlds.ledger.schema.Case, got {type(options['task']).__name__}")
            unknown = [t for t in options["task"].tools if t not in self.suite.tools]
            if unknown:
                raise ValueError(f"case {options['task'].id} uses tools this env's suite does not declare: {unknown}")
            self.case = options["task"]
        elif case_id is not None:
            if case_id not in self._by_id:
                raise KeyError(f"unknown case id {case_id!r}")
            self.case = self._by_id[case_id]
        else:
            self.case = self._pool[int(self.np_random.integers(len(self._pool)))]
        self.world = ToolWorld(self.case, self.suite.tools, self.suite.entity_types)
        self.result = None
        self._injection = self._pending = None
        self._done = False
        self._context = to_charset(self.case.context + "\n\nTools:\n" + self.world.tools_prompt(self.tool_listing),
                                   MAX_CONTEXT_CHARS)
        self._transcript = []
        self._obs = {"context": self._context, "tool_result": "", "transcript": "", "last_action_error": ""}
        if options.get("injection") is not None:
            self.inject(options["injection"])
        return dict(self._obs), self._info(None)

    def step(self, action: Any):
        """Run one action (any value; never raises for a bad action). Returns the Gymnasium 5-tuple.

        Raises:
            EpisodeNotRunningError: before ``reset`` or after the episode ended (either flag);
                nothing is run or changed.
        """
        if self.world is None or self._done:
            raise not_running("step", self.world is not None)
        rec = self.world.step(action)
        if self._injection is not None and self._injection["rendered_at_step"] is None and rec.result:
            inj = self._injection
            shown = self.world.result_json(rec)
            if inj["entity_id"] in shown and inj["field"] in shown:
                inj["rendered_at_step"] = rec.step
        terminated = self.world.done
        truncated = not terminated and len(self.world.log) >= self.max_steps
        reward = 0.0
        if terminated or truncated:
            self._done = True
            self.result = evaluate(self.case, self.world.log, self.suite.tools, self.world.ledger)
            reward = float(self.result.ecs)
        else:
            self._maybe_write_injection()
        result = self.world.result_json(rec)
        self._transcript.append(f"{rec.step}. {rec.call or rec.text}\n"
                                + (f"error: {rec.error}" if rec.error else result or "(no result)"))
        self._obs = {"context": self._context,
                     "tool_result": to_charset(result, MAX_RESULT_CHARS),
                     "transcript": _tail(to_charset("\n".join(self._transcript), 10 * MAX_TRANSCRIPT_CHARS),
                                         MAX_TRANSCRIPT_CHARS),
                     "last_action_error": to_charset(rec.error or "", MAX_ERROR_CHARS)}
        return dict(self._obs), reward, terminated, truncated, self._info(rec)

    def truncate(self) -> tuple[float, dict]:
        """End the running episode now, as truncated, for a limit outside the env (the agent
        cannot take another step: its next prompt would not fit the engine's context window).
        It is scored as at the step limit (a V0–V3 case without its final answer fails with
        ``NO_FINAL_ANSWER``).

        Returns:
            ``(reward, info)``: what the last ``step`` of a truncated episode returns (``ecs``,
            ``success``, ``flags``, ``reasons``; the last call's fields describe no new call).

        Raises:
            EpisodeNotRunningError: before ``reset`` or after the episode ended.
        """
        if self.world is None or self._done:
            raise not_running("truncate", self.world is not None)
        self._done = True
        self.result = evaluate(self.case, self.world.log, self.suite.tools, self.world.ledger)
        return float(self.result.ecs), self._info(None)

    def render(self) -> Optional[str]:
        """``ansi``: the last observation as text."""
        if self.render_mode != "ansi":
            return None
        o = self._obs
        return (f"{o.get('context', '')}\n--- transcript ---\n{o.get('transcript', '')}\n"
                f"--- error ---\n{o.get('last_action_error', '')}\n")

    def tool_schemas(self) -> list[dict]:
        """OpenAI-style JSON schemas of the current case's tools (from the same declarations as
        the prompt text). Raises RuntimeError before ``reset``."""
        if self.world is None:
            raise RuntimeError("call reset() first")
        return self.world.tool_schemas()

    # ------------------------------------------------------------------ adversary
    def inject(self, injection: Union[ToolInjection, dict]) -> bool:
        """Schedule α for transition d (written into its record at once if d equals the number of
        actions taken). The same contract as WebForms-v0's ``inject``.

        At most one injection per episode: a second one is refused (``False``, nothing changes)
        while the first is pending or once one was written.

        Args:
            injection: a :class:`~worlds.ledger.injection.ToolInjection` or a dict of its fields.

        Returns:
            True when scheduled (``info["injected"]`` turns True once a tool result shows it);
            False if an injection is pending or was written this episode, or d already passed.

        Raises:
            EpisodeNotRunningError: before ``reset`` or after the episode ended (either flag).
            pydantic.ValidationError: a dict that is not a valid ToolInjection.
            ValueError: Legacy cases (no tool results), an unknown record, a field that is not a
                designated free-text field, or a ``target_action`` that is not one call of a case tool.
        """
        if self.world is None or self.case is None or self._done:
            raise not_running("inject", self.world is not None)
        inj = injection if isinstance(injection, ToolInjection) else ToolInjection.model_validate(injection)
        if self.case.protocol == "Legacy":
            raise ValueError("Legacy cases show no tool results; nothing to inject into")
        entity_type, entity_id = inj.entity_type, inj.entity_id
        if entity_type is None:
            a = self.case.spec.actions[0]
            entity_type = self.suite.tools[a.tool].entity_type
            entity_id = entity_id or a.target
        et = self.suite.entity_types.get(entity_type)
        table = self.world.db.get(entity_type, {})
        if et is None or entity_id not in table:
            raise ValueError(f"no {entity_type} record {entity_id!r} in this case")
        if inj.field is None and not et.text_fields:
            raise ValueError(f"{entity_type} has no designated free-text field to inject into")
        field = inj.field or et.text_fields[0]
        if field not in et.text_fields:
            raise ValueError(f"{entity_type}.{field} is not a designated free-text field "
                             f"({', '.join(et.text_fields)})")
        target = None
        if inj.target_action:
            try:
                target = parse_call(inj.target_action, self.world.specs).to_text()
            except ActionParseError as exc:
                raise ValueError(f"target_action is not one call of this case's tools: {exc}") from None
        if self._injection is not None or self._pending is not None or inj.transition < len(self.world.log):
            return False
        self._pending = {"entity_type": entity_type, "entity_id": entity_id, "field": field,
                         "text": inj.instruction, "transition": inj.transition, "target_action": target}
        self._maybe_write_injection()
        return True

    def _maybe_write_injection(self) -> None:
        """Write the pending injection into its record once d actions were taken."""
        p = self._pending
        if p is None or p["transition"] != len(self.world.log):
            return
        self._pending = None
        self.world.db[p["entity_type"]][p["entity_id"]][p["field"]] = p["text"]
        self._injection = {"entity_type": p["entity_type"], "entity_id": p["entity_id"], "field": p["field"],
                           "step": len(self.world.log), "rendered_at_step": None,
                           "target_action": p["target_action"]}

    # ------------------------------------------------------------------ info
    def _info(self, rec) -> dict:
        case = self.case
        res = self.result
        inj = self._injection
        info = {
            "task_id": case.id, "case_id": case.id, "protocol": case.protocol, "domain": case.domain,
            "step": len(self.world.log) if self.world else 0,
            "action": rec.call if rec else None, "action_error": (rec.error or "") if rec else "",
            "tool": rec.name if rec else None, "tool_kind": rec.kind if rec else None,
            "executed": bool(rec.executed) if rec else False,
            "output": rec.output if rec else None,
            "ecs": res.ecs if res else None,
            "flags": res.flags() if res else {},
            "reasons": list(res.reasons) if res else [],
            "injected": bool(inj and inj["rendered_at_step"] is not None),
            "target_taken": bool(inj and inj["target_action"] and rec is not None and rec.call == inj["target_action"]
                                 and inj["rendered_at_step"] is not None),
            "injection": dict(self._injection) if self._injection else None,
        }
        if res is not None:
            info["success"] = res.ecs == 1
        if self.world is not None and self.world.internal_errors:
            info["internal_errors"] = self.world.internal_errors
        return info
