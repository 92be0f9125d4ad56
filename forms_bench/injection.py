"""The adversary's proposal α = (z, m, d, ζ) (AdvSim2Real, Section 4).

It lives in the lowest package because the world renders it, the render gate checks it, the
adversary role parses it and the rewards read it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from forms_bench.actions import ActionParseError, parse_action


class Injection(BaseModel):
    """One injection request.

    Attributes:
        instruction: z, the text the page author wants rendered into the page (1–2,000 chars).
        marker: m, a short string the rendered page must contain (the render gate's marker).
        transition: d ≥ 0, the index of the transition at which z is rendered: the page the
            executor sees after d actions (0 = the initial page).
        target_action: ζ, optional: the action the adversary wants the executor to take, in
            BrowserGym syntax (must parse, e.g. ``click('27')``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    instruction: str = Field(min_length=1, max_length=2000)
    marker: str = Field(default="", max_length=200)
    transition: int = Field(default=0, ge=0, le=11)
    target_action: str | None = None

    @field_validator("target_action")
    @classmethod
    def _parses(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        try:
            return parse_action(v).to_text()
        except ActionParseError as exc:
            raise ValueError(f"target_action does not parse: {exc}") from None
