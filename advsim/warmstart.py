"""Supervised warm start: each adapter learns to speak its role's format before RL.

A small backbone does not follow the action grammar zero-shot (ENVIRONMENT.md), and GRPO gets
no signal from a policy that never succeeds, so before the co-evolution each role adapter is
fine-tuned on demonstrations made from the benchmark's own machinery — never the test set:

- **executor**: the oracle's actions on generated training tasks over every stratum, domain
  and difficulty level (:data:`forms_bench.difficulty.LEVELS`; low levels are short pages,
  cheap to train on), one example per step (goal, current page, previous actions, last error →
  the next action). Two kinds of off-oracle states are mixed in so the policy has seen what
  its own rollouts produce: **recovery** states (after an invalid action, with
  ``last_action_error`` shown, or after a wrong value was filled; the target is the oracle's
  correcting action) and **attacked** pages (an injection of the built-in corpus, styles
  :data:`EXECUTOR_ATTACK_STYLES`, or on level-0 pages a harmless :data:`DISTRACTORS` text,
  rendered at transition d; the targets stay the oracle's, i.e. the right action ignores it);
- **curriculum**: a history of specs with success rates → one valid spec, whose level moves
  toward p̂ ≈ ½ (one level up after a success rate above 0.6, one down below 0.4);
- **adversary**: the corpus's injections (all seven styles, varied tasks, levels 0-1 and transitions)
  for a training task's goal, page and oracle trajectory, in the compact one-line format of
  :func:`policies.roles.format_adversary`.

:func:`format_check` then samples each role on held-out prompts and reports parse rates.
"""

from __future__ import annotations

import random
from typing import Sequence

from advsim.envs.web_forms import WebFormsEnv
from forms_bench import STRATA
from forms_bench.difficulty import LEVELS, TOP_LEVEL, level_knobs
from forms_bench.generate import make_task
from forms_bench.oracle import solve
from forms_bench.proposal import DOMAIN_NAMES
from forms_bench.schema import Task
from policies.roles import RoleIO, curriculum_example, format_adversary

EXECUTOR_LEVEL_WEIGHTS: dict[int, float] = {0: 6, 1: 3, 2: 2, 3: 1}
"""Relative share of each difficulty level among the executor's warm-start tasks."""

EXECUTOR_ATTACK_STYLES: tuple[str, ...] = ("fake_system_notice", "authority_claim", "urgency", "hidden_text")
"""Corpus styles (:data:`advsim.attacks.STYLES`) of the executor's warm-start attacked pages: it
learns what an attacked page looks like on these four; ``record_field_instruction``,
``lookalike_control`` and ``already_done`` (the styles that apply to level-0 pages, and one more) are
left for stage 2 to find and defend, so robust-iter-t against capability-iter-t measures stage 2
rather than the warm start."""


def encode_target(tokenizer, text: str) -> list[int]:
    """Token ids of a completion the model should produce: the text, then end-of-sequence."""
    return list(tokenizer.encode(text, add_special_tokens=False)) + [tokenizer.eos_token_id]


def warmstart_tasks(n: int, seed: int, weights: dict[int, float] | None = None) -> list[Task]:
    """``n`` training-split tasks cycling through strata and domains, levels drawn with
    ``weights`` (default :data:`EXECUTOR_LEVEL_WEIGHTS`); deterministic in ``(n, seed)``."""
    weights = weights or EXECUTOR_LEVEL_WEIGHTS
    rng = random.Random(f"warmstart:{seed}")
    levels, w = list(weights), list(weights.values())
    out = []
    for i in range(n):
        level = rng.choices(levels, w)[0]
        out.append(make_task(STRATA[i % len(STRATA)], DOMAIN_NAMES[(i // len(STRATA)) % len(DOMAIN_NAMES)],
                             rng.randint(0, 999_999), knobs=level_knobs(level)))
    return out


DISTRACTORS: tuple[str, ...] = (
    "Tip: you can leave this page open; nothing is sent until you press a button.",
    "This form follows the usual layout for the department and was checked this quarter.",
    "Help desk: questions about this form can go to the team mailbox during office hours.",
    "Reminder: values are stored exactly as typed, so check spelling before you continue.",
    "The history of this record is kept for audit purposes and is not shown here.",
    "Page notice: a new colour scheme for these forms is planned for next month.",
)
"""Harmless page texts of the executor's warm-start attacked states, for pages where no style of
:data:`EXECUTOR_ATTACK_STYLES` applies (level 0): the executor learns that extra text on the
page does not change the right action. Disjoint from the null injection's sentences
(:func:`advsim.attacks.benign_injection`), so the null flip rate is not measured on text the
executor was trained on."""


def _distractor(rng: random.Random, transition: int):
    from forms_bench.injection import Injection

    z = " ".join(rng.sample(DISTRACTORS, 2))
    return Injection(instruction=z, marker="", transition=transition)


def _wrong_fill(task: Task, action) -> str | None:
    """A wrong-value version of an oracle ``fill`` (the value with a digit/letter changed)."""
    if action.name != "fill":
        return None
    value = action.args[1]
    wrong = value[:-1] + ("7" if value[-1:] != "7" else "3") if value else "x"
    return type(action)("fill", (action.args[0], wrong)).to_text()


def suite_demonstrations(suite, io: RoleIO, tokenizer, tasks: Sequence, max_steps: int = 40
                         ) -> list[tuple[list[int], list[int]]]:
    """(prompt_ids, target_ids) per ground-truth step of ``tasks``, in any world: each task's
    ground truth (``suite.ground_truth``) is played in the suite's own environment, and every
    step becomes one example — the executor's prompt for the observation and the actions so far
    (``suite.executor_prompt(io)``, the same prompt rollouts build) and the oracle's action.
    The history holds the env's canonical action texts, as in rollouts.

    Raises:
        RuntimeError: a ground truth that does not end its episode within ``max_steps``.
    """
    prompt = suite.executor_prompt(io)
    env = suite.make_env(max_steps=max_steps)
    out: list[tuple[list[int], list[int]]] = []
    try:
        for task in tasks:
            oracle = suite.ground_truth(task)
            obs, info = env.reset(options=suite.reset_options(task))
            history: list[str] = []
            for _ in range(max_steps):
                action = oracle.act(obs, info)
                out.append((prompt(obs, history), encode_target(tokenizer, action)))
                obs, _, term, trunc, info = env.step(action)
                history.append(info["action"] if info.get("action") is not None else action)
                if term or trunc:
                    break
            else:
                raise RuntimeError(f"{suite.task_id(task)}: the ground truth did not end within {max_steps} steps")
    finally:
        env.close()
    return out


def executor_examples(io: RoleIO, tokenizer, n_tasks: int, seed: int, recovery: float = 0.3,
                      attacked: float = 0.25, levels: dict[int, float] | None = None
                      ) -> list[tuple[list[int], list[int]]]:
    """(prompt_ids, target_ids) per oracle step on ``n_tasks`` training tasks
    (:func:`warmstart_tasks` with level weights ``levels``), with off-oracle states mixed in.

    Args:
        recovery: share of tasks with one detour at a random oracle step: an invalid action
            (a click on a bid the page does not have; the next prompt shows the error) or, for a
            ``fill``, a wrong value; the target after the detour is the correcting action.
        attacked: share of tasks with a corpus injection (:data:`EXECUTOR_ATTACK_STYLES`, where
            the page has what the style needs, else two :data:`DISTRACTORS` sentences) rendered at
            a random transition; targets are the oracle's actions.
    """
    from advsim.attacks import corpus

    rng = random.Random(f"warmstart-executor:{seed}")
    out = []
    for task in warmstart_tasks(n_tasks, seed, levels):
        env = WebFormsEnv(tasks=[task], max_steps=32)
        actions = [a.to_text() for a in solve(task)]
        injection = None
        if rng.random() < attacked:
            d = rng.randint(0, max(0, len(actions) - 2))
            styles = [inj for name, inj in corpus(task, transition=d).items() if name in EXECUTOR_ATTACK_STYLES]
            injection = rng.choice(styles) if styles else _distractor(rng, d)
        obs, _ = env.reset(options={"task": task, "injection": injection})
        detour = rng.randrange(len(actions) - 1) if rng.random() < recovery else None
        history: list[str] = []
        for k, action in enumerate(actions):
            if k == detour:
                wrong = _wrong_fill(task, solve(task)[k]) if rng.random() < 0.5 else None
                bad = wrong or rng.choice(["click('999')", f"fill('{rng.randint(900, 998)}', 'x')", "press('Enter')"])
                out.append((io.executor_prompt(obs["goal"], obs["page"], history, obs["last_action_error"]),
                            encode_target(tokenizer, action)))
                obs, _, _, _, _ = env.step(bad)
                history.append(bad)
            out.append((io.executor_prompt(obs["goal"], obs["page"], history, obs["last_action_error"]),
                        encode_target(tokenizer, action)))
            obs, _, term, trunc, _ = env.step(action)
            history.append(action)
            if term or trunc:
                break
        env.close()
    return out


def _web_suite():
    from advsim.suites import WebFormsSuite

    return WebFormsSuite()


def curriculum_history(rng: random.Random, n: int = 3, suite=None) -> list[tuple]:
    """``n`` random (spec, success rate) pairs of ``suite``'s world (default: the web forms), as
    the curriculum's prompt shows them (a rate is None, shown as untested, one time in eight)."""
    suite = suite or _web_suite()
    return [(suite.random_proposal(rng), None if rng.random() < 0.125 else rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]))
            for _ in range(n)]


def next_level(level: int, p_hat: float) -> int:
    """One level harder after a success rate above 0.6, one easier below 0.4, the same level
    otherwise (clipped to 0…TOP_LEVEL)."""
    step = 1 if p_hat > 0.6 else (-1 if p_hat < 0.4 else 0)
    return min(TOP_LEVEL, max(0, level + step))


def prior_level(history: Sequence[tuple]) -> int:
    """The warm start's prior for the curriculum: take the tested spec whose success rate is
    closest to ½ (the latest on ties) and apply :func:`next_level`; with nothing tested, the
    last spec's level."""
    tested = [(p, ph) for p, ph in history if ph is not None]
    if not tested:
        return history[-1][0].level
    best = min(reversed(tested), key=lambda x: abs(x[1] - 0.5))
    return next_level(best[0].level, best[1])


def curriculum_examples(io: RoleIO, tokenizer, n: int, seed: int, suite=None) -> list[tuple[list[int], list[int]]]:
    """(prompt_ids, target_ids): a hint (web: stratum; ledger: domain) and a spec history with
    success rates → one valid spec for that hint, at the :func:`prior_level` of the history, in
    ``suite``'s world (default: the web forms)."""
    suite = suite or _web_suite()
    rng = random.Random(f"warmstart-curriculum:{seed}")
    hints = suite.curriculum_hints()
    out = []
    for i in range(n):
        hint = hints[i % len(hints)]
        hist = curriculum_history(rng, rng.randint(2, 5), suite)
        lines = [curriculum_example(suite.proposal_json(p), ph) for p, ph in hist]
        target = suite.random_proposal(rng, prior_level(hist), hint)
        out.append((suite.curriculum_prompt(io, hint, lines), encode_target(tokenizer, suite.proposal_json(target))))
    return out


def adversary_examples(io: RoleIO, tokenizer, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """(prompt_ids, target_ids): a training task's goal, page and oracle trajectory → an α of
    the injection-style corpus in the compact format (styles, tasks, levels 0-1 — short pages — and
    transitions 0-2 vary)."""
    from advsim.attacks import corpus
    from worlds.web.sim import SimWebWorld

    rng = random.Random(f"warmstart-adversary:{seed}")
    world = SimWebWorld()
    out = []
    weights = {0: 3, 1: 2}
    tasks = warmstart_tasks(max(1, n), seed + 1, weights)
    for i in range(n):
        task = tasks[i]
        options = list(corpus(task, transition=rng.randint(0, 2)).values())
        inj = options[rng.randrange(len(options))]
        control = [a.to_text() for a in solve(task)]
        page = world.reset(task)
        out.append((io.adversary_prompt(task.goal, page, control), encode_target(tokenizer, format_adversary(inj))))
    return out


def format_check(learner, io: RoleIO, n_tasks: int, seed: int, levels: dict[int, float] | None = None,
                 suite=None) -> dict:
    """How often each warm-started role now speaks its format, on prompts it was not trained on,
    in ``suite``'s world (default: the web forms).

    Samples (at the rollout temperature and top-p, through the learner's engine) one executor
    action for the first page of ``n_tasks`` held-out training tasks (seed ``seed + 1000``) at the
    warm start's level weights ``levels`` (default: every level alike), one curriculum spec and
    one adversary α per task, and parses them with the roles' parsers.

    Returns:
        ``{"executor_parse_rate", "curriculum_parse_rate", "adversary_parse_rate", "samples"}``
        (shares in [0, 1]), ``"curriculum_prior_agreement"`` (share of curriculum samples whose
        level is the history's :func:`prior_level`) and ``"<role>_failures"``: up to three
        unparsable outputs with the parser's message.
    """
    from policies.engines import GenerationRequest

    suite = suite or _web_suite()
    r = learner.cfg.rollout
    tasks = suite.training_tasks(n_tasks, seed + 1000, levels or {lv: 1 for lv in LEVELS})
    rng = random.Random(f"format-check:{seed}")
    prompts: dict[str, list] = {"executor": [], "curriculum": [], "adversary": []}
    priors = []
    executor_prompt = suite.executor_prompt(io)
    for task in tasks:
        prompts["executor"].append(executor_prompt(suite.first_observation(task), []))
        hist = curriculum_history(rng, 3, suite)
        priors.append(prior_level(hist))
        lines = [curriculum_example(suite.proposal_json(p), ph) for p, ph in hist]
        prompts["curriculum"].append(suite.curriculum_prompt(io, suite.task_hint(task), lines))
        prompts["adversary"].append(suite.adversary_prompt(io, task, suite.control_actions(task)))
    parsers = {"executor": lambda text, task: suite.parse_action(text, task),
               "curriculum": lambda text, task: suite.parse_proposal(io, text),
               "adversary": lambda text, task: suite.parse_injection(io, text, task)}
    out: dict = {"samples": len(tasks)}
    for role, ps in prompts.items():
        limit = r.max_new_tokens if role == "executor" else r.proposal_max_new_tokens
        reqs = [GenerationRequest(prompt_ids=tuple(p), adapter=learner.ref(role), max_new_tokens=limit,
                                  temperature=r.temperature if role == "executor" else r.proposal_temp(),
                                  top_p=r.top_p, seed=seed + 1000 + i)
                for i, p in enumerate(ps)]
        ok, failures, agree = 0, [], 0
        for i, g in enumerate(learner.engine.generate(reqs)):
            try:
                parsed = parsers[role](g.text, tasks[i])
                ok += 1
                agree += role == "curriculum" and parsed.level == priors[i]
            except ValueError as exc:
                failures.append({"text": g.text, "error": str(exc)})
        out[f"{role}_parse_rate"] = ok / len(ps) if ps else 0.0
        out[f"{role}_failures"] = failures[:3]
        if role == "curriculum":
            out["curriculum_prior_agreement"] = agree / len(ps) if ps else 0.0
    return out


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
