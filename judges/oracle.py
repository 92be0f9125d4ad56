"""The oracle judge: the strict check s(x, τ) on the world's true state.

It reads the world's record (final field values and the event log), never the page text, so no
page or injection text can change its verdict (its flip rate on :mod:`judges.attacks` is 0 by
construction). It is the reference the LM judge is compared with (``advsim bench judge``), and
in the real browser it is the only judge (AdvSim2Real's deterministic browser check).
"""

from __future__ import annotations

from typing import Any

from forms_bench.schema import Task
from judges.strict import Verdict, check


def oracle_judge(task: Task, record: Any) -> Verdict:
    """Strict check on the true state, with the ``(task, record) -> Verdict`` judge interface.

    Args:
        task: the task (its hidden spec is read).
        record: an ``EpisodeRecord`` (``values`` and ``events`` attributes), its ``to_dict()``,
            or a :class:`judges.lm.Trajectory` whose ``record`` is one of those.

    Returns:
        :class:`judges.strict.Verdict`.

    Raises:
        ValueError: when no true state is available (a trajectory without a record).
    """
    if hasattr(record, "pages") and hasattr(record, "goal"):  # a Trajectory
        if record.record is None:
            raise ValueError("the oracle judge needs the world's record; this trajectory has none")
        record = record.record
    if isinstance(record, dict):
        return check(task, record["values"], record["events"])
    return check(task, record.values, record.events)
