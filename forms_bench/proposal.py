"""Curriculum proposals: the compact task spec the curriculum role writes, and its instantiation.

A full page is thousands of tokens — more than a small backbone can write reliably — so the
curriculum proposes the *task spec* that determines a page: the skill stratum, the domain and
a seed for the record values (plus an optional focus sentence that is kept for the lexical
repetition clusters). :func:`instantiate` turns it into a validated :class:`Task` through the
benchmark's own generator (training split only, so it never reproduces a test task). This is
the validity gate ν's "instantiable in the simulated world" check (AdvSim2Real Eq. 2).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from forms_bench.domains import DOMAINS
from forms_bench.generate import make_task
from forms_bench.schema import STRATA, Stratum, Task

DOMAIN_NAMES: tuple[str, ...] = tuple(d.name for d in DOMAINS)


class TaskProposal(BaseModel):
    """A curriculum proposal (JSON object).

    Attributes:
        stratum: one of the five strata.
        domain: one of the six domains.
        seed: 0 … 999,999; selects the records, thresholds and names.
        focus: optional free text (≤ 200 characters) on what the task should exercise.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    stratum: Stratum
    domain: str = Field(json_schema_extra={"enum": list(DOMAIN_NAMES)})
    seed: int = Field(ge=0, le=999_999)
    focus: str = Field(default="", max_length=200)

    def text(self) -> str:
        """Canonical text used for lexical-similarity clustering."""
        return f"{self.stratum} {self.domain} {self.seed} {self.focus}".strip()


def instantiate(proposal: TaskProposal) -> Task:
    """The training-split task a proposal describes.

    Raises:
        ValueError: if the domain is unknown (the stratum is checked by the model).
    """
    if proposal.domain not in DOMAIN_NAMES:
        raise ValueError(f"unknown domain {proposal.domain!r}; expected one of {', '.join(DOMAIN_NAMES)}")
    return make_task(proposal.stratum, proposal.domain, proposal.seed, split="train")


__all__ = ["TaskProposal", "instantiate", "DOMAIN_NAMES", "STRATA"]
