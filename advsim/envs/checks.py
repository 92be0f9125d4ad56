"""Argument checks and the episode-state error shared by both environments.

Both ``advsim/WebForms-v0`` and ``advsim/EvidenceLedger-v0`` check their constructor arguments
here (so ``gym.make(..., max_steps='5')`` fails at construction with a message naming the
argument, not at the first ``step``), and both raise :class:`EpisodeNotRunningError` from
``step`` and ``inject`` when no episode is running — before the first ``reset`` or after an
episode ended by either flag (``terminated`` or ``truncated``) — without changing anything.
"""

from __future__ import annotations

import numbers
from typing import Any


class EpisodeNotRunningError(RuntimeError):
    """``step()`` or ``inject()`` with no running episode (never reset, or it has ended).

    The environment's state is unchanged; call ``reset()`` to start a new episode.
    """


def not_running(method: str, started: bool) -> EpisodeNotRunningError:
    """The error for ``method`` (``"step"``, ``"inject"`` or ``"truncate"``): the same text in both envs.

    Args:
        method: the method that was called.
        started: whether an episode was ever started (else: called before ``reset()``).
    """
    if started:
        return EpisodeNotRunningError(
            f"{method}() called on a finished episode (it ended: terminated or truncated); "
            "call reset() first")
    return EpisodeNotRunningError(f"{method}() called before reset(); call reset() first")


def positive_int(name: str, value: Any) -> int:
    """``value`` as an ``int`` >= 1.

    Raises:
        TypeError: not an integer (``'5'``, ``5.0``, ``True`` are not).
        ValueError: an integer below 1.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive int, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive int (>= 1), got {value!r}")
    return int(value)


def integer(name: str, value: Any) -> int:
    """``value`` as an ``int`` (any sign). Raises TypeError for a non-integer or a bool."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def reset_options(options: Any, known: tuple[str, ...]) -> dict:
    """``reset(options=…)`` checked: ``None`` or a mapping whose keys are all in ``known``.

    Returns:
        the options as a dict (``{}`` for ``None``).

    Raises:
        TypeError: ``options`` is not a mapping.
        ValueError: an unknown key (a typo such as ``taskid`` would otherwise be ignored and a
            random task drawn); the message lists the known keys.
    """
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"reset(options=…) must be a dict or None, got {type(options).__name__}")
    unknown = sorted(str(k) for k in options if k not in known)
    if unknown:
        raise ValueError(f"unknown reset option(s) {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    return dict(options)
