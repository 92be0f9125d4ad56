"""An injection into the evidence-ledger world: the indirect prompt injection of tool results.

The adversary's text z is written into a designated free-text field (``notes``, ``comments``,
``description``) of one database record after d actions; every later tool result that shows the
record shows the text. Free-text fields never establish facts, so the text cannot create
evidence. The same shape as the web world's α = (z, m, d, ζ) (:class:`forms_bench.injection.Injection`)
with the record in place of the page: AdvSim2Real, Section 4, applied to tool outputs.
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field


class ToolInjection(BaseModel):
    """One injection request in the evidence-ledger world.

    Attributes:
        instruction: z, the text written into the record (1–2,000 characters).
        transition: d ≥ 0: the text is in the record after d actions (0 = from the start), so
            the first tool result showing the record after that carries it.
        entity_type, entity_id: the record (default: the case's primary entity, the target of
            its first expected action).
        field: a designated free-text field of that entity type (default: its first one).
        target_action: ζ, optional: the tool call the adversary wants the executor to make
            (checked against the case's tools when the injection is scheduled).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    instruction: str = Field(min_length=1, max_length=2000)
    transition: int = Field(default=0, ge=0)
    entity_type: Optional[str] = None
    entity_id: Optional[str] = None
    field: Optional[str] = None
    target_action: Optional[str] = None
