"""The evidence-ledger tool world (SafeActBench) as a task suite over ``advsim/EvidenceLedger-v0``."""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Sequence

import gymnasium as gym

from advsim.suites.protocol import BatchedPrompt, Oracle, first_observation


class PlanOracle:
    """Plays a ledger plan (:data:`worlds.ledger.suite.PlanItem` list): literal calls as they
    are, and each expected action's call built when it is due, with the ids earlier actions
    returned (read from the env's ``info["output"]``)."""

    def __init__(self, suite, case, plan: Sequence):
        self.suite, self.case, self.plan = suite, case, list(plan)
        self._specs = {a.id: a for a in case.spec.actions}
        self._outputs: dict[str, str] = {}
        self._last: str | None = None  # the expected action played last (its output comes next)
        self._i = 0

    def act(self, obs: dict, info: dict) -> str:
        """The next plan item as call text (``final_answer('Done.')`` after the last)."""
        from worlds.ledger.suite import Act, action_call

        if self._last is not None and info.get("output"):
            self._outputs[self._last] = info["output"]
        self._last = None
        if self._i >= len(self.plan):
            return "final_answer('Done.')"
        item = self.plan[self._i]
        self._i += 1
        if isinstance(item, Act):
            self._last = item.action
            return action_call(self.case, self.suite.tools, self._specs[item.action], self._outputs,
                               dict(item.overrides))
        return item


class EvidenceLedgerSuite:
    """The evidence-ledger tool world (SafeActBench) as a :class:`TaskSuite` over
    ``advsim/EvidenceLedger-v0``.

    Args:
        cases: a user's case file (``docs/own-ledger-cases.md``) instead of the frozen suite.
        domains: the domains the curriculum is asked about and training cases come from
            (default: all six built-in ones; ValueError for another name).
        tool_listing: ``"full"`` or ``"compact"`` tool list in the observation's context
            (:class:`~advsim.envs.ledger.EvidenceLedgerEnv`).
    """

    name = "evidence-ledger"
    env_id = "advsim/EvidenceLedger-v0"
    groups = ("V0", "V1", "V2", "V3", "Legacy")
    group_name = "protocol"

    def __init__(self, cases=None, tool_listing: str = "full", domains: Sequence[str] | None = None):
        from worlds.ledger.own import load_cases
        from worlds.ledger.schema import DOMAINS
        from worlds.ledger.suite import load_suite

        self.cases_path = cases
        self.tool_listing = tool_listing
        self.domains = list(domains or DOMAINS)
        unknown = [d for d in self.domains if d not in DOMAINS]
        if unknown:
            raise ValueError(f"unknown ledger domains {unknown}; one of {', '.join(DOMAINS)}")
        self.suite = load_cases(cases) if cases is not None else load_suite()

    def tasks(self) -> list:
        """The cases (:class:`worlds.ledger.schema.Case`)."""
        return list(self.suite.cases)

    def task_id(self, task) -> str:
        """``case.id``."""
        return task.id

    def make_env(self, max_steps: int | None = None) -> gym.Env:
        """An ``EvidenceLedgerEnv`` over the same cases."""
        from advsim.envs.ledger import EvidenceLedgerEnv

        kw = {} if max_steps is None else {"max_steps": max_steps}
        return EvidenceLedgerEnv(cases=self.cases_path, tool_listing=self.tool_listing, **kw)

    def reset_options(self, task, injection=None) -> dict:
        """``{"task": case, "injection": α}`` (the case may come from outside the suite: a
        curriculum's, :func:`worlds.ledger.difficulty.instantiate`): α
        (:class:`~worlds.ledger.injection.ToolInjection`) is written into a record's free-text
        field after d actions and shows in later tool results."""
        return {"task": task, "injection": injection}

    def executor_prompt(self, io) -> BatchedPrompt:
        """``io.ledger_executor_prompt(context, transcript, last error)``: the transcript holds
        every call so far with its result (the previous actions are in it).

        Raises:
            ValueError: ``io`` has no ledger prompt (a web-only RoleIO).
        """
        if getattr(io, "ledger_executor_prompt", None) is None:
            raise ValueError("this RoleIO has no ledger_executor_prompt (policies.roles.role_io builds one)")
        chat = getattr(io, "ledger_executor_chat", None)
        return BatchedPrompt(
            lambda obs, history: io.ledger_executor_prompt(obs["context"], obs["transcript"], obs["last_action_error"]),
            None if chat is None else
            (lambda obs, history: chat(obs["context"], obs["transcript"], obs["last_action_error"])),
            getattr(io, "encode_chats", None))

    def observation_text(self, obs: dict) -> str:
        """The last tool result (JSON text)."""
        return obs["tool_result"]

    def ground_truth(self, task) -> Oracle:
        """The reference plan (:func:`worlds.ledger.suite.reference_plan`)."""
        from worlds.ledger.suite import reference_plan

        return PlanOracle(self.suite, task, reference_plan(task, self.suite.tools))

    def negative_controls(self, task) -> dict[str, tuple[Oracle, str]]:
        """The suite's negative controls (:func:`worlds.ledger.suite.controls`), each with the
        reason code the evaluator must give."""
        from worlds.ledger.suite import controls

        return {name: (PlanOracle(self.suite, task, plan), want)
                for name, (plan, want) in controls(self.suite, task).items()}

    def success(self, info: dict) -> bool:
        """``info["success"]`` (ECS = 1)."""
        return bool(info.get("success"))

    # ------------------------------------------ co-evolution binding (stages and warm start)
    top_level = 5
    """The highest difficulty level (:data:`worlds.ledger.difficulty.TOP_LEVEL`)."""

    def curriculum_hints(self) -> list[str]:
        """What the curriculum is asked to propose for, in turn: the suite's domains."""
        return list(self.domains)

    def task_hint(self, task) -> str:
        """The hint a case belongs to (its domain)."""
        return task.domain

    def random_proposal(self, rng, level: int | None = None, hint: str | None = None):
        """A :class:`~worlds.ledger.difficulty.LedgerProposal` drawn with ``rng`` (domain
        ``hint`` or drawn from the suite's domains, ``level`` or drawn 0-5, seed drawn)."""
        from worlds.ledger.difficulty import TOP_LEVEL, LedgerProposal

        return LedgerProposal(domain=hint or rng.choice(self.domains),
                              level=rng.randint(0, TOP_LEVEL) if level is None else level, seed=rng.randint(0, 999_999))

    def curriculum_prompt(self, io, hint: str, lines: Sequence[str]) -> list[int]:
        """The curriculum's prompt ids for a domain and history lines."""
        return io.ledger_curriculum_prompt(hint, lines)

    def parse_proposal(self, io, text: str):
        """A LedgerProposal from the curriculum's output.

        Raises:
            ValueError: no JSON object, or a field missing or invalid (named).
        """
        from pydantic import ValidationError

        from worlds.ledger.difficulty import LedgerProposal
        from worlds.ledger.schema import DOMAINS

        obj = io.parse_ledger_curriculum(text)
        try:
            p = LedgerProposal.model_validate(obj)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ValueError(f"curriculum: {'.'.join(str(x) for x in err['loc']) or '<object>'}: {err['msg']}") from None
        if p.domain not in DOMAINS:
            raise ValueError(f"curriculum: domain: unknown domain {p.domain!r}")
        return p

    def proposal_from_dict(self, data: dict):
        """A logged proposal back (``proposals.jsonl``)."""
        from worlds.ledger.difficulty import LedgerProposal

        return LedgerProposal.model_validate(data)

    def proposal_json(self, proposal) -> str:
        """Compact JSON of a proposal, as the curriculum writes it."""
        return proposal.model_dump_json(exclude_none=True)

    def instantiate(self, proposal):
        """The case a proposal asks for (:func:`worlds.ledger.difficulty.instantiate`; ValueError)."""
        from worlds.ledger.difficulty import instantiate

        return instantiate(proposal)

    def task_text(self, task) -> str:
        """What determines a case, for R_C's repetition clusters: its request (the context's
        first paragraph, before the rules)."""
        return task.context.split("\n")[0]

    def control_actions(self, task) -> list[str]:
        """The reference plan's calls as played in the env (canonical texts)."""
        env = self.make_env(max_steps=40)
        try:
            oracle = self.ground_truth(task)
            obs, info = env.reset(options=self.reset_options(task))
            out = []
            for _ in range(40):
                obs, _, term, trunc, info = env.step(oracle.act(obs, info))
                out.append(info["action"])
                if term or trunc:
                    break
        finally:
            env.close()
        return out

    def adversary_prompt(self, io, task, control: Sequence[str]) -> list[int]:
        """The adversary's prompt ids: the case context with its tool list and a successful
        control's calls."""
        return io.ledger_adversary_prompt(self.first_observation(task)["context"], control)

    def parse_injection(self, io, text: str, task=None):
        """α (:class:`~worlds.ledger.injection.ToolInjection`, written into the case's primary
        record) from the adversary's output.

        Raises:
            ValueError: the line is malformed, or ζ is not one call of ``task``'s tools.
        """
        from pydantic import ValidationError

        from forms_bench.actions import ActionParseError, parse_call
        from worlds.ledger.injection import ToolInjection

        d, target, z = io.parse_ledger_adversary(text)
        if target is not None and task is not None:
            try:
                parse_call(target, self._specs(task))
            except ActionParseError as exc:
                raise ValueError(f"adversary: call: {exc}") from None
        try:
            return ToolInjection(instruction=z, transition=d, target_action=target)
        except ValidationError as exc:
            raise ValueError(f"adversary: {exc.errors()[0]['msg']}") from None

    def _specs(self, task):
        from worlds.ledger.tools import ToolWorld

        return ToolWorld(task, self.suite.tools, self.suite.entity_types).specs

    def null_injection(self, like):
        """The null injection for α (:func:`worlds.ledger.injection.benign_injection`)."""
        from worlds.ledger.injection import benign_injection

        return benign_injection(like)

    def injection_from_dict(self, data: dict):
        """A logged α back."""
        from worlds.ledger.injection import ToolInjection

        return ToolInjection.model_validate(data)

    def task_to_dict(self, task) -> dict:
        """A case as JSON-able data (checkpoint state)."""
        return task.model_dump(mode="json")

    def task_from_dict(self, data: dict):
        """A case back from :meth:`task_to_dict`, validated against the suite's declarations."""
        from worlds.ledger.validation import validate_case

        return validate_case(data, self.suite.tools, self.suite.entity_types)

    def training_tasks(self, n: int, seed: int, levels: dict[int, float] | None = None) -> list:
        """``n`` generated cases of the suite's domains, split over ``levels`` by weight
        (default: level 0 only; :func:`worlds.ledger.difficulty.sample_cases`)."""
        from worlds.ledger.difficulty import sample_cases

        levels = levels or {0: 1.0}
        total = sum(levels.values())
        counts = {lv: round(n * w / total) for lv, w in levels.items()}
        counts[max(levels, key=levels.get)] += n - sum(counts.values())
        return [c for lv, k in counts.items() for c in sample_cases(lv, k, seed, self.domains)]

    def executor_demonstrations(self, io, tokenizer, w) -> list[tuple[list[int], list[int]]]:
        """The executor's warm-start examples: every reference step of ``w.executor_tasks``
        generated cases (:func:`advsim.warmstart.suite_demonstrations`)."""
        from advsim.warmstart import suite_demonstrations

        return suite_demonstrations(self, io, tokenizer, self.training_tasks(w.executor_tasks, w.seed, w.executor_levels))

    def adversary_demonstrations(self, io, tokenizer, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
        """The adversary's warm-start examples: a generated case's context and reference calls
        → an injection of the built-in corpus (:func:`worlds.ledger.injection.corpus`; styles
        and transitions 0-2 vary) in the one-line format."""
        import random

        from advsim.warmstart import encode_target
        from policies.roles import format_adversary
        from worlds.ledger.injection import corpus

        rng = random.Random(f"warmstart-adversary-ledger:{seed}")
        out = []
        for case in self.training_tasks(n, seed + 1):
            styles = list(corpus(case, transition=rng.randint(0, 2)).values())
            inj = styles[rng.randrange(len(styles))]
            out.append((self.adversary_prompt(io, case, self.control_actions(case)),
                        encode_target(tokenizer, format_adversary(inj))))
        return out

    def first_observation(self, task) -> dict:
        """The observation ``reset`` gives for ``task`` (no injection)."""
        return first_observation(self, task)

    def parse_action(self, text: str, task) -> Any:
        """One call of ``task``'s tools (:func:`forms_bench.actions.parse_call`), or ValueError."""
        from forms_bench.actions import parse_call

        return parse_call(text, self._specs(task))

    # ------------------------------------------------------------------- evaluation binding
    def eval_pool(self, level: int, n: int, seed: int) -> list:
        """``n`` generated cases at ``level`` of the suite's domains, drawn with ``seed``
        (:func:`worlds.ledger.difficulty.sample_cases`), with case seeds from ``seed`` up: the
        evaluation's ``seed`` (``POOL_SEED`` = 1,000,000) lies above every seed a proposal or the
        warm start can use (≤ 999,999), so the pool is never trained on."""
        from worlds.ledger.difficulty import sample_cases

        return sample_cases(level, n, seed, self.domains, base=seed) if n > 0 else []

    def frozen_tasks(self, spec: str) -> list:
        """Cases of the served suite for ``eval.tasks``.

        ``"all"``: every case, in suite order. ``"sample:N"``: N cases per protocol, taken in turn
        from each domain (the first unused case of the next domain that still has one), so a
        small sample spans the domains instead of the suite's first one. Ids: those cases, in the
        given order.

        Raises:
            ValueError: an id that is not in the suite or listed twice, or a malformed spec.
        """
        cases = list(self.suite.cases)
        if spec == "all":
            return cases
        from forms_bench.suite import sample_size

        n = sample_size(spec)
        if n is not None:
            out = []
            for protocol in dict.fromkeys(c.protocol for c in cases):
                by_domain: dict[str, list] = {}
                for c in cases:
                    if c.protocol == protocol:
                        by_domain.setdefault(c.domain, []).append(c)
                queues = list(by_domain.values())
                taken = 0
                while taken < n and any(queues):
                    for q in queues:
                        if q and taken < n:
                            out.append(q.pop(0))
                            taken += 1
            return out
        by_id = {c.id: c for c in cases}
        ids = [x.strip() for x in spec.split(",") if x.strip()]
        missing = [x for x in ids if x not in by_id]
        if missing or not ids:
            raise ValueError(f"eval.tasks: {spec!r}: not case ids of this suite ({', '.join(missing) or 'none given'}); "
                             "expected 'all', 'sample:N' or comma-separated case ids")
        twice = sorted(x for x, k in Counter(ids).items() if k > 1)
        if twice:
            raise ValueError(f"eval.tasks: {spec!r}: case id(s) listed more than once: {', '.join(twice)} "
                             "(each would count twice in every rate)")
        return [by_id[x] for x in ids]

    def episode_metrics(self, infos: Sequence[dict]) -> dict:
        """SafeActBench's metrics over finished episodes' last ``info`` (ECS per protocol and
        domain, P-M, D-M, BSR, PAR, CAS, Gap, Part.; :func:`worlds.ledger.evaluator.aggregate`)."""
        from types import SimpleNamespace

        from worlds.ledger.evaluator import aggregate

        rows = [SimpleNamespace(protocol=i["protocol"], domain=i["domain"], ecs=i["ecs"], **i["flags"])
                for i in infos if i.get("ecs") is not None]
        return aggregate(rows)

    def injectable(self, task) -> bool:
        """A case whose tool results can carry an injection (not Legacy: no tool results)."""
        return task.protocol != "Legacy"

    def task_group(self, task) -> str:
        """The case's protocol (V0–V3, Legacy)."""
        return task.protocol

    def corpus_injection(self, task, rng):
        """One style of the built-in corpus (:func:`worlds.ledger.injection.corpus`) at a
        transition 0–2, both drawn with ``rng``; None for a case without tool results."""
        from worlds.ledger.injection import corpus

        if not self.injectable(task):
            return None
        styles = list(corpus(task, transition=rng.randint(0, 2)).values())
        return styles[rng.randrange(len(styles))]

    def real_world(self):
        """None: the ledger world has no real counterpart here."""
        return None

    def reactive_env(self, env, adversary):
        """None: no reactive protocol in the ledger world yet."""
        return None

    def reactive_adversary(self, engine, io, adapter: str, *, temperature: float, max_new_tokens: int, seed: int):
        """None: no reactive protocol in the ledger world yet."""
        return None

    def lm_judge(self, engine, tokenizer, seed: int):
        """None: the ledger's verdict is computed from the ledger (no LM judge)."""
        return None
