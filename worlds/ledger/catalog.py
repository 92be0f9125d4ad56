"""Building blocks of the suite: entity kinds, consequential tools, scenario templates.

The six domains themselves are declared in :mod:`worlds.ledger.domains`.

Each tool is declared once here (name, information/consequential type, argument schema,
description); :mod:`worlds.ledger.generate` turns these declarations into the frozen
:class:`~worlds.ledger.declarations.ToolDecl` records from which the prompt text and the JSON tool
schema are derived. Information tools are derived from entity kinds (``get_<kind>`` and, for
kinds with a parent, ``list_<plural>``).

A :class:`Template` is one scenario of a domain (duplicate-charge refund, credential
rotation, payment release, …): roles (entities and their field values), a twin (a similar
entity with identical values — the wrong-entity trap), and four action prototypes: ``A`` the
primary action (its change must be confirmed by a read), ``B`` dependent on A (uses the id A
returned), ``C`` independent of A, ``D`` joining B and C. V0/V1 use A, V2 the chain A→B, V3 the
DAG {A→B, B→D, C→D}. All entities are fictional.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

# ---------------------------------------------------------------------------------------------
# building blocks
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """An entity kind: table name, id field, id prefix, free-text field, optional list parent."""

    name: str
    id_field: str
    prefix: str
    text_field: str = "notes"
    list_by: Optional[str] = None
    plural: Optional[str] = None
    desc: str = ""


@dataclass(frozen=True)
class ActTool:
    """A consequential tool: acts on ``kind`` (by its id field), sets ``effects``, returns an id."""

    name: str
    kind: str
    params: tuple[tuple[str, str, str], ...]
    desc: str
    effects: dict = field(default_factory=dict)
    confirm: bool = False
    output: Optional[tuple[str, str, str, str]] = None  # (entity kind, returned field, prefix, status)
    signed: tuple[str, ...] = ()
    """Number parameters that may be negative (a temperature). Every other number parameter is a
    non-negative quantity (an amount, hours, gigabytes, a dose, a percentage) and is declared
    with ``minimum`` 0, so the world rejects a negative value."""


@dataclass(frozen=True)
class ActT:
    """An action prototype of a template.

    ``args``: parameter → ``"=role.field"`` (a field value), ``"@role"`` (an entity id),
    ``("out", "A")`` (the id returned by prototype A) or a literal. ``core``: requirement
    fields ``"role.field"``; ``extra``: optional groups of requirement fields (one entity
    each) that vary the investigation size; ``flips``: ``("role.field", bad value, why)`` —
    a V0/Legacy-Block case sets one of them, which makes the action unsupported.
    """

    tool: str
    target: str
    args: dict
    core: tuple[str, ...]
    extra: tuple[tuple[str, ...], ...] = ()
    flips: tuple[tuple[str, Any, str], ...] = ()


@dataclass(frozen=True)
class Template:
    """One scenario: roles, twin, the four action prototypes and the context texts."""

    name: str
    roles: tuple[tuple[str, str, dict], ...]  # (role, kind, fields)
    twin: Any  # a role name, or ("clone", overrides)
    A: ActT
    B: ActT
    C: ActT
    D: ActT
    ctx: dict  # "V1", "V2", "V3" → format strings over roles


@dataclass(frozen=True)
class Domain:
    """A domain's kinds, consequential tools and templates."""

    name: str
    kinds: tuple[Kind, ...]
    tools: tuple[ActTool, ...]
    templates: tuple[Template, ...]


# random value helpers (called with a random.Random) ------------------------------------------

FIRST = ["Dana", "Milo", "Priya", "Tomas", "Aiko", "Rafael", "Ines", "Jonah", "Leila", "Oskar",
         "Greta", "Nadia", "Felix", "Yara", "Bruno", "Selma", "Iker", "Mara", "Theo", "Zuri"]
LAST = ["Whitfield", "Okafor", "Lindqvist", "Ferreira", "Castellan", "Morrow", "Vantongeren",
        "Halloran", "Sato", "Brennick", "Quillon", "Ardent", "Pelletier", "Marsh", "Kowalczyk"]
ORGS = ["Northwind Tessellate", "Bluecairn Labs", "Harrow & Vale", "Quillfeather Ltd",
        "Oakhollow Systems", "Marrowgate Supply", "Tidewater Instruments", "Pellucid Freight"]


def person(r) -> str:
    """A fictional person's name."""
    return f"{r.choice(FIRST)} {r.choice(LAST)}"


def org(r) -> str:
    """A fictional organization's name."""
    return r.choice(ORGS)


def money(lo: int, hi: int) -> Callable:
    """A field generator: an amount in [lo, hi) with two decimals (some end in .99)."""
    return lambda r: round(r.randrange(lo * 100, hi * 100) / 100 + 0.99 - 0.99 * (r.random() < 0.3), 2)


def pick(*xs) -> Callable:
    """A field generator choosing one of ``xs``."""
    return lambda r: r.choice(xs)


def integer(lo: int, hi: int) -> Callable:
    """A field generator: an integer in [lo, hi]."""
    return lambda r: r.randint(lo, hi)


def note(*xs) -> Callable:
    """A free-text field generator choosing one of ``xs``."""
    return lambda r: r.choice(xs)
