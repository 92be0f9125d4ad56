"""Curriculum proposals: the compact task spec the curriculum role writes, and its instantiation.

A full page is hundreds of tokens — more than a small backbone can write reliably — so the
curriculum proposes the *task spec* that determines a page: the skill stratum, the domain, the
difficulty level (0…:data:`~forms_bench.difficulty.TOP_LEVEL`), optional overrides of that
level's knobs (:class:`~forms_bench.difficulty.Difficulty`: how the answer is given, number of
targets, table rows, page extras) and a seed for the record values. Every field changes the
task. :func:`instantiate` turns it into a validated :class:`Task` through the benchmark's own
generator (training split only, so it never reproduces a test task). This is the validity gate
ν's "instantiable in the simulated world" check (AdvSim2Real Eq. 2).
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forms_bench.difficulty import TOP_LEVEL, Answer, Difficulty, level_knobs
from forms_bench.domains import DOMAINS
from forms_bench.generate import make_task
from forms_bench.schema import STRATA, Stratum, Task

DOMAIN_NAMES: tuple[str, ...] = tuple(d.name for d in DOMAINS)


class TaskProposal(BaseModel):
    """A curriculum proposal (JSON object), e.g.
    ``{"stratum": "derived_values", "domain": "shipping", "level": 2, "seed": 4711}``.

    Attributes:
        stratum: one of the five strata.
        domain: one of the six domains.
        level: difficulty level 0…5 (:data:`forms_bench.difficulty.LEVELS`); default 5, the
            benchmark's own difficulty.
        seed: 0 … 999,999; selects the records, values and names.
        answer, targets, rows, extras: optional overrides of the level's knobs
            (:class:`~forms_bench.difficulty.Difficulty`); None keeps the level's value.
    """

    # strict: a model writing "level": true, "seed": "12" or "extras": "off" has not written a
    # valid proposal (pydantic's lax mode would read 1, 12 and False and count it valid, ν = 1)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    stratum: Stratum
    domain: str = Field(json_schema_extra={"enum": list(DOMAIN_NAMES)})
    level: int = Field(default=TOP_LEVEL, ge=0, le=TOP_LEVEL)
    seed: int = Field(ge=0, le=999_999)
    answer: Optional[Answer] = None
    targets: Optional[int] = Field(default=None, ge=1, le=3)
    rows: Optional[int] = Field(default=None, ge=0, le=8)
    extras: Optional[bool] = None

    def knobs(self) -> Difficulty:
        """The difficulty this proposal asks for: the level's knobs with the overrides applied.

        Raises:
            ValueError: the overrides are inconsistent (e.g. ``answer="lookup"`` with ``rows=0``).
        """
        base = level_knobs(self.level).model_dump()
        over = {k: v for k in ("answer", "targets", "rows", "extras") if (v := getattr(self, k)) is not None}
        try:
            return Difficulty(**{**base, **over})
        except ValidationError as exc:
            msg = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            raise ValueError(f"inconsistent knobs: {msg}") from None

    def to_json(self) -> str:
        """Compact JSON with only the fields set (what the curriculum writes and reads)."""
        return self.model_dump_json(exclude_none=True)


def instantiate(proposal: TaskProposal) -> Task:
    """The training-split task a proposal describes (every field of the proposal is used).

    Raises:
        ValueError: the domain is unknown or the knobs are inconsistent (the stratum and the
            ranges are checked by the model).
    """
    if proposal.domain not in DOMAIN_NAMES:
        raise ValueError(f"unknown domain {proposal.domain!r}; expected one of {', '.join(DOMAIN_NAMES)}")
    return make_task(proposal.stratum, proposal.domain, proposal.seed, split="train", knobs=proposal.knobs())


def task_text(task: Task) -> str:
    """What determines a task, as text for the curriculum's lexical-similarity clusters
    (AdvSim2Real Eq. 2, n(x)): its goal, rules, table captions and form labels."""
    page = task.page
    labels = " ".join(f.label for f in page.fields())
    return " ".join([task.goal, *page.rules, *(t.caption for t in page.tables), labels])


__all__ = ["TaskProposal", "instantiate", "task_text", "DOMAIN_NAMES", "STRATA"]
