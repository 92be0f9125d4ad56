"""``advsim/WebForms-v0``: the form benchmark in the web world, as a Gymnasium environment."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import gymnasium as gym

from advsim.envs.checks import integer, not_running, positive_int, reset_options
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
_WORLD_METHODS = ("reset", "step", "inject", "clear_injections", "observe", "record", "close")
"""The :class:`~worlds.web.world.WebWorld` methods a ``web_world`` must have."""


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
    ``max_steps`` actions (default 12) without it, or when the agent's side calls
    :meth:`truncate` (a limit outside the env: the executor's context window).

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

    After an episode ends (either flag), ``step`` and ``inject`` raise
    :class:`~advsim.envs.checks.EpisodeNotRunningError` (a RuntimeError) and change nothing,
    as they do before the first ``reset``.

    Args:
        world: ``"sim"`` (SimWebWorld) or ``"browser"`` (Playwright + Chromium); or pass an
            object implementing :class:`worlds.web.world.WebWorld` as ``web_world``.
        split: ``"test"`` (the frozen 150 tasks) or ``"train"`` (generated pools).
        tasks: explicit, non-empty sequence of :class:`forms_bench.Task` (overrides ``split``;
            to play a task by id use ``reset(options={"task_id": ...})``).
        judge: callable ``(task, record) -> Verdict`` (default: the strict check).
        max_steps: action budget per episode, an int >= 1.
        train_seed, train_per_stratum: the generated training pool when ``split="train"``
            (an int, and an int >= 1).
        render_mode: ``"ansi"`` returns the page text from :meth:`render`.
        browser_options: keyword arguments of :class:`worlds.web.browser.BrowserWorld`
            (``world="browser"`` only).

    Raises:
        TypeError: an argument of the wrong type (``judge='strict'``, ``max_steps='5'``,
            ``tasks=['some-id']``, a ``web_world`` without the WebWorld methods, …).
        ValueError: an argument out of range (``max_steps=0``, an unknown ``world``, no tasks, …).
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
        if judge is not None and not callable(judge):
            raise TypeError(f"judge must be a callable (task, record) -> Verdict or None, "
                            f"got {type(judge).__name__} {judge!r}")
        max_steps = positive_int("max_steps", max_steps)
        train_seed = integer("train_seed", train_seed)
        train_per_stratum = positive_int("train_per_stratum", train_per_stratum)
        if browser_options is not None:
            if not isinstance(browser_options, dict):
                raise TypeError(f"browser_options must be a dict, got {type(browser_options).__name__}")
            if world != "browser" or web_world is not None:
                raise ValueError("browser_options only apply to world='browser' (without web_world)")
        if web_world is not None:
            missing = [m for m in _WORLD_METHODS if not callable(getattr(web_world, m, None))]
            if missing:
                raise TypeError(f"web_world must implement worlds.web.world.WebWorld; "
                                f"{type(web_world).__name__} lacks {', '.join(missing)}")
        if tasks is not None:
            if isinstance(tasks, (str, bytes, Task)) or not isinstance(tasks, Sequence):
                raise TypeError(f"tasks must be a sequence of forms_bench.Task, got {type(tasks).__name__}")
            for i, t in enumerate(tasks):
                if not isinstance(t, Task):
                    raise TypeError(f"tasks[{i}] must be a forms_bench.Task, got {type(t).__name__} {t!r:.60}"
                                    " (to play a task by id: reset(options={'task_id': ...}))")
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
        self._started = False
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
        (else one is drawn with the env's seeded RNG); ``injection`` (Injection or dict).

        Raises:
            TypeError: ``options`` is not a dict, or ``options['task']`` is not a Task.
            ValueError: an unknown option key. KeyError: an unknown ``task_id``.
        """
        super().reset(seed=seed)
        options = reset_options(options, ("task", "task_id", "injection"))
        if "task" in options:
            if not isinstance(options["task"], Task):
                raise TypeError(f"options['task'] must be a forms_bench.Task, got {type(options['task']).__name__}")
            self.task = options["task"]
        elif "task_id" in options:
            if options["task_id"] not in self._by_id:
                raise KeyError(f"unknown task_id {options['task_id']!r}")
            self.task = self._by_id[options["task_id"]]
        else:
            self.task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        self._steps, self._error, self._done, self._started = 0, "", False, True
        self._pending = self._accepted = None
        self._rejected = []
        self._page = self.world.reset(self.task)
        if options.get("injection") is not None:
            self.inject(options["injection"])
        return self._obs(), self._info()

    def inject(self, injection: Injection | dict) -> bool:
        """Schedule α for rendering at transition d (immediately if d equals the current step).

        At most one injection per episode: a second one is refused (``False``, nothing changes)
        while the first is still pending (scheduled for a later transition) or once one was
        accepted; it is allowed again only after a pending one was rejected by the gate.

        Args:
            injection: an :class:`~forms_bench.injection.Injection` or a dict of its fields.

        Returns:
            True when scheduled (acceptance by the gate shows in ``info["injected"]``); False if
            an injection is pending or was accepted this episode, or d already passed.

        Raises:
            EpisodeNotRunningError: before ``reset`` or after the episode ended (either flag).
            pydantic.ValidationError: a dict that is not a valid Injection.
        """
        if self.task is None or self._done:
            raise not_running("inject", self._started)
        inj = injection if isinstance(injection, Injection) else Injection.model_validate(injection)
        if self._accepted is not None or self._pending is not None or inj.transition < self._steps:
            return False
        self._pending = inj
        self._rejected = []
        self._maybe_render_injection()
        return True

    def step(self, action: str):
        """Take one action (text); returns the Gymnasium 5-tuple.

        Raises:
            EpisodeNotRunningError: before ``reset`` or after the episode ended (either flag).
        """
        if self.task is None or self._done:
            raise not_running("step", self._started)
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
        reward = self._end(info) if terminated or truncated else 0.0
        return self._obs(), reward, terminated, truncated, info

    def truncate(self) -> tuple[float, dict]:
        """End the running episode now, as truncated, for a limit outside the env (the agent
        cannot take another step: its next prompt would not fit the engine's context window).
        The episode is judged as at the step limit.

        Returns:
            ``(reward, info)``: what the last ``step`` of a truncated episode returns (``info``
            with ``success``, ``reasons`` and ``record``; ``action`` None, no new step counted).

        Raises:
            EpisodeNotRunningError: before ``reset`` or after the episode ended.
        """
        if self.task is None or self._done:
            raise not_running("truncate", self._started)
        self._error = ""
        info = self._info(None)
        return self._end(info), info

    def _end(self, info: dict) -> float:
        """Judge the episode (it has ended): sets ``success``, ``reasons``, ``record`` in ``info``;
        returns the reward ``float(j)``."""
        self._done = True
        record = self.world.record()
        verdict = self.judge(self.task, record)
        info.update(success=verdict.success, reasons=list(verdict.reasons), record=record.to_dict())
        return float(verdict.success)

    def render(self):
        if self.render_mode == "ansi":
            return self._page
        return None

    def close(self):
        self.world.close()
