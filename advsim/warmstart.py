"""Supervised warm start: each adapter learns to speak its role's format before RL.

A small backbone does not follow the action grammar zero-shot (ENVIRONMENT.md), so before the
co-evolution each role adapter is fine-tuned on demonstrations made from the benchmark's own
machinery — never the test set:

- executor: the oracle's actions on generated training tasks, one example per step (goal,
  current page, previous actions → the next action);
- curriculum: valid task specs (:class:`forms_bench.proposal.TaskProposal`) for a stratum hint;
- adversary: the project's injection-style corpus (:mod:`advsim.attacks`) applied to training
  tasks, as α JSON.
"""

from __future__ import annotations

import json
import random
from typing import Sequence

from advsim.coevolution import RoleIO
from forms_bench import STRATA, generate
from forms_bench.oracle import solve
from forms_bench.proposal import DOMAIN_NAMES, TaskProposal
from worlds.web.sim import SimWebWorld


def encode_target(tokenizer, text: str) -> list[int]:
    """Token ids of a completion the model should produce: the text, then end-of-sequence."""
    return list(tokenizer.encode(text, add_special_tokens=False)) + [tokenizer.eos_token_id]


def executor_examples(io: RoleIO, tokenizer, n_tasks: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """(prompt_ids, target_ids) per oracle step on ``n_tasks`` generated training tasks."""
    tasks = [t for s in STRATA for t in generate(s, max(1, -(-n_tasks // len(STRATA))), seed=seed)][:n_tasks]
    world = SimWebWorld()
    out = []
    for task in tasks:
        page = world.reset(task)
        history: list[str] = []
        for action in solve(task):
            text = action.to_text()
            out.append((io.executor_prompt(task.goal, page, history, ""), encode_target(tokenizer, text)))
            page = world.step(action)
            history.append(text)
    return out


def curriculum_examples(io: RoleIO, tokenizer, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """(prompt_ids, target_ids): a stratum hint and example specs → one valid spec of that stratum."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        stratum = STRATA[i % len(STRATA)]
        examples = [TaskProposal(stratum=rng.choice(STRATA), domain=rng.choice(DOMAIN_NAMES),
                                 seed=rng.randint(0, 999_999)).model_dump_json() for _ in range(3)]
        target = TaskProposal(stratum=stratum, domain=rng.choice(DOMAIN_NAMES), seed=rng.randint(0, 999_999))
        out.append((io.curriculum_prompt(stratum, examples), encode_target(tokenizer, target.model_dump_json())))
    return out


def adversary_examples(io: RoleIO, tokenizer, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """(prompt_ids, target_ids): a training task's goal, page and oracle trajectory → an α from
    the injection-style corpus, as JSON."""
    from advsim.attacks import corpus

    rng = random.Random(seed)
    tasks = [t for s in STRATA for t in generate(s, max(1, -(-n // len(STRATA))), seed=seed + 1)]
    world = SimWebWorld()
    out = []
    for i in range(n):
        task = tasks[i % len(tasks)]
        options = list(corpus(task, transition=rng.randint(0, 2)).values())
        inj = options[rng.randrange(len(options))]
        control = [a.to_text() for a in solve(task)]
        page = world.reset(task)
        target = json.dumps(inj.model_dump(), ensure_ascii=False)
        out.append((io.adversary_prompt(task.goal, page, control), encode_target(tokenizer, target)))
    return out


def format_check(learner, io: RoleIO, n_tasks: int, seed: int) -> dict:
    """How often each warm-started role now speaks its format, on prompts it was not trained on.

    Samples (at the rollout temperature, through the learner's engine) one executor action for
    the first page of ``n_tasks`` held-out generated training tasks (seed ``seed + 1000``),
    one curriculum spec and one adversary α per task, and parses them with the roles' parsers.

    Returns:
        ``{"executor_parse_rate", "curriculum_parse_rate", "adversary_parse_rate", "samples"}``
        (shares in [0, 1]) and ``"<role>_failures"``: up to three unparsable outputs with the
        parser's message.
    """
    from policies.engines import GenerationRequest

    r = learner.cfg.rollout
    per = max(1, -(-n_tasks // len(STRATA)))
    tasks = [t for s in STRATA for t in generate(s, per, seed=seed + 1000)][:n_tasks]
    world = SimWebWorld()
    rng = random.Random(seed + 1000)
    prompts = {"executor": [], "curriculum": [], "adversary": []}
    for task in tasks:
        page = world.reset(task)
        prompts["executor"].append(io.executor_prompt(task.goal, page, [], ""))
        examples = [TaskProposal(stratum=rng.choice(STRATA), domain=rng.choice(DOMAIN_NAMES),
                                 seed=rng.randint(0, 999_999)).model_dump_json() for _ in range(3)]
        prompts["curriculum"].append(io.curriculum_prompt(task.stratum, examples))
        prompts["adversary"].append(io.adversary_prompt(task.goal, page, [a.to_text() for a in solve(task)]))
    parsers = {"executor": _parse_action, "curriculum": io.parse_curriculum, "adversary": io.parse_adversary}
    out: dict = {"samples": len(tasks)}
    for role, ps in prompts.items():
        limit = r.max_new_tokens if role == "executor" else r.proposal_max_new_tokens
        reqs = [GenerationRequest(prompt_ids=tuple(p), adapter=learner.ref(role), max_new_tokens=limit,
                                  temperature=r.temperature, top_p=r.top_p, seed=seed + 1000 + i)
                for i, p in enumerate(ps)]
        ok, failures = 0, []
        for g in learner.engine.generate(reqs):
            try:
                parsers[role](g.text)
                ok += 1
            except ValueError as exc:
                failures.append({"text": g.text, "error": str(exc)})
        out[f"{role}_parse_rate"] = ok / len(ps) if ps else 0.0
        out[f"{role}_failures"] = failures[:3]
    return out


def _parse_action(text: str):
    from forms_bench.actions import parse_action

    return parse_action(text)


def parse_rate(texts: Sequence[str]) -> float:
    """Share of executor outputs that parse as one BrowserGym action."""
    from forms_bench.actions import ActionParseError, parse_action

    ok = 0
    for t in texts:
        try:
            parse_action(t)
            ok += 1
        except ActionParseError:
            pass
    return ok / len(texts) if texts else 0.0
