"""Difficulty as an explicit axis of the form generator: knobs, and named levels 0…L.

A small executor cannot learn from tasks it never solves (every GRPO group of an unsolved task
has zero advantage), and a curriculum can only aim at p̂ ≈ ½ if it can make tasks easier or
harder. So every stratum's builder takes the same :class:`Difficulty` knobs:

- ``answer`` — how the answer is given: ``"goal"`` (the target values are stated in the goal),
  ``"lookup"`` (the goal names one record; the values are copied from its row of a table) or
  ``"rule"`` (the stratum's own reasoning: a rule table, a computation, a conjunctive
  selection, a join, an ordered repair — the benchmark's tasks);
- ``targets`` — target fields the goal asks for (1–3; ``goal``/``lookup`` only: a ``rule``
  task has its stratum's own targets);
- ``rows`` — records in the main table (``goal``: 0 = no table, more = an irrelevant table;
  ``lookup``: ≥ 1, the named record plus distractors; ``rule``: the stratum's minimum is kept,
  ``None`` = the benchmark's own random count);
- ``extras`` — page extras: a disabled case id, two pre-filled **protected fields**, a notes
  box, a "Save draft" button and two **forbidden controls**, with the rule sentences that lock
  and forbid them.

:data:`LEVELS` names six settings, the same scale in every stratum; level :data:`TOP_LEVEL` is
the benchmark itself (the frozen test set is generated there, byte-identical to before levels
existed). ``advsim bench levels`` measures what a level costs: page tokens, actions needed
(the oracle's step count) and targets.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

Answer = Literal["goal", "lookup", "rule"]


class Difficulty(BaseModel):
    """The generator's difficulty knobs (see the module docstring for their meaning).

    Raises (on construction):
        pydantic.ValidationError: a knob outside its range, or ``answer="lookup"`` with
        ``rows=0`` (there is no record to look up).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    answer: Answer = "rule"
    targets: int = Field(default=2, ge=1, le=3)
    rows: Optional[int] = Field(default=None, ge=0, le=8)
    extras: bool = True

    @model_validator(mode="after")
    def _consistent(self) -> "Difficulty":
        if self.answer == "lookup" and self.rows is not None and self.rows < 1:
            raise ValueError("answer 'lookup' needs rows >= 1 (the record to look up)")
        return self

    def slug(self) -> str:
        """Short id-safe text of the knobs, e.g. ``'lookup-t1-r3-x1'`` (``rN`` omitted when
        ``rows`` is None)."""
        rows = "" if self.rows is None else f"-r{self.rows}"
        return f"{self.answer}-t{self.targets}{rows}-x{int(self.extras)}"


LEVELS: dict[int, Difficulty] = {
    0: Difficulty(answer="goal", targets=1, rows=0, extras=False),
    1: Difficulty(answer="goal", targets=2, rows=0, extras=True),
    2: Difficulty(answer="lookup", targets=1, rows=3, extras=True),
    3: Difficulty(answer="lookup", targets=2, rows=5, extras=True),
    4: Difficulty(answer="rule", targets=2, rows=2, extras=False),
    5: Difficulty(answer="rule", targets=2, rows=None, extras=True),
}
"""Level → knobs. 0: one value stated in the goal on a bare form; 1: two stated values among
the page extras; 2–3: copy one / two values of a named record out of a 3- / 5-row table; 4: the
stratum's own reasoning over a 2-row table, no extras; 5: the benchmark (test set)."""

TOP_LEVEL = max(LEVELS)
"""The benchmark's own level: the frozen 150-task test set is generated here."""


def level_knobs(level: int) -> Difficulty:
    """The knobs of a named level.

    Raises:
        ValueError: ``level`` outside 0…:data:`TOP_LEVEL`.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be an integer 0-{TOP_LEVEL}, got {level!r}")
    return LEVELS[level]


__all__ = ["Difficulty", "LEVELS", "TOP_LEVEL", "level_knobs", "Answer"]
