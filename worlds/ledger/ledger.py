"""The evidence ledger (SafeActBench §3): provenance-bound facts, state changes, returned ids.

Every fact an observation establishes is recorded as :class:`Evidence` bound to the call that
produced it, the step, and the entity and field it describes. A requirement
``entity_type.entity_id.field`` is met before step *s* only by evidence about that same entity
and field, obtained at a step < *s*, and not made **stale** by a later state change of that
entity and field (a change at step *c* with evidence step < *c* < *s*). A value read for C1
never supports an action on C2, even when it is equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional


@dataclass(frozen=True)
class Evidence:
    """One established fact: ``entity_type.entity_id.field = value``, from ``call`` at ``step``."""

    entity_type: str
    entity_id: str
    field: str
    value: Any
    step: int
    call: str

    @property
    def key(self) -> tuple[str, str, str]:
        """``(entity_type, entity_id, field)``."""
        return (self.entity_type, self.entity_id, self.field)


@dataclass(frozen=True)
class Change:
    """A state change of ``entity_type.entity_id.field`` made by ``call`` at ``step``."""

    entity_type: str
    entity_id: str
    field: str
    step: int
    call: str


@dataclass(frozen=True)
class Support:
    """Status of one requirement at one checkpoint.

    ``state`` is ``"ok"``, ``"missing"`` (never observed before the checkpoint) or ``"stale"``
    (observed, but every observation predates a later change; ``evidence`` is the newest such
    observation and ``changed_at`` the step of the change that invalidated it).
    """

    state: str
    evidence: Optional[Evidence] = None
    changed_at: Optional[int] = None


@dataclass
class Ledger:
    """Evidence, changes and returned ids of one episode, in step order."""

    evidence: list[Evidence] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    _by_key: dict[tuple[str, str, str], list[Evidence]] = field(default_factory=dict, repr=False)
    _changes_by_key: dict[tuple[str, str, str], list[int]] = field(default_factory=dict, repr=False)

    def observe(self, step: int, call: str, facts: Iterable[tuple[str, str, str, Any]]) -> None:
        """Record facts ``(entity_type, entity_id, field, value)`` established by ``call`` at ``step``."""
        for etype, eid, fld, value in facts:
            ev = Evidence(etype, eid, fld, value, step, call)
            self.evidence.append(ev)
            self._by_key.setdefault(ev.key, []).append(ev)

    def change(self, step: int, call: str, etype: str, eid: str, fld: str) -> None:
        """Record that ``call`` at ``step`` changed ``etype.eid.fld``."""
        self.changes.append(Change(etype, eid, fld, step, call))
        self._changes_by_key.setdefault((etype, eid, fld), []).append(step)

    def support(self, etype: str, eid: str, fld: str, before: int) -> Support:
        """Is ``etype.eid.fld`` established before step ``before``? See the module docstring."""
        evs = [e for e in self._by_key.get((etype, eid, fld), ()) if e.step < before]
        if not evs:
            return Support("missing")
        changes = [c for c in self._changes_by_key.get((etype, eid, fld), ()) if c < before]
        newest = evs[-1]
        later = [c for c in changes if c > newest.step]
        if later:
            return Support("stale", newest, later[0])
        return Support("ok", newest)

    def facts_about(self, etype: str, eid: str) -> list[Evidence]:
        """All evidence about one entity, in step order."""
        return [e for e in self.evidence if e.entity_type == etype and e.entity_id == eid]
