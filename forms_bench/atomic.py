"""Atomic file writes for every package (temporary file + fsync + rename), and files checked
against a recorded SHA-256 (:func:`write_checksummed`, :func:`read_checksummed`: the frozen form
test set, the ledger suite and any suite file ``worlds.ledger.suite.load_suite`` verifies).

It lives in the lowest package, ``forms_bench``, so that every other package may import it
without breaking the one-way dependency rule of DESIGN.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder, fsync, rename.

    A reader sees either the old file or the complete new one, never a partial write; a killed
    process leaves at most a stray ``.tmp`` file. Parent folders are created. Returns the path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual file mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """UTF-8 text version of :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented, key-sorted JSON, atomically."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def atomic_append_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> Path:
    """Append rows to a JSONL file by rewriting it atomically (old content + new rows).

    Suited to the product's small logs (events, proposals); a crash never leaves a torn line.
    """
    path = Path(path)
    old = path.read_bytes() if path.exists() else b""
    new = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    return atomic_write_bytes(path, old + new)


class ChecksumError(ValueError):
    """A file does not match its recorded SHA-256, or the record is missing."""


def checksum_path(path: str | os.PathLike) -> Path:
    """Where ``path``'s SHA-256 is recorded: ``<path>.sha256`` (``<hex>  <name>``, sha256sum's format)."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def write_checksummed(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` and its SHA-256 to :func:`checksum_path`, each atomically
    (data first: a crash between the two leaves a mismatch that :func:`read_checksummed` reports,
    never a silently accepted file). Returns ``path``."""
    path = Path(path)
    atomic_write_bytes(path, data)
    atomic_write_text(checksum_path(path), f"{hashlib.sha256(data).hexdigest()}  {path.name}\n")
    return path


def read_checksummed(path: str | os.PathLike) -> bytes:
    """The bytes of ``path``, checked against the SHA-256 recorded beside it.

    Raises:
        ChecksumError: the record is missing, or the file's SHA-256 differs from it (the message
            names the file and both digests' first 16 hex digits).
        OSError: ``path`` cannot be read.
    """
    path = Path(path)
    raw = path.read_bytes()
    ck = checksum_path(path)
    if not ck.exists():
        raise ChecksumError(f"{path.name}: checksum file {ck.name} is missing")
    want = ck.read_text(encoding="utf-8").split()[0]
    got = hashlib.sha256(raw).hexdigest()
    if got != want:
        raise ChecksumError(f"{path.name}: sha256 {got[:16]}… does not match the recorded {want[:16]}…")
    return raw
