"""``advsim/WebForms-v0``: the form benchmark in the web world, as a Gymnasium environment."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import gymnasium as gym

from advsim.envs.spaces import Unicode
from forms_bench import STRATA, Task, generate, load
from forms_bench.actions import ActionParseError, parse_action
from forms_bench.injection import Injection
from judges.render_gate import render_gate
from judges.strict import Verdict, check_record
from worlds.web.sim import SimWebWorld
from worlds.web.world import ActionError, EpisodeRecord, WebWorld

MAX_TEXT = 200_000

Judge = Callable[[Task, EpisodeRecord], Verdict]


class WebFormsEnv(gym.Env):
    """Form-filling tasks on accessibility-tree pages (AdvSim2Real's benchmark).

    **Observation** — ``Dict`` of three :class:`~advsim.envs.spaces.Unicode` texts:
    ``goal`` (the task's goal g), ``page`` (the flattened accessibility tree, BrowserGym style,
    printed by :func:`worlds.web.axtree.serialize`), ``last_action_error`` ('' when the last
    action was valid).

    **Action** — one BrowserGym call as text, e.g. ``"fill('12', 'Jane Doe')"``; surrounding
    text is tolerated. Parsed with ``ast`` (never executed). An unparseable or invalid action
    leaves the page unchanged, sets ``last_action_error`` and still counts as a step.

    **Episode end** — ``terminated`` after ``send_msg_to_user(...)``; ``truncated`` after
    ``max_steps`` actions (default 12) without it.

    **Reward** — 0 on every step but the last; at episode end ``float(j)`` with j the judge's
    verdict (default: the strict check s(x, τ) on the world's true state).

    **info** — ``task_id``, ``stratum``, ``domain``, ``step`` (actions taken), ``action``
    (canonical text of the parsed action or None), ``action_error``, ``injected`` (an accepted
    injection is on the page), ``injection_rejected`` (gate reasons, or []); at episode end also
    ``success`` (bool), ``reasons`` (the judge's list) and ``record`` (values + event log).

    **Injection** — an adversary proposal α = (z, m, d, ζ) is rendered into the page the
    executor sees after d actions: pass ``options={"injection": Injection(...)}`` to ``reset``
    or call :meth:`inject` before transition d. The attacked page must pass the render gate
    (:func:`judges.render_gate.render_gate`); a rejected rendering is removed again. At most one
    accepted injection per episode.

    Args:
        world: ``"sim"`` (SimWebWorld) or ``"browser"`` (Playwright + Chromium); or pass an
            object implementing :class:`worlds.web.world.WebWorld` as ``web_world``.
        split: ``"test"`` (the frozen 150 tasks) or ``"train"`` (generated pools).
        tasks: explicit task list (overrides ``split``).
        judge: callable ``(task, record) -> Verdict``.
        max_steps: action budget per episode.
        train_seed, train_per_stratum: the generated training pool when ``split="train"``.
        render_mode: ``"ansi"`` returns the page text from :meth:`render`.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, world: str = "sim", split: str = "test", tasks: Sequence[Task] | None = None,
                 judge: Judge | None = None, max_steps: int = 12, train_seed: int = 1,
                 train_per_stratum: int = 60, render_mode: str | None = None,
                 web_world: WebWorld | None = None, browser_options: dict | None = None):
        if world not in ("sim", "browser"):
            raise ValueError(f"world must be 'sim' or 'browser', got {world!r}")
        if split not in ("test", "train"):
            raise ValueError(f"split must be 'test' or 'train', got {split!r}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if tasks is not None:
            self.tasks = list(tasks)
        elif split == "test":
            self.tasks = load("test")
        else:
            self.tasks = [t for s in STRATA for t in generate(s, train_per_stratum, train_seed)]
        if not self.tasks:
            raise ValueError("no tasks")
        self._by_id = {t.id: t for t in self.tasks}
        self.world_name = world
        if web_world is not None:
            self.world = web_world
        elif world == "sim":
            self.world = SimWebWorld()
        else:
            from worlds.web.browser import BrowserWorld

            self.world = BrowserWorld(**(browser_options or {}))
        self.judge = judge or check_record
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Dict({
            "goal": Unicode(MAX_TEXT), "page": Unicode(MAX_TEXT), "last_action_error": Unicode(MAX_TEXT),
        })
        self.action_space = Unicode(MAX_TEXT)
        self.task: Task | None = None
        self._page = ""
        self._error = ""
        self._steps = 0
        self._done = True
        self._pending: Injection | None = None
        self._accepted: Injection | None = None
        self._rejected: list[str] = []

    # -- helpers ---------------------------------------------------------------------------
    def _obs(self) -> dict[str, str]:
        return {"goal": self.task.goal, "page": self._page, "last_action_error": self._error}

    def _info(self, action: str | None = None) -> dict[str, Any]:
        return {"task_id": self.task.id, "stratum": self.task.stratum, "domain": self.task.domain,
                "step": self._steps, "action": action, "action_error": self._error,
                "injected": self._accepted is not None, "injection_rejected": list(self._rejected)}

    def _maybe_render_injection(self) -> None:
        inj = self._pending
        if inj is None or inj.transition != self._steps:
            return
        self._pending = None
        attacked = self.world.inject(inj.instruction)
        # the marker / token check looks only at what the injection added to the page
        gate = render_gate(attacked, inj.instruction, inj.marker, before=self._page)
        if gate.passed:
            self._accepted = inj
            self._page = attacked
        else:
            self._rejected = gate.reasons
            self._page = self.world.clear_injections()

    # -- Gymnasium API ---------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode. ``options``: ``task_id`` (str) or ``task`` (Task) picks the task
        (else one is drawn with the env's seeded RNG); ``injection`` (Injection or dict)."""
        super().reset(seed=seed)
        options = options or {}
        if "task" in options:
            self.task = options["task"]
        elif "task_id" in options:
            if options["task_id"] not in self._by_id:
                raise KeyError(f"unknown task_id {options['task_id']!r}")
            self.task = self._by_id[options["task_id"]]
        else:
            self.task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        self._steps, self._error, self._done = 0, "", False
        self._pending = self._accepted = None
        self._rejected = []
        self._page = self.world.reset(self.task)
        if options.get("injection") is not None:
            self.inject(options["injection"])
        return self._obs(), self._info()

    def inject(self, injection: Injection | dict) -> bool:
        """Schedule α for rendering at transition d (immediately if d equals the current step).

        Returns:
            False if an injection was already accepted this episode, or d already passed;
            True when scheduled (acceptance by the gate shows in ``info["injected"]``).
        """
        if self.task is None or self._done:
            raise RuntimeError("inject() needs a running episode; call reset() first")
        inj = injection if isinstance(injection, Injection) else Injection.model_validate(injection)
        if self._accepted is not None or inj.transition < self._steps:
            return False
        self._pending = inj
        self._rejected = []
        self._maybe_render_injection()
        return True

    def step(self, action: str):
        if self.task is None or self._done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        self._steps += 1
        self._error = ""
        parsed_text = None
        terminated = False
        try:
            act = parse_action(action)
            parsed_text = act.to_text()
            self._page = self.world.step(act)
            terminated = act.name == "send_msg_to_user"
        except (ActionParseError, ActionError) as exc:
            self._error = str(exc)
        truncated = not terminated and self._steps >= self.max_steps
        if not (terminated or truncated):
            self._maybe_render_injection()
        info = self._info(parsed_text)
        reward = 0.0
        if terminated or truncated:
            self._done = True
            record = self.world.record()
            verdict = self.judge(self.task, record)
            reward = float(verdict.success)
            info.update(success=verdict.success, reasons=list(verdict.reasons), record=record.to_dict())
        return self._obs(), reward, terminated, truncated, info

    def render(self):
        if self.render_mode == "ansi":
            return self._page
        return None

    def close(self):
        self.world.close()
