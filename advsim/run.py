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
    episodes/<key>.pkl.gz     finished chunks of the phase in progress (:class:`EpisodeStore`);
                              removed when its checkpoint completes
    eval-episodes/<key>.pkl.gz  the same for an evaluation in progress; removed when it ends
    .lock                     held (flock) by the process working in the run (:meth:`RunDir.lock`)
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
import enum
import gzip
import hashlib
import importlib
import io
import json
import logging
import os
import pickle
import re
import shutil
import stat
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator

import yaml

from advsim.config import RUN_RECORD_DEFAULTS, TrainConfig, dump_config
from forms_bench.atomic import append_jsonl, atomic_write_bytes, atomic_write_json, atomic_write_text
from forms_bench.unique_keys import DuplicateKeyError, loads, unique_key_loader
from policies.adapters import ROLES

LOGS = ("events.jsonl", "proposals.jsonl", "trajectories.jsonl")
# the names advsim.train gives checkpoints (advsim.train.phases, plus the adversary's adv-v-<t>); only
# folders so named are ever deleted under checkpoints/, and LATEST may name nothing else
CHECKPOINT_NAME = re.compile(r"(warmstart|capability-iter-[0-9]+|robust-iter-[0-9]+|adv-v-[0-9]+)")
COMMITTED = "COMMITTED"  # written into a checkpoint's folder once its commit (LATEST) finished
CHUNK_NAME = re.compile(r"[0-9a-f]{64}\.pkl\.gz")  # an EpisodeStore chunk: the SHA-256 hex digest of its key
CHUNK_TMP = re.compile(r"\.[0-9a-f]{64}\.pkl\.gz\.[^/]+\.tmp")  # one a killed atomic write left
MAX_CHUNK_BYTES = 2**30  # a saved chunk decompresses to at most this (a run's largest is ~10 MB): no gzip bomb
log = logging.getLogger(__name__)
# config fields that may change when a run resumes: where and how fast it runs, not what it computes.
# engine.threads is not one of them: on CPU the thread count changes how torch and vLLM split float
# sums, so log-probs (and the logged diff statistics) move in the last bits. The KV-cache sizes can
# change vLLM's batching, which leaves results alone only under the batch-invariant contract
# (engine.consistency), the mode a resumable run is meant to use; so can engine.max_num_batched_tokens
# (how many prompts one step prefills). engine.detokenize is not one of them: the text it decodes once
# per completion equals vLLM's for byte-level BPE tokenizers only; nor is engine.multiprocessing until
# a GPU shows it changes no value (on the CPU it does not).
RESUMABLE_CHANGES = ("name", "stages", "engine.kv_cache_gib", "engine.gpu_memory_utilization",
                     "engine.max_num_batched_tokens")


class RunFileError(ValueError):
    """A file of a run directory cannot be read back (hand-edited, truncated or from elsewhere);
    the message names the file and, for a log, the line."""


class RunInUseError(RuntimeError):
    """Another process holds the run directory's lock (:meth:`RunDir.lock`)."""


_HELD: dict[str, list] = {}  # resolved run path -> [open lock file, depth]: this process's locks


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

    @contextlib.contextmanager
    def lock(self) -> Iterator["RunDir"]:
        """Hold the run directory for this process inside the block: an exclusive, non-blocking
        ``flock`` on ``.lock``, so two ``advsim train`` (or ``eval``, ``demo``) processes never
        append to one run's logs or checkpoints at once. Re-entrant within a process (``demo``
        holds it around ``train`` and ``evaluate``, which take it too); released when the block
        ends or the process dies (the kernel drops a dead process's ``flock``). Where ``fcntl``
        does not exist (Windows) nothing is locked.

        Raises:
            RunInUseError: another process holds it (the message gives that process's pid).
            RunFileError: ``.lock`` is a symlink, a folder or otherwise not a regular file.
        """
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield self
            return
        key = str(self.path.resolve())
        if key in _HELD:
            _HELD[key][1] += 1
            try:
                yield self
            finally:
                _HELD[key][1] -= 1
            return
        lock_path = self.path / ".lock"
        try:  # never through a symlink (a received run directory's .lock -> ~/.bashrc would be truncated)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except OSError as exc:
            raise RunFileError(f"{lock_path} cannot be opened as the run's lock file ({exc.strerror or exc}; a "
                               "symlink or a folder there is refused): remove it") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise RunFileError(f"{lock_path} is not a regular file: remove it")
        fh = os.fdopen(fd, "r+", encoding="utf-8")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "?"
            fh.close()
            raise RunInUseError(f"{self.path} is in use by another process (pid {holder}); wait for it to end "
                                "or use another run directory") from None
        fh.seek(0), fh.truncate(), fh.write(f"{os.getpid()}\n"), fh.flush()
        _HELD[key] = [fh, 1]
        try:
            yield self
        finally:
            _HELD[key][1] -= 1
            if _HELD[key][1] == 0:
                del _HELD[key]
                fh.close()  # closing the file releases the flock

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
            old = loads(p.read_text(encoding="utf-8"))
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

    def fields_added_since(self) -> list[str]:
        """The fields of :data:`advsim.config.RUN_RECORD_DEFAULTS` (``"engine.batched_sampler"``)
        that this run's ``config.yaml`` does not write because it was saved before they existed;
        ``[]`` without a saved config.

        Raises:
            RunFileError: the saved config is not a YAML mapping of sections.
        """
        p = self.path / "config.yaml"
        if not p.exists():
            return []
        try:
            data = yaml.load(p.read_text(encoding="utf-8"), Loader=unique_key_loader()) or {}  # noqa: S506 - a SafeLoader subclass
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise RunFileError(f"{p}: the run's saved config cannot be read: {exc}") from None
        if not isinstance(data, dict):
            raise RunFileError(f"{p}: the run's saved config is not a mapping of sections")
        return [f"{s}.{k}" for s, fields in RUN_RECORD_DEFAULTS.items() for k in fields
                if not isinstance(data.get(s), dict) or k not in data[s]]

    def config_changes(self, cfg: TrainConfig) -> list[str]:
        """How ``cfg`` differs from the config this run was started with (``config.yaml``), one
        ``"optim.learning_rate: 0.01 -> 0.5"`` per field, leaving out :data:`RESUMABLE_CHANGES`;
        ``[]`` when nothing else changed or no config was saved yet (a run with no checkpoint).

        Raises:
            RunFileError: the saved config cannot be read or validated, or it is missing from a run
                with checkpoints.
        """
        p = self.path / "config.yaml"
        if not p.exists():
            if self.latest() is not None:
                raise RunFileError(f"{p} is missing but the run has checkpoints: without it a resume cannot check "
                                   "that the config is the one the run was started with; restore it")
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
            RunFileError: a ``\n``-terminated line is not a JSON object.
        """
        return self._scan(name)[2]

    def read_committed(self, name: str) -> list[dict]:
        """The rows of a log that the last complete checkpoint covers: its first ``log_lengths``
        rows (:meth:`latest`; none before the first checkpoint). Rows past them belong to a phase
        that did not finish — a resume drops them (:meth:`rollback_logs`) — so a report reads these.

        Raises:
            ValueError: ``name`` is not one of :data:`LOGS`.
            RunFileError: as :meth:`read` and :meth:`latest`.
        """
        if name not in LOGS:
            raise ValueError(f"unknown log {name!r}; expected one of {LOGS}")
        latest = self.latest()
        return self.read(name)[:latest[1]["log_lengths"][name]] if latest else []

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
                row = loads(text)
                if not isinstance(row, dict):
                    raise json.JSONDecodeError(f"a JSON {type(row).__name__}, not an object", text, 0)
            except (json.JSONDecodeError, DuplicateKeyError) as exc:
                raise RunFileError(f"{p}, line {i}: not a JSON row ({getattr(exc, 'msg', exc)}); a crash can only leave a torn "
                                   "last line without its newline, so this file was changed by hand or copied "
                                   "in part") from None
            rows.append(row)
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
        # after LATEST: proof that this commit finished, should LATEST be lost later (_check_no_lost_latest)
        atomic_write_text(self.checkpoint_dir(name) / COMMITTED, "")
        self.episodes(1).clear()  # the phase is complete: its saved chunks are never read again

    def episodes(self, chunk: int, salt: str = "", folder: str = "episodes") -> "EpisodeStore":
        """The store of finished rollout chunks of the phase in progress (``episodes/``; an
        evaluation keeps its own in ``eval-episodes/``). ``salt``: :func:`run_digest` of the
        config, mixed into every key so a chunk saved under another config is never read back."""
        return EpisodeStore(self.path / folder, chunk, salt=salt)

    def completed(self) -> list[str]:
        """Names of complete checkpoints, oldest first (recorded in the latest one)."""
        latest = self.latest()
        return list(latest[1].get("completed", [latest[0]])) if latest else []

    def latest(self) -> tuple[str, dict] | None:
        """(name, state) of the last complete checkpoint, or None.

        Raises:
            RunFileError: ``LATEST`` cannot be read or names no checkpoint, its state is not valid
                (:meth:`state`), or ``LATEST`` is missing although a commit finished
                (:meth:`_check_no_lost_latest`).
        """
        p = self.path / "checkpoints" / "LATEST"
        if not p.exists():
            self._check_no_lost_latest()
            return None
        try:
            name = p.read_text(encoding="utf-8", errors="replace").strip()
        except OSError as exc:  # a folder, no permission
            raise RunFileError(f"{p} cannot be read ({type(exc).__name__}: {exc.strerror or exc}); it should hold the "
                               "last complete checkpoint's name") from None
        if not CHECKPOINT_NAME.fullmatch(name):
            raise RunFileError(f"{p}: {name[:80]!r} is not a checkpoint name (warmstart, capability-iter-N, "
                               "robust-iter-N, adv-v-N)")
        state = self.state(name, named_in=p)
        if name not in state.get("completed", [name]):
            raise RunFileError(f"{self.checkpoint_dir(name) / 'state.json'}: its 'completed' list does not list the "
                               f"checkpoint itself ({name!r})")
        return name, state

    def state(self, name: str, named_in: Path | None = None) -> dict:
        """The validated ``state.json`` of checkpoint ``name``: a mapping with ``versions`` (role ->
        adapter version >= 0), ``log_lengths`` (a row count >= 0 per log of :data:`LOGS`) and
        ``completed`` (checkpoint names).

        Raises:
            RunFileError: the file cannot be read or is not such a mapping (``named_in``: the file
                that named the checkpoint, for the message).
        """
        sp = self.checkpoint_dir(name) / "state.json"
        try:
            state = loads(sp.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, DuplicateKeyError
            raise RunFileError(f"{sp}: checkpoint {name!r}" + (f" (named in {named_in})" if named_in else "")
                               + f" cannot be read: {exc}") from None
        lengths = state.get("log_lengths") if isinstance(state, dict) else None
        if not isinstance(state, dict) or not isinstance(state.get("completed", []), list) \
                or not isinstance(state.get("versions", {}), dict) or not isinstance(lengths, dict) \
                or not all(isinstance(lengths.get(log), int) and lengths[log] >= 0 for log in LOGS) \
                or not all(r in ROLES and isinstance(v, int) and v >= 0 for r, v in state.get("versions", {}).items()):
            raise RunFileError(f"{sp}: not a checkpoint state (a mapping with 'versions' a mapping of role to "
                               f"version >= 0, 'log_lengths' a count >= 0 for each of {', '.join(LOGS)} and "
                               "'completed' a list)")
        bad = [n for n in state.get("completed", [name]) if not isinstance(n, str) or not CHECKPOINT_NAME.fullmatch(n)]
        if bad:
            raise RunFileError(f"{sp}: its 'completed' list holds {bad[0]!r}, not a checkpoint name")
        return state

    def _check_no_lost_latest(self) -> None:
        """With no ``LATEST``: refuse when the checkpoint folders show that one existed.

        A checkpoint commit writes one ``completed`` list into every folder it writes, then
        ``LATEST``, then a :data:`COMMITTED` marker in the checkpoint's folder; a kill before
        ``LATEST`` leaves folders that all hold the same list and no marker, and the run has no
        complete checkpoint yet. A marker, or two different lists, mean a commit finished, so
        ``LATEST`` was lost (deleted, or not copied) and starting over would drop the run's logs.

        Raises:
            RunFileError: a folder holds the marker, or the folders hold more than one ``completed`` list.
        """
        lists: dict[str, str] = {}  # folder -> its completed list (JSON text)
        marked: list[str] = []
        folder = self.path / "checkpoints"
        for sp in sorted(folder.glob("*/state.json")):
            if not CHECKPOINT_NAME.fullmatch(sp.parent.name):
                continue
            if (sp.parent / COMMITTED).is_file():
                marked.append(sp.parent.name)
            try:
                done = loads(sp.read_text(encoding="utf-8")).get("completed")
                lists[sp.parent.name] = json.dumps(done if isinstance(done, list) else [])
            except (OSError, UnicodeDecodeError, ValueError, AttributeError):
                lists.setdefault(sp.parent.name, "[]")
        if marked or len(set(lists.values())) > 1:
            last = max(marked or lists, key=lambda n: len(json.loads(lists[n])))
            why = (f"checkpoint {marked[0]!r} finished its commit ({COMMITTED} marker)" if marked
                   else "the checkpoints were committed at different times (complete ones existed)")
            raise RunFileError(f"{folder / 'LATEST'} is missing, but {why}; write the last complete checkpoint's "
                               f"name into it (probably {last!r}) to resume, or start a new run directory")

    def rollback_logs(self) -> None:
        """Drop log rows written after the last complete checkpoint (used on resume), a torn
        last line left by a crash, and checkpoint folders that never completed (only folders named
        as advsim names checkpoints, :data:`CHECKPOINT_NAME`; anything else under ``checkpoints/``
        is left alone).

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
        for d in (self.path / "checkpoints").iterdir():  # only folders advsim names: a user's own stay
            if d.is_dir() and not d.is_symlink() and CHECKPOINT_NAME.fullmatch(d.name) and d.name not in done:
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


_OWN_PACKAGES = ("advsim", "forms_bench", "worlds", "judges", "policies")


class _EpisodeUnpickler(pickle._Unpickler):  # the Python unpickler: its BUILD can be checked
    """Unpickles only what :class:`EpisodeStore` writes: the project's own dataclasses, pydantic
    models and enums (episodes, specs, turns, tasks, injections), plus pickle's built-in types. Any
    other global (``os.system``, ``builtins.eval``, a class with side effects) is refused before it
    is looked up, so a planted chunk cannot run code (the "Restricting Globals" recipe of Python's
    :mod:`pickle` documentation)."""

    def find_class(self, module: str, name: str):
        if module.split(".")[0] in _OWN_PACKAGES and "." not in name:
            obj = getattr(importlib.import_module(module), name, None)
            if isinstance(obj, type) and (dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum)
                                          or any(c.__name__ == "BaseModel" and c.__module__.startswith("pydantic")
                                                 for c in obj.__mro__)):
                return obj
        raise pickle.UnpicklingError(f"global {module}.{name} is not an episode type")

    def load_build(self) -> None:
        """BUILD sets an object's state; on a class it would ``setattr`` the class itself (replace
        ``Episode.parse_rate`` for the rest of the process): refused."""
        if isinstance(self.stack[-2], type):
            raise pickle.UnpicklingError(f"state set on the class {self.stack[-2].__name__}, not on an instance")
        super().load_build()

    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.BUILD[0]] = load_build


def run_digest(cfg: TrainConfig) -> str:
    """SHA-256 (16 hex digits) of what a run's rollouts depend on: the config without
    :data:`RESUMABLE_CHANGES` and without a field of :data:`advsim.config.RUN_RECORD_DEFAULTS`
    that holds the value runs had before the field existed (engine kind, dtype, ``max_model_len`` and threads, backbone, world, sampling
    and limits all count) and advsim's version (a stand-in for the prompt formats in code).
    :class:`EpisodeStore` mixes it into every key."""
    from advsim import __version__

    d = cfg.to_dict()
    # a field added since, at the value runs had before it, leaves the digest (and saved chunks' keys) as it was
    # for runs saved before the field existed; runs started while a field was still hashed (cublas_linear,
    # 2026-12-04/05) get a new digest once: their interrupted phase samples its chunks again (time, not results)
    for section, fields in RUN_RECORD_DEFAULTS.items():
        for k, legacy in fields.items():
            if d.get(section, {}).get(k, object()) == legacy:
                d[section].pop(k)
    for field in RESUMABLE_CHANGES:  # what a resume may change does not change a rollout
        *parents, leaf = field.split(".")
        node = d
        for k in parents:
            node = node.get(k, {})
        node.pop(leaf, None)
    text = json.dumps([d, __version__], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class EpisodeStore:
    """Finished chunks of rollouts, saved so an interrupted phase resumes without sampling them
    again (:func:`advsim.rollout.run_episodes` with ``store=``).

    A chunk is ``chunk`` consecutive episode specs, run with their sampling slots fixed to
    their positions in the whole call, so a chunked call samples every episode with the same
    seeds as an unchunked one (and, on a batch-invariant engine, the same tokens). Its key is a
    SHA-256 of ``salt`` (:func:`run_digest` of the config) and everything the call depends on:
    adapter version, seed, world, limits and the specs themselves (task, injection, prefix,
    slot); a changed call or config misses and is run. The adapter version names the weights only
    inside one phase of one run — that is the scope: :meth:`RunDir.commit_checkpoint` and the
    end of an evaluation clear the store.

    Files are gzip-compressed pickles, written atomically (a killed write leaves no chunk), and
    read back by a restricted unpickler (:class:`_EpisodeUnpickler`: the project's episode types
    only, so a planted file cannot run code). A chunk that cannot be read back (truncated,
    garbled, foreign types, not a list of episodes) is logged, deleted and sampled again: the
    store is a cache, and its loss costs time, never results.

    Args:
        root: the folder (created on the first write).
        chunk: episodes per chunk, ≥ 1.
        salt: mixed into every key (default ``""``).

    Raises:
        ValueError: ``chunk`` < 1.
    """

    def __init__(self, root: str | os.PathLike, chunk: int, salt: str = ""):
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        self.root = Path(root)
        self.chunk = chunk
        self.salt = salt

    def key(self, *parts: Any) -> str:
        """SHA-256 hex digest of the salt and ``parts`` in a canonical JSON form."""
        text = json.dumps([self.salt, *parts], sort_keys=True, default=_material, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get(self, key: str) -> list | None:
        """The saved episodes under ``key``, or None (none saved, or the chunk was unreadable and
        is now deleted: see the class docstring)."""
        p = self.root / f"{key}.pkl.gz"
        if not p.is_file():  # absent, or not a file we wrote (a folder of that name is left alone)
            return None
        from advsim.rollout import Episode

        try:
            with gzip.open(p, "rb") as fh:
                data = fh.read(MAX_CHUNK_BYTES + 1)
            if len(data) > MAX_CHUNK_BYTES:
                raise pickle.UnpicklingError(f"decompresses to over {MAX_CHUNK_BYTES:,} bytes")
            eps = _EpisodeUnpickler(io.BytesIO(data)).load()
            if not isinstance(eps, list) or not eps or not all(isinstance(e, Episode) for e in eps):
                raise pickle.UnpicklingError(f"a {type(eps).__name__}, not a list of episodes" if eps != []
                                             else "an empty list (put never saves one)")
        except Exception as exc:  # noqa: BLE001 - any damage: the chunk is a cache, sample it again
            log.warning("%s: saved chunk unreadable (%s: %s); deleted, sampling it again", p, type(exc).__name__,
                        str(exc)[:200])
            p.unlink(missing_ok=True)
            return None
        return eps
    def put(self, key: str, episodes: list) -> None:
        """Save ``episodes`` under ``key`` (atomically).

        Raises:
            ValueError: ``episodes`` is empty, or ``key`` is not a :meth:`key` digest.
        """
        if not episodes:
            raise ValueError("an empty chunk is never saved (get() would read it as damaged)")
        if not CHUNK_NAME.fullmatch(f"{key}.pkl.gz"):
            raise ValueError(f"{key[:80]!r} is not a key() digest")
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.root / f"{key}.pkl.gz",
                           gzip.compress(pickle.dumps(episodes, protocol=pickle.HIGHEST_PROTOCOL), compresslevel=1))

    def _chunks(self) -> list[Path]:
        """The chunk files in the folder: regular files named ``<sha256 hex>.pkl.gz`` (what
        :meth:`put` writes), plus the ``.<chunk>.<random>.tmp`` a killed write leaves."""
        if not self.root.is_dir():
            return []
        return [e for e in self.root.iterdir()
                if (CHUNK_NAME.fullmatch(e.name) or CHUNK_TMP.fullmatch(e.name)) and e.is_file()
                and not e.is_symlink()]

    def __len__(self) -> int:
        return sum(1 for e in self._chunks() if CHUNK_NAME.fullmatch(e.name))

    def clear(self) -> None:
        """Remove every saved chunk (only files this store writes: anything else in the folder —
        a user's own file, a sub-folder — stays; a symlinked folder is cleared through the link),
        then the folder itself if that left it empty and it is not a symlink."""
        for e in self._chunks():
            e.unlink(missing_ok=True)
        if self.root.is_dir() and not self.root.is_symlink():
            with contextlib.suppress(OSError):  # not empty: a user's files stay, and the folder with them
                self.root.rmdir()


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
