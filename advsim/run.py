"""Run directories: config, metrics log, proposals/trajectories, checkpoints, resume.

Layout of ``runs/<id>/``::

    config.yaml               the full config (defaults filled in)
    tokenizer.json            the backbone tokenizer's fingerprint (special-token ids, vocabulary
                              digest): a run resumes only with the same tokenizer
    events.jsonl              one metrics row per update (rewards, advantages, p̂, KL, diff, …)
    proposals.jsonl           curriculum and adversary proposals with their rewards
    trajectories.jsonl        executor episodes (task, actions, verdict)
    checkpoints/<name>/       adapters (policies.adapters layout) + optimizer state + state.json
    checkpoints/LATEST        name of the last complete checkpoint (its state.json lists all)
    episodes/<key>.pkl.gz     finished chunks of the phase (or evaluation) in progress
                              (:class:`EpisodeStore`); removed when its checkpoint completes
    report.md, *.png          written by advsim.report

Every file but the three logs is written atomically (temporary file + fsync + rename). The logs
are appended to in place (:func:`forms_bench.atomic.append_jsonl`: one write + fsync per append,
earlier bytes never rewritten, so a 40,000-episode ``trajectories.jsonl`` costs linear I/O); a
crash mid-append can leave only a torn last line without its ``\n``, which :meth:`RunDir.read`
ignores and the next append (or the resume) removes. A checkpoint is complete once ``LATEST``
names it: ``LATEST`` is written last, so a run killed mid-checkpoint resumes from the previous
one. Log rows carry the name of the phase that wrote them; on resume, rows written after the
last complete checkpoint are dropped, so a resumed run's logs equal an uninterrupted run's.
Inside a phase, rollouts are saved chunk by chunk (:class:`EpisodeStore`): a phase longer than a
job's time limit still advances across restarts, each one replaying the saved chunks instead of
sampling them again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import json
import os
import pickle
import shutil
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator

from advsim.config import TrainConfig, dump_config
from forms_bench.atomic import append_jsonl, atomic_write_bytes, atomic_write_json, atomic_write_text

LOGS = ("events.jsonl", "proposals.jsonl", "trajectories.jsonl")
# config fields that may change when a run resumes: where and how fast it runs, not what it computes
RESUMABLE_CHANGES = ("name", "stages", "engine.threads", "engine.kv_cache_gib", "engine.gpu_memory_utilization")


class RunFileError(ValueError):
    """A file of a run directory cannot be read back (hand-edited, truncated or from elsewhere);
    the message names the file and, for a log, the line."""


class RunDir:
    """A run directory (created if missing).

    Args:
        path: the folder.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise RunFileError(f"{self.path} is a file, not a run directory")
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "checkpoints").mkdir(exist_ok=True)

    # -- config ------------------------------------------------------------------------------
    def write_config(self, cfg: TrainConfig) -> None:
        atomic_write_text(self.path / "config.yaml", dump_config(cfg))

    def tokenizer_changes(self, fingerprint: dict[str, Any]) -> list[str]:
        """Compare the backbone tokenizer's ``fingerprint``
        (:func:`policies.backbone.tokenizer_fingerprint`) with the one this run recorded in
        ``tokenizer.json``, one ``"eos_token_id: 1 -> 2"`` per differing field; record it when
        none was recorded yet (a new run, or one started before this file existed) and return ``[]``.

        A run's adapters learnt to end their turns with its tokenizer's end-of-sequence token and
        its rollouts stop on it, so a run must not continue under another (transformers 5.17 and
        5.19 converted the embedded GGUF with different ones before checkpoint format 2).

        Raises:
            RunFileError: the recorded fingerprint cannot be read.
        """
        p = self.path / "tokenizer.json"
        if not p.exists():
            atomic_write_text(p, json.dumps(fingerprint, indent=1, sort_keys=True) + "\n")
            return []
        try:
            old = json.loads(p.read_text(encoding="utf-8"))
            if not isinstance(old, dict):
                raise ValueError("not a mapping")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise RunFileError(f"{p}: the run's tokenizer fingerprint cannot be read: {exc}") from None
        return [f"{k}: {old.get(k)!r} -> {fingerprint.get(k)!r}" for k in sorted(set(old) | set(fingerprint))
                if old.get(k) != fingerprint.get(k)]

    def saved_config(self) -> TrainConfig:
        """The config this run was started with (``config.yaml``), fields added since at the value
        the run used (:data:`advsim.config.RUN_RECORD_DEFAULTS`).

        Raises:
            RunFileError: no saved config, or it cannot be read or validated.
        """
        from advsim.config import ConfigError, load_config

        p = self.path / "config.yaml"
        try:
            return load_config(p, run_record=True)
        except ConfigError as exc:
            raise RunFileError(f"{p}: the run's saved config cannot be read: {exc}") from None

    def config_changes(self, cfg: TrainConfig) -> list[str]:
        """How ``cfg`` differs from the config this run was started with (``config.yaml``), one
        ``"optim.learning_rate: 0.01 -> 0.5"`` per field, leaving out :data:`RESUMABLE_CHANGES`;
        ``[]`` when nothing else changed or no config was saved yet.

        Raises:
            RunFileError: the saved config cannot be read or validated.
        """
        p = self.path / "config.yaml"
        if not p.exists():
            return []
        saved = self.saved_config().to_dict()

        def flat(d: dict, prefix: str = "") -> dict:
            out = {}
            for k, v in d.items():
                if isinstance(v, dict) and v and all(isinstance(x, str) for x in v):
                    out.update(flat(v, f"{prefix}{k}."))
                else:
                    out[f"{prefix}{k}"] = v
            return out

        old, new = flat(saved), flat(cfg.to_dict())
        return [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new))
                if old.get(k) != new.get(k) and k not in RESUMABLE_CHANGES]

    # -- logs --------------------------------------------------------------------------------
    def log(self, name: str, rows: Iterable[dict[str, Any]]) -> None:
        """Append rows to ``name`` (one of :data:`LOGS`) and fsync
        (:func:`forms_bench.atomic.append_jsonl`: earlier rows are never rewritten; a crash leaves
        at most a torn last line, which :meth:`read` ignores and the next append removes)."""
        if name not in LOGS:
            raise ValueError(f"unknown log {name!r}; expected one of {LOGS}")
        append_jsonl(self.path / name, rows)

    def read(self, name: str) -> list[dict]:
        """All rows of a log ([] if absent). A final fragment without its terminating ``\n`` (the
        torn tail a crash in the middle of an append leaves) is ignored; blank lines are skipped.

        Raises:
            RunFileError: a ``\n``-terminated line is not JSON.
        """
        return self._scan(name)[2]

    def count(self, name: str) -> int:
        """How many rows :meth:`read` would return, without parsing them (a checkpoint records each
        log's length: one pass over the bytes, no JSON decoding of a 40,000-episode log)."""
        p = self.path / name
        if not p.exists():
            return 0
        return sum(1 for line in p.read_bytes().split(b"\n")[:-1] if _is_row(line))  # [-1]: b"" or a torn tail

    def _scan(self, name: str) -> tuple[bytes, list[int], list[dict]]:
        """(the log's bytes, the offset just past each row's ``\n``, the rows) — see :meth:`read`.

        Lines are split on ``\n`` only: ``json.dumps(ensure_ascii=False)`` leaves U+2028, U+2029
        and U+0085 unescaped inside strings, and ``str.splitlines`` would break a row there.
        """
        p = self.path / name
        if not p.exists():
            return b"", [], []
        data = p.read_bytes()
        ends: list[int] = []
        rows: list[dict] = []
        start = 0
        for i, line in enumerate(data.split(b"\n")[:-1], start=1):  # [-1]: b"" or the torn tail
            start += len(line) + 1
            if not _is_row(line):
                continue
            text = line.decode("utf-8", errors="replace")
            try:
                rows.append(json.loads(text))
            except json.JSONDecodeError as exc:
                raise RunFileError(f"{p}, line {i}: not a JSON row ({exc.msg}); a crash can only leave a torn "
                                   "last line without its newline, so this file was changed by hand or copied "
                                   "in part") from None
            ends.append(start)
        return data, ends, rows

    # -- checkpoints -------------------------------------------------------------------------
    def checkpoint_dir(self, name: str) -> Path:
        return self.path / "checkpoints" / name

    def commit_checkpoint(self, name: str, state: dict[str, Any], also: Iterable[str] = ()) -> None:
        """Mark checkpoint ``name`` (and the checkpoints ``also``, written with it) complete.

        Each folder gets its ``state.json`` (with each log's current length and the list of
        complete checkpoints); then ``LATEST`` is pointed at ``name`` — the one write that
        makes them all complete at once, so a kill at any moment leaves either the old or the
        new checkpoint, never a mixture.
        """
        also = list(also)
        lengths = {log: self.count(log) for log in LOGS}
        done = [n for n in self.completed() if n != name and n not in also] + [name, *also]
        for n in [*also, name]:
            d = self.checkpoint_dir(n)
            d.mkdir(parents=True, exist_ok=True)
            atomic_write_json(d / "state.json", {**state, "name": n, "log_lengths": lengths, "completed": done})
        atomic_write_text(self.path / "checkpoints" / "LATEST", name + "\n")
        self.episodes(1).clear()  # the phase is complete: its saved chunks are never read again

    def episodes(self, chunk: int) -> "EpisodeStore":
        """The store of finished rollout chunks of the phase in progress (``episodes/``)."""
        return EpisodeStore(self.path / "episodes", chunk)

    def completed(self) -> list[str]:
        """Names of complete checkpoints, oldest first (recorded in the latest one)."""
        latest = self.latest()
        return list(latest[1].get("completed", [latest[0]])) if latest else []

    def latest(self) -> tuple[str, dict] | None:
        """(name, state) of the last complete checkpoint, or None."""
        p = self.path / "checkpoints" / "LATEST"
        if not p.exists():
            return None
        name = p.read_text(encoding="utf-8", errors="replace").strip()
        sp = self.checkpoint_dir(name) / "state.json"
        try:
            state = json.loads(sp.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RunFileError(f"{sp}: checkpoint {name!r} (named in {p}) cannot be read: {exc}") from None
        if not isinstance(state, dict) or not isinstance(state.get("completed", []), list) \
                or not isinstance(state.get("versions", {}), dict):
            raise RunFileError(f"{sp}: not a checkpoint state (a mapping with 'completed' a list and "
                               "'versions' a mapping)")
        return name, state

    def rollback_logs(self) -> None:
        """Drop log rows written after the last complete checkpoint (used on resume), a torn
        last line left by a crash, and checkpoint folders that never completed.

        A log is cut to the bytes of its first ``log_lengths`` rows (kept byte for byte), written
        atomically (:func:`forms_bench.atomic.atomic_write_bytes`), so a crash during the resume
        leaves the old file or the cut one; a log that needs no cut is left untouched.
        """
        latest = self.latest()
        lengths = latest[1]["log_lengths"] if latest else {log: 0 for log in LOGS}
        for log in LOGS:
            data, ends, rows = self._scan(log)
            n = lengths.get(log, 0)
            if n > len(rows):
                raise RunFileError(f"{self.path / log}: {len(rows)} rows, but checkpoint {latest[0]!r} recorded {n}; "
                                   "the log lost rows after the checkpoint (changed by hand or copied in part), so a "
                                   "resumed run would not equal an uninterrupted one")
            cut = (ends[n - 1] if n else 0) if n < len(rows) else data.rfind(b"\n") + 1
            if cut < len(data):
                atomic_write_bytes(self.path / log, data[:cut])
        done = set(self.completed())
        for d in (self.path / "checkpoints").iterdir():
            if d.is_dir() and d.name not in done:
                shutil.rmtree(d)


def _is_row(line: bytes) -> bool:
    """Whether a log line (without its ``\n``) is a row, not blank: a JSON object's ``{`` says so
    at once; anything else counts unless it is only whitespace (``str.strip``'s, Unicode
    included), so :meth:`RunDir.count` and :meth:`RunDir.read` agree on every line."""
    return line[:1] == b"{" or bool(line.decode("utf-8", errors="replace").strip())


def _material(obj: Any) -> Any:
    """A JSON-able, process-independent form of a spec's parts (key material of :class:`EpisodeStore`)."""
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if isinstance(obj, (set, frozenset)):
        return sorted(json.dumps(x, sort_keys=True, default=_material) for x in obj)
    return repr(obj)


class EpisodeStore:
    """Finished chunks of rollouts, saved so an interrupted phase resumes without sampling them
    again (:func:`advsim.rollout.run_episodes` with ``store=``).

    A chunk is ``chunk`` consecutive episode specs, run with their sampling slots fixed to
    their positions in the whole call, so a chunked call samples every episode with the same
    seeds as an unchunked one (and, on a batch-invariant engine, the same tokens). Its key is a
    SHA-256 of everything the episodes depend on: adapter version, seed, world, limits and the
    specs themselves (task, injection, prefix, slot); a changed call misses and is run. The
    adapter version names the weights only inside one phase of one run — that is the scope:
    :meth:`RunDir.commit_checkpoint` and the end of an evaluation clear the store.

    Files are gzip-compressed pickles, written atomically (a killed write leaves no chunk).
    They are a cache of this run's own outputs, read back only by this code: never load a
    store from a source you do not trust (pickle runs code).

    Args:
        root: the folder (created on the first write).
        chunk: episodes per chunk, ≥ 1.

    Raises:
        ValueError: ``chunk`` < 1.
    """

    def __init__(self, root: str | os.PathLike, chunk: int):
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        self.root = Path(root)
        self.chunk = chunk

    @staticmethod
    def key(*parts: Any) -> str:
        """SHA-256 hex digest of ``parts`` in a canonical JSON form."""
        text = json.dumps(parts, sort_keys=True, default=_material, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get(self, key: str) -> list | None:
        """The saved episodes under ``key``, or None."""
        p = self.root / f"{key}.pkl.gz"
        if not p.exists():
            return None
        return pickle.loads(gzip.decompress(p.read_bytes()))

    def put(self, key: str, episodes: list) -> None:
        """Save ``episodes`` under ``key`` (atomically)."""
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.root / f"{key}.pkl.gz",
                           gzip.compress(pickle.dumps(episodes, protocol=pickle.HIGHEST_PROTOCOL), compresslevel=1))

    def __len__(self) -> int:
        return len(list(self.root.glob("*.pkl.gz"))) if self.root.exists() else 0

    def clear(self) -> None:
        """Remove every saved chunk."""
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def stderr_to(path: str | os.PathLike | None) -> Iterator[None]:
    """Send file descriptor 2 (what C++ extensions, tqdm bars and ``warnings`` write, beyond the
    reach of :mod:`logging`) to the end of ``path`` inside the block, then restore it; ``None``
    leaves stderr alone. Used around model loading and vLLM start so engine noise lands in the
    run's ``engine.log`` and the console keeps the phase lines."""
    if path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(os.fspath(path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)
