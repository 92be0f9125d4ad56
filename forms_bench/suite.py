"""The frozen test set: 150 tasks (30 per stratum), a versioned JSON file with a SHA-256 checksum.

``python -m forms_bench`` regenerates ``data/test-v1.json`` and its checksum from the
generator (split ``"test"``, seed :data:`TEST_SEED`); a test checks that the shipped file equals
what the generator produces, byte for byte.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import lru_cache
from pathlib import Path

from forms_bench.atomic import ChecksumError, read_checksummed, write_checksummed  # noqa: F401 (ChecksumError: re-export)
from forms_bench.generate import generate
from forms_bench.schema import STRATA, Task, validate_task

TEST_SET_VERSION = "v1"
TEST_SEED = 0
TASKS_PER_STRATUM = 30
DATA_DIR = Path(__file__).parent / "data"


def _path(version: str = TEST_SET_VERSION) -> Path:
    return DATA_DIR / f"test-{version}.json"


def build_test_set() -> list[Task]:
    """Generate the 150 test tasks (deterministic)."""
    return [t for s in STRATA for t in generate(s, TASKS_PER_STRATUM, TEST_SEED, split="test")]


def dump_tasks(tasks: list[Task]) -> bytes:
    """Canonical JSON bytes of a task list (sorted keys, two-space indent, trailing newline)."""
    return (json.dumps([t.model_dump(mode="json") for t in tasks], indent=2, sort_keys=True,
                       ensure_ascii=False) + "\n").encode("utf-8")


def write_test_set() -> Path:
    """Regenerate the frozen file and its checksum, atomically. Returns the data file path."""
    data = dump_tasks(build_test_set())
    path = _path()
    return write_checksummed(path, data)


@lru_cache(maxsize=4)
def _load(split: str) -> tuple[Task, ...]:
    if split != "test":
        raise ValueError(f"unknown split {split!r}: only 'test' is frozen; use "
                         "forms_bench.generate(stratum, n, seed) for training pools")
    data = read_checksummed(_path())
    return tuple(validate_task(d) for d in json.loads(data))


def load(split: str = "test") -> list[Task]:
    """The frozen test set (150 validated tasks, strata in :data:`STRATA` order).

    Raises:
        ValueError: for a split other than ``"test"``.
        ChecksumError: if the file was modified.
        TaskValidationError: if a task fails validation (names the task and field).
    """
    return list(_load(split))


def sample_size(spec: str) -> int | None:
    """N of a ``"sample:N"`` selection string (None for any other spec), shared by every suite.

    Raises:
        ValueError: ``sample:`` followed by anything but a non-negative integer.
    """
    if not spec.startswith("sample:"):
        return None
    n = spec.split(":", 1)[1]
    if not n.isdigit():
        raise ValueError(f"{spec!r}: expected sample:N with N a non-negative integer")
    return int(n)


def select_tasks(spec: str) -> list[Task]:
    """Test tasks by a selection string: ``"all"``, ``"sample:N"`` (the first N tasks of every
    stratum, in :data:`STRATA` order) or comma-separated task ids.

    Raises:
        ValueError: an unknown task id (all of them named), one listed twice, none at all, or a
            malformed ``sample:N``.
    """
    tasks = load("test")
    if spec == "all":
        return tasks
    n = sample_size(spec)
    if n is not None:
        return [t for s in STRATA for t in [x for x in tasks if x.stratum == s][:n]]
    by_id = {t.id: t for t in tasks}
    ids = [x.strip() for x in spec.split(",") if x.strip()]
    if not ids:
        raise ValueError(f"{spec!r}: no task id; expected 'all', 'sample:N' or comma-separated task ids")
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise ValueError(f"unknown task id(s): {', '.join(unknown)}")
    twice = sorted(i for i, k in Counter(ids).items() if k > 1)
    if twice:
        raise ValueError(f"task id(s) listed more than once: {', '.join(twice)} (each would count twice in every rate)")
    return [by_id[i] for i in ids]
