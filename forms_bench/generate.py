"""Deterministic generator of form tasks in the five strata of AdvSim2Real's benchmark.

Every task's answer must be read off the page: a rule table applied to a record (conditional
policy), a value computed from several cells with stated rounding (derived values), the one
record meeting all conditions (conjunctive selection), a join across two tables by key
(relational joins), or several wrong fields fixed in the order a rule gives (ordered repair).
Each page also carries two pre-filled **protected fields** and two tempting **forbidden
controls** (plus a harmless "Save draft" button and a disabled case id).

Determinism: a task depends only on ``(split, stratum, seed, index)`` through a string-seeded
:class:`random.Random` (stable across Python versions and platforms). Test and training tasks
use disjoint person/unit names and disjoint record-id ranges, so a training pool never
overlaps the frozen test set.

The task builders are :mod:`forms_bench.strata`, the shared page parts and the validation
:mod:`forms_bench.assembly`; this module checks the arguments, names the tasks and seeds each
one's random source.
"""

from __future__ import annotations

from forms_bench.assembly import CHOOSE, _Ctx, money
from forms_bench.difficulty import TOP_LEVEL, Difficulty, level_knobs
from forms_bench.domains import DOMAINS
from forms_bench.schema import STRATA, Task
from forms_bench.strata import _BUILDERS, NATIVE, build

__all__ = ["generate", "make_task", "build", "NATIVE", "CHOOSE", "money"]


def generate(stratum: str, n: int, seed: int, split: str = "train", level: int = TOP_LEVEL,
             knobs: Difficulty | None = None) -> list[Task]:
    """Generate ``n`` tasks of one stratum, cycling through the six domains.

    Args:
        stratum: one of :data:`forms_bench.schema.STRATA`.
        n: number of tasks (≥ 0).
        seed: integer seed; the same (split, stratum, seed, n, level, knobs) gives
            byte-identical tasks.
        split: ``"train"`` (default) or ``"test"``; the two use disjoint names and id ranges.
        level: difficulty level 0…:data:`~forms_bench.difficulty.TOP_LEVEL` (default: the top,
            the benchmark itself; the frozen test set is made there).
        knobs: explicit :class:`~forms_bench.difficulty.Difficulty` (overrides ``level``).

    Returns:
        Validated tasks with ids ``{split}-{stratum}-{seed}-{index:03d}`` at the top level's
        knobs, ``{split}-{stratum}-{knobs.slug()}-{seed}-{index:03d}`` otherwise.

    Raises:
        ValueError: unknown stratum, split or level, or negative ``n``.
    """
    if stratum not in _BUILDERS:
        raise ValueError(f"unknown stratum {stratum!r}; expected one of {', '.join(STRATA)}")
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; expected 'train' or 'test'")
    if n < 0:
        raise ValueError("n must be >= 0")
    knobs = knobs if knobs is not None else level_knobs(level)
    native = knobs == NATIVE
    tag = "" if native else f"-{knobs.slug()}"
    key = stratum if native else f"{stratum}:{knobs.slug()}"
    tasks = []
    for i in range(n):
        domain = DOMAINS[i % len(DOMAINS)]
        ctx = _Ctx(split, key, seed, i, domain)
        tasks.append(build(ctx, stratum, f"{split}-{stratum.replace('_', '-')}{tag}-{seed}-{i:03d}", knobs))
    return tasks


def make_task(stratum: str, domain: str, seed: int, split: str = "train",
              knobs: Difficulty | None = None) -> Task:
    """One task of ``stratum`` in ``domain`` (a :class:`~forms_bench.domains.Domain` name) at
    difficulty ``knobs`` (default: the top level).

    Deterministic in its arguments; ids are ``{split}-{stratum}-{domain}-{seed}`` at the top
    level, ``{split}-{stratum}-{domain}-{knobs.slug()}-{seed}`` otherwise. Used to instantiate
    curriculum proposals.

    Raises:
        ValueError: unknown stratum, domain or split.
    """
    if stratum not in _BUILDERS:
        raise ValueError(f"unknown stratum {stratum!r}; expected one of {', '.join(STRATA)}")
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; expected 'train' or 'test'")
    by_name = {d.name: d for d in DOMAINS}
    if domain not in by_name:
        raise ValueError(f"unknown domain {domain!r}; expected one of {', '.join(by_name)}")
    knobs = knobs if knobs is not None else NATIVE
    native = knobs == NATIVE
    key = f"{stratum}:{domain}" if native else f"{stratum}:{domain}:{knobs.slug()}"
    tag = "" if native else f"-{knobs.slug()}"
    ctx = _Ctx(split, key, seed, 0, by_name[domain])
    return build(ctx, stratum, f"{split}-{stratum.replace('_', '-')}-{domain.replace('_', '-')}{tag}-{seed}", knobs)

