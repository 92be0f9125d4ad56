"""Difficulty of evidence-ledger cases: knobs, named levels 0…5, and the curriculum's proposals.

The web world's lesson (``forms_bench.difficulty``) holds here too: a small executor learns only
from cases it sometimes solves, and a curriculum can aim at p̂ ≈ ½ only along an axis that makes
cases easier or harder. Every case of the generator is shaped by the same knobs:

- ``protocol`` — the case's structure: ``"V1"`` one consequential action; ``"V2"`` a chain of
  two (the second uses the id the first returns); ``"V3"`` a DAG of four; ``"V0"`` a
  precondition fails, so the right answer is not to act (the refusal trap);
- ``extra_groups`` — requirement groups beyond the core (0–3; capped by the template): more
  records to read before acting (``None`` = drawn per protocol, as in the frozen suite);
- ``historic`` — historic records of the output kinds: real ids of other operations that a
  careless agent could borrow (the borrowed-id trap of V2/V3).

Every case also has a look-alike record (the twin: the wrong-entity trap), as in the suite.

:data:`LEVELS` names six settings on the web world's scale: level 0 is one action on core
evidence, level :data:`TOP_LEVEL` the frozen suite's own distribution for the proposed
protocol. What a level costs is measurable: the reads and actions its reference plan needs
(:func:`level_stats`).
"""

from __future__ import annotations

import functools
import random
from typing import Literal, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .schema import DOMAINS, Case
from .validation import SuiteValidationError, validate_case

Protocol = Literal["V0", "V1", "V2", "V3"]
TOP_LEVEL = 5


class LedgerDifficulty(BaseModel):
    """The ledger generator's difficulty knobs (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    protocol: Protocol = "V1"
    extra_groups: Optional[int] = Field(default=0, ge=0, le=3)
    historic: bool = True


LEVELS: dict[int, LedgerDifficulty] = {
    0: LedgerDifficulty(protocol="V1", extra_groups=0, historic=False),
    1: LedgerDifficulty(protocol="V1", extra_groups=1, historic=False),
    2: LedgerDifficulty(protocol="V1", extra_groups=2, historic=False),
    3: LedgerDifficulty(protocol="V2", extra_groups=1, historic=False),
    4: LedgerDifficulty(protocol="V2", extra_groups=2, historic=True),
    5: LedgerDifficulty(protocol="V3", extra_groups=None, historic=True),
}
"""Level → knobs. Level 5 is the frozen suite's setting (extra groups drawn per protocol,
historic records present); a proposal's ``protocol`` overrides the level's."""


def level_knobs(level: int) -> LedgerDifficulty:
    """The knobs of ``level`` (0…5). Raises ValueError for another level."""
    if level not in LEVELS:
        raise ValueError(f"level {level} is not one of 0-{TOP_LEVEL}")
    return LEVELS[level]


class LedgerProposal(BaseModel):
    """A curriculum proposal for the ledger world (JSON object), e.g.
    ``{"domain": "customer_ops", "level": 1, "seed": 4711}``.

    Attributes:
        domain: one of the six built-in domains.
        level: difficulty level 0…5 (:data:`LEVELS`).
        seed: 0 … 999,999: selects the template, the records and their values.
        protocol, extra_groups, historic: optional overrides of the level's knobs.
    """

    # strict: a model writing "level": true, "seed": "12" or "extras": "off" has not written a
    # valid proposal (pydantic's lax mode would read 1, 12 and False and count it valid, ν = 1)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    domain: str = Field(json_schema_extra={"enum": list(DOMAINS)})
    level: int = Field(default=TOP_LEVEL, ge=0, le=TOP_LEVEL)
    seed: int = Field(ge=0, le=999_999)
    protocol: Optional[Protocol] = None
    extra_groups: Optional[int] = Field(default=None, ge=0, le=3)
    historic: Optional[bool] = None

    def knobs(self) -> LedgerDifficulty:
        """The level's knobs with this proposal's overrides applied."""
        base = level_knobs(self.level).model_dump()
        base.update({k: v for k in ("protocol", "extra_groups", "historic") if (v := getattr(self, k)) is not None})
        return LedgerDifficulty(**base)

    def case_id(self) -> str:
        """The id of the case this proposal makes (``gen-L1-cust-4711``; overrides add their knobs)."""
        from .generate import SHORT

        k = self.knobs()
        over = "" if k == level_knobs(self.level) else f"-{k.protocol}-x{k.extra_groups}-h{int(k.historic)}"
        return f"gen-L{self.level}-{SHORT[self.domain]}-{self.seed}{over}"


@functools.lru_cache(maxsize=1)
def _declarations():
    from .generate import declarations
    from .declarations import EntityTypeDecl, ToolDecl

    tools, etypes = declarations()
    return ({k: ToolDecl.model_validate(v) for k, v in tools.items()},
            {k: EntityTypeDecl.model_validate(v) for k, v in etypes.items()}, tools)


def make_case(domain: str, level: int, seed: int, knobs: LedgerDifficulty | None = None,
              case_id: str | None = None) -> Case:
    """A validated case of ``domain`` at ``level`` (or with ``knobs``), deterministic in its
    arguments; it uses the frozen suite's tool and entity-type declarations, so the env of the
    frozen suite plays it (``reset(options={"task": case})``).

    Raises:
        ValueError: an unknown domain or level.
    """
    from .domains import DOMAINS_CATALOG
    from .generate import SHORT, build_case

    catalog = {d.name: d for d in DOMAINS_CATALOG}
    if domain not in catalog:
        raise ValueError(f"unknown domain {domain!r}; one of {', '.join(catalog)}")
    k = knobs or level_knobs(level)
    dom = catalog[domain]
    rng = random.Random(f"ledger-proposal|{domain}|{level}|{seed}|{k.protocol}|{k.extra_groups}|{k.historic}")
    tpl = dom.templates[seed % len(dom.templates)]
    cid = case_id or f"gen-L{level}-{SHORT[domain]}-{seed}"
    tools, etypes, raw_tools = _declarations()
    raw = build_case(dom, tpl, k.protocol, cid, rng, raw_tools, extra_groups=k.extra_groups, historic=k.historic)
    return validate_case(raw, tools, etypes)


def instantiate(proposal: LedgerProposal | dict) -> Case:
    """The case a proposal asks for (the validity gate ν of AdvSim2Real Eq. 2 in this world).

    Raises:
        ValueError: an invalid proposal (unknown domain, level or knob out of range), naming the field.
    """
    try:
        p = proposal if isinstance(proposal, LedgerProposal) else LedgerProposal.model_validate(proposal)
        if p.domain not in DOMAINS:
            raise ValueError(f"domain: {p.domain!r} is not one of {', '.join(DOMAINS)}")
        return make_case(p.domain, p.level, p.seed, p.knobs(), p.case_id())
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ValueError(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}") from None
    except SuiteValidationError as exc:  # a generator bug, not a bad proposal: say so
        raise RuntimeError(f"generated case failed validation: {exc}") from exc


def sample_cases(level: int, n: int, seed: int, domains: Sequence[str] | None = None, base: int = 0) -> list[Case]:
    """``n`` generated cases at ``level``, ``domains`` (default: all six) in turn and each case's seed drawn from
    ``random.Random(seed)`` in ``base`` … ``base + 999,999`` — so domains and templates vary
    independently (consecutive seeds with domains in turn would pick one template per domain: a
    case's template is its seed modulo the domain's template count). Deterministic in the
    arguments. ``base = 0`` is the range curriculum proposals and the warm start draw from; the
    evaluation pool draws from ``base = 1,000,000`` up, so it never holds a case training could
    generate."""
    doms = list(domains or DOMAINS)
    rng = random.Random(f"ledger-sample|{level}|{seed}")
    return [make_case(doms[i % len(doms)], level, base + rng.randrange(1_000_000)) for i in range(n)]


def level_stats(level: int, n: int = 30, seed: int = 0) -> dict:
    """What a level costs, over ``n`` generated cases (seeds ``seed``…, domains in turn): the
    mean number of reads and of actions of the reference plan, and the protocols drawn.

    Returns:
        ``{"level", "n", "reads_mean", "actions_mean", "steps_mean", "protocols"}``.
    """
    from .suite import reference_plan

    tools, _, _ = _declarations()
    reads, acts, steps, protos = [], [], [], {}
    for i in range(n):
        case = make_case(DOMAINS[i % len(DOMAINS)], level, seed + i)
        plan = reference_plan(case, tools)
        reads.append(case.reads)
        acts.append(len(case.spec.actions))
        steps.append(len(plan))
        protos[case.protocol] = protos.get(case.protocol, 0) + 1
    return {"level": level, "n": n, "reads_mean": sum(reads) / n, "actions_mean": sum(acts) / n,
            "steps_mean": sum(steps) / n, "protocols": protos}
