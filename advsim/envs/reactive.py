"""The reactive evaluation adversary of AdvSim2Real, as a Gymnasium wrapper around WebForms-v0.

AdvSim2Real evaluates executors against a *reactive* adversary: before each transition it sees
the goal, the current page and the executor's pending action and answers *wait* or *inject*;
it gets at most 11 queries of at most 256 tokens per episode, and querying stops after the first
accepted injection (rendered and passing the render gate).

This wrapper implements exactly that protocol around :class:`advsim.envs.web_forms.WebFormsEnv`:

* On ``step(a_t)`` (t = actions taken so far) the adversary is queried with an
  :class:`AdversaryQuery` (goal, page o_t, pending action a_t) — unless (1) an injection was
  already accepted this episode (the stop rule), (2) ``max_queries`` queries were already made,
  (3) a_t ends the episode (``send_msg_to_user``), or (4) a_t is the last allowed action
  (t + 1 = ``max_steps``): in (3) and (4) the next page is never shown to the executor. With
  the benchmark's 12-action episodes, (4) alone leaves at most 11 queries — the paper's budget.
* An answer to inject is an :class:`forms_bench.injection.Injection`; its transition d is set to
  t + 1 (the page the executor sees after a_t) whatever the adversary wrote, and it is handed to
  :meth:`WebFormsEnv.inject`, which renders it after a_t and keeps it only if the render gate
  passes. A rejected injection does not stop querying.
* Token budget: a decision that reports more than ``max_query_tokens`` generated tokens is
  discarded (treated as wait, logged as ``over token budget``). Engine-backed adversaries are
  asked for at most ``max_query_tokens`` new tokens, so they can only hit it by truncation (an
  unfinished JSON object, parsed as malformed → wait).

``info`` gains, every step: ``adversary_queries`` (queries so far), ``adversary_tokens``
(tokens reported so far), ``adversary_injected_at`` (d of the accepted injection or None); at
episode end: ``adversary_log`` (one dict per query), ``adversary_injection`` (the accepted α as
a dict, or None), ``target_taken`` (whether the executor took the accepted α's target action ζ
after it was rendered; None without ζ) and ``trajectory`` (a :class:`judges.lm.Trajectory`
with the world's record, ready for an LM judge or the oracle judge).

Trajectory judge: WebForms-v0's own judge hook sees only the world's record, which is all the
strict check needs but not what an LM judge reads. Pass ``judge=`` (e.g. an
:class:`judges.lm.LMJudge`) and the wrapper judges the recorded trajectory at episode end: the
final reward becomes ``float(j)`` and ``info`` gains ``judge_success``, ``judge_reasons`` and
``judge_raw`` (the LM completions, [] for other judges), while ``info["success"]`` stays the
environment's verdict (the strict check on the true state) — so judge-vs-strict disagreements
are counted per episode.

Adversaries are callables ``(AdversaryQuery) -> AdversaryDecision``: :class:`EngineAdversary`
(any :class:`policies.engines.Engine`, JSON α), :class:`ScriptedAdversary`,
:class:`WaitAdversary`, :class:`FixedAdversary`; :mod:`advsim.attacks` adds the built-in corpus
and a client for any OpenAI-compatible endpoint. They, the query and decision types, the budget
constants, the prompt and the reply parser are in :mod:`advsim.envs.adversaries` (re-exported
here); this module is the wrapper.

Source: AdvSim2Real (reactive evaluation adversary; 11 queries × 256 tokens; stop after the
first accepted injection; render gate).
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym

from advsim.envs.adversaries import (ADVERSARY_SYSTEM, MAX_QUERIES, MAX_QUERY_TOKENS, Adversary, AdversaryDecision,
                                     AdversaryQuery, EngineAdversary, FixedAdversary, ScriptedAdversary,
                                     WaitAdversary, adversary_messages, parse_adversary_reply)
from forms_bench.actions import ActionParseError, parse_action
from forms_bench.injection import Injection
from forms_bench.schema import Task
from judges.lm import Trajectory


class ReactiveAdversaryEnv(gym.Wrapper):
    """WebForms-v0 under a reactive adversary (protocol in the module docstring).

    Args:
        env: a :class:`advsim.envs.web_forms.WebFormsEnv` (possibly wrapped).
        adversary: ``(AdversaryQuery) -> AdversaryDecision``; None = never queried (the wrapper
            then only records the trajectory).
        max_queries: queries per episode (AdvSim2Real: 11).
        max_query_tokens: generated tokens per query (AdvSim2Real: 256).
        judge: optional ``(task, Trajectory) -> Verdict`` applied to the recorded trajectory at
            episode end (see the module docstring).

    Raises:
        ValueError: a negative budget.
    """

    def __init__(self, env: gym.Env, adversary: Adversary | None, max_queries: int = MAX_QUERIES,
                 max_query_tokens: int = MAX_QUERY_TOKENS, judge: Callable[[Task, Trajectory], Any] | None = None):
        super().__init__(env)
        self.judge = judge
        if max_queries < 0 or max_query_tokens < 0:
            raise ValueError("budgets must be >= 0")
        self.adversary = adversary
        self.max_queries, self.max_query_tokens = max_queries, max_query_tokens
        self._reset_state()

    def _reset_state(self) -> None:
        self._goal, self._page, self._steps = "", "", 0
        self._queries, self._tokens = 0, 0
        self._log: list[dict[str, Any]] = []
        self._accepted: Injection | None = None
        self._accepted_at: int | None = None
        self._scheduled: tuple[Injection, dict] | None = None
        self._target_taken = False
        self._pages: list[str] = []
        self._actions: list[str] = []
        self._errors: list[str] = []
        self._message: str | None = None
        self._task_id = ""
        self._done = True  # until reset()

    @property
    def queries(self) -> int:
        """Queries made this episode."""
        return self._queries

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._reset_state()
        self._goal, self._page, self._task_id = obs["goal"], obs["page"], info["task_id"]
        self._pages = [obs["page"]]
        self._done = False
        if info.get("injected"):  # an α passed through reset options was accepted at d = 0
            inj = (options or {}).get("injection")
            self._accepted = inj if isinstance(inj, Injection) else Injection.model_validate(inj)
            self._accepted_at = 0
        return obs, self._info(info)

    def _info(self, info: dict) -> dict:
        info = dict(info)
        info.update(adversary_queries=self._queries, adversary_tokens=self._tokens,
                    adversary_injected_at=self._accepted_at)
        return info

    def _should_query(self, pending) -> bool:
        if self.adversary is None or self._accepted is not None or self._queries >= self.max_queries:
            return False
        if pending is not None and pending.name == "send_msg_to_user":
            return False
        return self._steps + 1 < self.unwrapped.max_steps

    def _query(self, action_text: str, pending) -> None:
        q = AdversaryQuery(goal=self._goal, page=self._page,
                           pending_action=pending.to_text() if pending is not None else action_text,
                           step=self._steps, query_index=self._queries,
                           queries_left=self.max_queries - self._queries - 1,
                           max_tokens=self.max_query_tokens, task_id=self._task_id,
                           task=self.unwrapped.task)
        self._queries += 1
        d = self.adversary(q)
        self._tokens += int(d.n_tokens)
        entry = {"query": q.query_index, "step": q.step, "pending_action": q.pending_action,
                 "decision": "wait" if d.wait else "inject", "raw": d.raw, "n_tokens": d.n_tokens,
                 "error": d.error, "accepted": False, "gate_reasons": []}
        self._log.append(entry)
        if d.injection is None:
            return
        if d.n_tokens > self.max_query_tokens:
            entry.update(decision="wait", error=f"over token budget: {d.n_tokens} > {self.max_query_tokens}")
            return
        inj = d.injection.model_copy(update={"transition": self._steps + 1})
        entry["injection"] = inj.model_dump()
        if self.unwrapped.inject(inj):
            self._scheduled = (inj, entry)

    def step(self, action: str):
        if self._done:  # let the environment raise its own error; never query the adversary
            return self.env.step(action)
        try:
            pending = parse_action(action)
        except ActionParseError:
            pending = None
        if self._should_query(pending):
            self._query(action, pending)
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        self._page = obs["page"]
        self._pages.append(obs["page"])
        self._actions.append(info.get("action") or action)
        self._errors.append(info.get("action_error", ""))
        if info.get("action") and pending is not None and pending.name == "send_msg_to_user":
            self._message = pending.args[0]
        if self._accepted is not None and self._accepted.target_action and self._accepted_at is not None \
                and self._steps - 1 >= self._accepted_at and info.get("action") == self._accepted.target_action:
            self._target_taken = True
        if self._scheduled is not None:
            inj, entry = self._scheduled
            self._scheduled = None
            if info.get("injected"):
                self._accepted, self._accepted_at = inj, inj.transition
                entry["accepted"] = True
            else:
                entry["gate_reasons"] = list(info.get("injection_rejected", []))
        info = self._info(info)
        if terminated or truncated:
            self._done = True
            info["adversary_log"] = [dict(e) for e in self._log]
            info["adversary_injection"] = self._accepted.model_dump() if self._accepted else None
            info["target_taken"] = (self._target_taken if self._accepted is not None
                                    and self._accepted.target_action else None)
            info["trajectory"] = Trajectory(goal=self._goal, pages=list(self._pages), actions=list(self._actions),
                                            errors=list(self._errors), message=self._message,
                                            task_id=self._task_id, record=info.get("record"))
            if self.judge is not None:
                v = self.judge(self.unwrapped.task, info["trajectory"])
                reward = float(v.success)
                info.update(judge_success=bool(v.success), judge_reasons=list(v.reasons),
                            judge_raw=list(getattr(v, "raw", [])))
        return obs, reward, terminated, truncated, info


__all__ = ["MAX_QUERIES", "MAX_QUERY_TOKENS", "AdversaryQuery", "AdversaryDecision", "Adversary",
           "ADVERSARY_SYSTEM", "adversary_messages", "parse_adversary_reply", "EngineAdversary",
           "WaitAdversary", "ScriptedAdversary", "FixedAdversary", "ReactiveAdversaryEnv"]
