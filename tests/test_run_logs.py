"""The run logs' append (``forms_bench.atomic.append_jsonl``) and their reading back
(``advsim.run.RunDir.read``, ``rollback_logs``): linear-time appends that never rewrite earlier
bytes, a torn last line after a crash that readers drop and the next append removes."""

from __future__ import annotations

import json
import os

import pytest

from advsim.run import RunDir, RunFileError
from forms_bench.atomic import append_jsonl


def _line(row: dict) -> bytes:
    return (json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def test_run_log_append_three_batches_gives_those_rows_in_order(tmp_path):
    run = RunDir(tmp_path / "r")
    batches = [[{"i": 0, "b": "x"}], [{"i": 1}, {"i": 2, "z": [1, 2]}], [{"i": 3, "text": "é ✓"}]]
    for batch in batches:
        run.log("events.jsonl", batch)
    assert run.read("events.jsonl") == [{"i": 0, "b": "x"}, {"i": 1}, {"i": 2, "z": [1, 2]}, {"i": 3, "text": "é ✓"}]
    # the bytes: one key-sorted line per row, non-ASCII kept, nothing else
    assert (run.path / "events.jsonl").read_bytes() == (
        b'{"b": "x", "i": 0}\n{"i": 1}\n{"i": 2, "z": [1, 2]}\n' + '{"i": 3, "text": "é ✓"}\n'.encode("utf-8"))
    run.log("events.jsonl", [])  # an empty batch changes nothing
    assert len(run.read("events.jsonl")) == 4


def test_run_log_rows_with_unicode_line_separators_read_back(tmp_path):
    """json.dumps(ensure_ascii=False) leaves U+2028, U+2029 and U+0085 raw inside strings; the log
    is split on "\\n" only, so such a row (page text, model output) reads back whole."""
    run = RunDir(tmp_path / "r")
    rows = [{"t": "a\u2028b"}, {"t": "c\u2029d\x85e"}, {"t": "f\rg"}]
    run.log("trajectories.jsonl", rows)
    assert run.read("trajectories.jsonl") == rows


def test_run_log_torn_tail_is_ignored_then_removed_by_the_next_append(tmp_path):
    run = RunDir(tmp_path / "r")
    p = run.path / "events.jsonl"
    p.write_bytes(b'{"a": 1}\n{"b":')
    assert run.read("events.jsonl") == [{"a": 1}]
    run.log("events.jsonl", [{"c": 2}, {"d": 3}])
    assert run.read("events.jsonl") == [{"a": 1}, {"c": 2}, {"d": 3}]
    assert p.read_bytes() == b'{"a": 1}\n{"c": 2}\n{"d": 3}\n'  # no fragment left
    # a complete but unterminated last row is a torn tail too (a crash just before its "\n")
    p.write_bytes(b'{"a": 1}\n{"b": 2}')
    assert run.read("events.jsonl") == [{"a": 1}]
    run.log("events.jsonl", [{"e": 4}])
    assert p.read_bytes() == b'{"a": 1}\n{"e": 4}\n'
    # a file holding only a fragment is emptied before the append
    p.write_bytes(b'{"only": ')
    assert run.read("events.jsonl") == []
    run.log("events.jsonl", [{"f": 5}])
    assert p.read_bytes() == b'{"f": 5}\n'


def test_run_log_cut_at_every_byte_of_the_last_append_reads_a_prefix_and_recovers(tmp_path):
    """Every state a crash during an append can leave (the file cut anywhere inside the new
    bytes) reads back as the old rows plus the new rows completed so far, and the next append
    continues from exactly those."""
    run = RunDir(tmp_path / "r")
    p = run.path / "proposals.jsonl"
    old = [{"i": 0}, {"i": 1, "s": "ü"}]
    new = [{"i": 2, "s": "✓✓"}, {"i": 3}]
    full = b"".join(map(_line, old + new))
    base = len(b"".join(map(_line, old)))
    ends = [base + len(_line(new[0])), len(full)]
    for cut in range(base, len(full) + 1):
        p.write_bytes(full[:cut])
        done = sum(cut >= e for e in ends)
        assert run.read("proposals.jsonl") == old + new[:done], cut
        run.log("proposals.jsonl", [{"next": cut}])
        assert run.read("proposals.jsonl") == old + new[:done] + [{"next": cut}], cut
        assert p.read_bytes() == b"".join(map(_line, old + new[:done] + [{"next": cut}])), cut


def test_run_log_torn_tail_longer_than_a_read_block_is_found_backwards(tmp_path):
    """The last "\\n" is searched backwards from the end in 64 KiB blocks: a fragment spanning
    several blocks is still cut at the right byte."""
    p = tmp_path / "t.jsonl"
    head = b"".join(_line({"i": i, "pad": "x" * 100}) for i in range(1000))  # ~110 KB
    p.write_bytes(head + b'{"torn": "' + b"y" * 200_000)
    append_jsonl(p, [{"i": "new"}])
    assert p.read_bytes() == head + b'{"i": "new"}\n'


def test_run_log_malformed_complete_line_still_raises(tmp_path):
    run = RunDir(tmp_path / "r")
    p = run.path / "events.jsonl"
    p.write_bytes(b'{"a": 1}\n{"b": \n{"c": 3}\n')
    with pytest.raises(RunFileError, match=r"events.jsonl, line 2: not a JSON row"):
        run.read("events.jsonl")
    # a malformed last line that has its "\n" is not a torn tail either
    p.write_bytes(b'{"a": 1}\n{"b": \n')
    with pytest.raises(RunFileError, match=r"events.jsonl, line 2: not a JSON row"):
        run.read("events.jsonl")
    # nor is one followed by a torn tail
    p.write_bytes(b'{"a": 1}\nnot json\n{"c"')
    with pytest.raises(RunFileError, match=r"events.jsonl, line 2: not a JSON row"):
        run.read("events.jsonl")


def test_run_log_append_does_not_rewrite_earlier_bytes(tmp_path):
    run = RunDir(tmp_path / "r")
    p = run.path / "trajectories.jsonl"
    run.log("trajectories.jsonl", [{"episode": i, "actions": ["click"] * i} for i in range(50)])
    before, ino = p.read_bytes(), os.stat(p).st_ino
    run.log("trajectories.jsonl", [{"episode": 50}])
    assert os.stat(p).st_ino == ino  # the same file, not a renamed copy
    after = p.read_bytes()
    assert after[: len(before)] == before and after[len(before):] == b'{"episode": 50}\n'
    assert not [f for f in os.listdir(run.path) if f.endswith(".tmp")]


def test_run_log_serialisation_error_writes_nothing(tmp_path):
    run = RunDir(tmp_path / "r")
    p = run.path / "events.jsonl"
    p.write_bytes(b'{"a": 1}\n{"torn')
    with pytest.raises(TypeError):
        run.log("events.jsonl", [{"ok": 1}, {"bad": {1, 2}}])
    assert p.read_bytes() == b'{"a": 1}\n{"torn'  # not even the torn tail was touched
    with pytest.raises(TypeError):
        append_jsonl(tmp_path / "new" / "x.jsonl", [{"bad": object()}])
    assert not (tmp_path / "new").exists()


def test_run_checkpoint_counts_and_rollback_keep_only_complete_committed_rows(tmp_path):
    run = RunDir(tmp_path / "r")
    p = run.path / "events.jsonl"
    run.log("events.jsonl", [{"i": 0}, {"i": 1}])
    assert run.read_committed("events.jsonl") == []  # no checkpoint yet: nothing is a result
    with p.open("ab") as fh:
        fh.write(b'{"i": 2, "to')  # a crash in the middle of the next append
    run.commit_checkpoint("warmstart", {"versions": {}})
    assert run.latest()[1]["log_lengths"] == {"events.jsonl": 2, "proposals.jsonl": 0, "trajectories.jsonl": 0}
    # rows after the checkpoint, then another crash: the resume cuts back to the 2 rows, byte for byte
    run.log("events.jsonl", [{"i": 2}, {"i": 3}])
    run.log("proposals.jsonl", [{"p": 0}])
    # what a report reads before that resume: the checkpoint's rows only, not the unfinished phase's
    assert run.read_committed("events.jsonl") == [{"i": 0}, {"i": 1}] and run.read_committed("proposals.jsonl") == []
    with p.open("ab") as fh:
        fh.write(b'{"i": 4')
    run.rollback_logs()
    assert p.read_bytes() == b'{"i": 0}\n{"i": 1}\n'
    assert (run.path / "proposals.jsonl").read_bytes() == b""
    # nothing to drop but a torn tail: the resume removes the tail and keeps the rows
    with p.open("ab") as fh:
        fh.write(b'{"i"')
    run.rollback_logs()
    assert p.read_bytes() == b'{"i": 0}\n{"i": 1}\n'
    # a clean log with exactly the checkpointed rows is left alone (same file)
    ino = os.stat(p).st_ino
    run.rollback_logs()
    assert os.stat(p).st_ino == ino and p.read_bytes() == b'{"i": 0}\n{"i": 1}\n'
    run.log("events.jsonl", [{"i": 2}])
    assert run.read("events.jsonl") == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_run_log_count_is_the_number_of_rows_read_without_parsing(tmp_path):
    """RunDir.count (what a checkpoint records) equals len(RunDir.read): blank and whitespace-only
    lines skipped (ASCII and Unicode whitespace), rows with raw U+2028 kept whole, a torn tail not
    counted; a missing log has 0 rows."""
    run = RunDir(tmp_path / "r")
    assert run.count("events.jsonl") == 0
    p = run.path / "events.jsonl"
    p.write_bytes(b'{"a": 1}\n\n  \t\n\x1c\x1f\n' + '{"t": "x\u2028y"}\n\u2029\n{"b": 2}\n{"c":'.encode("utf-8"))
    assert run.count("events.jsonl") == len(run.read("events.jsonl")) == 3


def test_run_resume_refuses_a_log_shorter_than_its_checkpoint(tmp_path):
    """A log that lost rows the latest checkpoint counted cannot be resumed into a run equal to an
    uninterrupted one: rollback says so instead of going on."""
    run = RunDir(tmp_path / "r")
    run.log("events.jsonl", [{"i": 0}, {"i": 1}])
    run.commit_checkpoint("capability-iter-1", {})
    (run.path / "events.jsonl").write_bytes(b'{"i": 0}\n')
    with pytest.raises(RunFileError, match=r"events.jsonl: 1 rows, but checkpoint 'capability-iter-1' recorded 2"):
        run.rollback_logs()


def test_atomic_write_and_a_new_log_fsync_their_folder_so_the_rename_is_durable(tmp_path, monkeypatch):
    """POSIX makes a file's bytes and its directory entry durable separately: after the rename (and
    after the append that creates a log) the folder itself is fsync-ed; later appends fsync only the file."""
    import stat

    from forms_bench.atomic import atomic_write_text

    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(stat.S_ISDIR(os.fstat(fd).st_mode)), real(fd))[1])
    atomic_write_text(tmp_path / "a" / "x.json", "{}\n")
    assert synced == [False, True]  # the temporary file, then the folder after the rename
    synced.clear()
    append_jsonl(tmp_path / "log.jsonl", [{"i": 1}])
    assert synced == [False, True]  # the new log, then its folder
    synced.clear()
    append_jsonl(tmp_path / "log.jsonl", [{"i": 2}])
    assert synced == [False]  # an existing log: the file only


def test_atomic_write_follows_a_symlink_and_writes_a_device_in_place(tmp_path):
    """A link to a file keeps being a link (its target gets the new bytes, atomically); a path that
    is not a regular file (a named pipe here, /dev/stdout in use) is written in place, not replaced
    by a rename; a folder is an error that names it."""
    import threading

    from forms_bench.atomic import atomic_write_text

    target = tmp_path / "data" / "out.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    atomic_write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    atomic_write_text(fifo, '{"a": 1}')
    reader.join(5)
    assert got == ['{"a": 1}'] and fifo.is_fifo()
    with pytest.raises(IsADirectoryError, match="is a folder"):
        atomic_write_text(tmp_path / "data", "x")


def test_rollback_deletes_only_its_own_unfinished_checkpoints_and_latest_must_name_one(tmp_path):
    """A resume drops checkpoint folders that never completed, but only those named as advsim
    names checkpoints: a user's folder under checkpoints/ stays. LATEST naming a path outside
    ("../..") or a state whose 'completed' list leaves out LATEST's own name is refused, never
    followed (that list decides what the rollback deletes)."""
    run = RunDir(tmp_path / "r")
    run.commit_checkpoint("capability-iter-1", {"versions": {"executor": 1}})
    for name in ("capability-iter-2", "my-notes"):  # an unfinished checkpoint, a user's folder
        (run.checkpoint_dir(name)).mkdir()
        (run.checkpoint_dir(name) / "x").write_text("x")
    run.rollback_logs()
    assert sorted(p.name for p in (run.path / "checkpoints").iterdir()) == ["LATEST", "capability-iter-1", "my-notes"]
    (run.path / "checkpoints" / "LATEST").write_text("../..\n")
    with pytest.raises(RunFileError, match=r"'\.\./\.\.' is not a checkpoint name"):
        run.latest()
    (run.path / "checkpoints" / "LATEST").write_text("capability-iter-1\n")
    state = json.loads((run.checkpoint_dir("capability-iter-1") / "state.json").read_text())
    for bad, match in (({**state, "completed": ["warmstart"]}, "does not list the checkpoint itself"),
                       ({**state, "completed": ["capability-iter-1", "../x"]}, "holds '../x', not a checkpoint name"),
                       ({k: v for k, v in state.items() if k != "log_lengths"}, "not a checkpoint state"),
                       ({**state, "versions": {"executor": "1"}}, "not a checkpoint state"),
                       ({**state, "versions": {"critic": 1}}, "not a checkpoint state")):
        (run.checkpoint_dir("capability-iter-1") / "state.json").write_text(json.dumps(bad))
        with pytest.raises(RunFileError, match=match):
            run.rollback_logs()
    assert (run.path / "checkpoints" / "my-notes" / "x").exists()


def test_a_lost_latest_is_refused_when_an_earlier_commit_had_finished(tmp_path):
    """Killed between a commit's state.json files and its LATEST: the folders share one
    'completed' list and the run has no checkpoint yet (latest() is None). Two lists mean an
    earlier commit finished, so LATEST was lost: refused, with the name to write back."""
    from advsim.run import COMMITTED

    run = RunDir(tmp_path / "r")
    run.commit_checkpoint("robust-iter-1", {"versions": {}}, also=["adv-v-1"])
    (run.path / "checkpoints" / "LATEST").unlink()
    (run.path / "checkpoints" / "robust-iter-1" / COMMITTED).unlink()
    assert run.latest() is None  # one commit, interrupted before LATEST: nothing complete
    run.commit_checkpoint("robust-iter-1", {"versions": {}}, also=["adv-v-1"])
    (run.path / "checkpoints" / "LATEST").unlink()  # the only commit finished, then LATEST was lost
    with pytest.raises(RunFileError, match=r"LATEST is missing, but checkpoint 'robust-iter-1' finished its commit"
                                           r".*probably 'robust-iter-1'"):
        run.latest()
    (run.path / "checkpoints" / "robust-iter-1" / COMMITTED).unlink()
    run.commit_checkpoint("robust-iter-1", {"versions": {}}, also=["adv-v-1"])
    run.commit_checkpoint("robust-iter-2", {"versions": {}}, also=["adv-v-2"])
    (run.path / "checkpoints" / "LATEST").unlink()
    for d in (run.path / "checkpoints").iterdir():  # a run from before the marker: the lists still tell
        (d / COMMITTED).unlink(missing_ok=True)
    with pytest.raises(RunFileError, match=r"LATEST is missing.*different times.*probably 'robust-iter-2'|"
                                           r"LATEST is missing.*different times.*'adv-v-2'"):
        run.latest()


def test_run_log_rows_must_be_json_objects(tmp_path):
    run = RunDir(tmp_path / "r")
    (run.path / "events.jsonl").write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(RunFileError, match=r"events.jsonl, line 2: not a JSON row \(a JSON list, not an object\)"):
        run.read("events.jsonl")
    (run.path / "events.jsonl").write_text("[" * 100_000 + "\n")
    with pytest.raises(RunFileError, match="line 1: not a JSON row"):
        run.read("events.jsonl")


def test_run_dir_lock_refuses_a_second_process_and_is_reentrant_in_one(tmp_path):
    """Two processes never work in one run directory: while a child holds the lock, this process
    gets RunInUseError naming the child's pid; inside one process the lock nests (demo holds it
    around train and evaluate); it is free again once the holder ends."""
    import subprocess
    import sys

    from advsim.run import RunInUseError

    run = RunDir(tmp_path / "r")
    with run.lock(), run.lock():  # nested in one process
        assert (run.path / ".lock").read_text().strip() == str(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from advsim.run import RunDir\n"
        f"with RunDir({str(run.path)!r}).lock():\n    print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(RunInUseError, match=rf"in use by another process \(pid {child.pid}\)"):
            with run.lock():
                pass
    finally:
        child.kill()
        child.wait()
    with run.lock():  # the dead child's lock is gone
        pass


def test_episode_store_refuses_foreign_pickles_and_resamples_damaged_chunks(tmp_path, caplog):
    """A saved chunk is read back by a restricted unpickler: a planted pickle that would call
    os.system is refused before anything runs; a truncated or garbled chunk, or one holding
    something else than episodes, is logged and deleted, and get() answers None (sample again).
    The salt (the run's config digest) is part of every key."""
    import gzip
    import pickle

    from advsim.rollout import Episode, EpisodeSpec
    from advsim.run import EpisodeStore, run_digest
    from advsim.config import config_from_dict
    from forms_bench import load

    store = EpisodeStore(tmp_path / "episodes", 2, salt="abc")
    assert store.key("x") != EpisodeStore(tmp_path / "e2", 2, salt="abd").key("x")
    assert store.key("x") == EpisodeStore(tmp_path / "e3", 2, salt="abc").key("x")
    eps = [Episode(spec=EpisodeSpec(load("test")[0]), actions=["noop()"], success=True)]
    good = store.key("good")
    store.put(good, eps)
    assert store.get(good)[0].actions == ["noop()"] and store.get(good)[0].spec.task.id == eps[0].spec.task.id

    flag = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {flag}",))

    bodies = {"evil": gzip.compress(pickle.dumps([Evil()])), "torn": gzip.compress(pickle.dumps(eps))[:40],
              "garbage": b"not gzip at all", "dict": gzip.compress(pickle.dumps({"a": 1}))}
    for name, data in bodies.items():
        key = store.key(name)
        (store.root / f"{key}.pkl.gz").write_bytes(data)
        assert store.get(key) is None and not (store.root / f"{key}.pkl.gz").exists()
    assert not flag.exists()
    assert "global posix.system is not an episode type" in caplog.text or "is not an episode type" in caplog.text
    cfg = config_from_dict({"name": "a", "model": {"backbone": "tiny"}})
    other = config_from_dict({"name": "b", "model": {"backbone": "tiny"}, "stages": [1]})
    longer = config_from_dict({"name": "a", "model": {"backbone": "tiny"}, "engine": {"max_model_len": 4096}})
    bigger_cache = config_from_dict({"name": "a", "model": {"backbone": "tiny"}, "engine": {"kv_cache_gib": 7}})
    assert run_digest(cfg) == run_digest(other) == run_digest(bigger_cache) != run_digest(longer)


def test_episode_store_clears_only_its_chunks_and_refuses_empty_and_oversized_ones(tmp_path, caplog, monkeypatch):
    """clear() deletes the chunks put() wrote and the temp files of a killed write — not a
    user's file or folder beside them — and works through a symlinked folder; an empty chunk is
    never saved, and one read back as empty, or decompressing past MAX_CHUNK_BYTES, is damaged."""
    import gzip
    import pickle

    from advsim import run as run_mod
    from advsim.rollout import Episode, EpisodeSpec
    from advsim.run import EpisodeStore
    from forms_bench import load

    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "episodes").symlink_to(real)
    store = EpisodeStore(tmp_path / "episodes", 1)
    eps = [Episode(spec=EpisodeSpec(load("test")[0]), actions=["noop()"], success=True)]
    keys = [store.key(i) for i in range(3)]
    for k in keys:
        store.put(k, eps)
    (real / f".{keys[0]}.pkl.gz.x1y2.tmp").write_bytes(b"half")  # a write killed before its rename
    (real / "notes.txt").write_text("mine")
    (real / "sub").mkdir()
    assert len(store) == 3
    store.clear()
    assert sorted(e.name for e in real.iterdir()) == ["notes.txt", "sub"] and len(store) == 0
    assert (tmp_path / "episodes").is_symlink()
    with pytest.raises(ValueError, match="empty chunk"):
        store.put(keys[0], [])
    with pytest.raises(ValueError, match="not a key"):
        store.put("../escape", eps)
    (real / f"{keys[1]}.pkl.gz").write_bytes(gzip.compress(pickle.dumps([])))
    assert store.get(keys[1]) is None and "an empty list" in caplog.text
    monkeypatch.setattr(run_mod, "MAX_CHUNK_BYTES", 100)
    store.put(keys[2], eps)  # well over 100 bytes once decompressed
    assert store.get(keys[2]) is None and "decompresses to over 100 bytes" in caplog.text
    assert not (real / f"{keys[2]}.pkl.gz").exists()


def test_atomic_save_dir_replaces_a_folder_in_one_step_and_repairs_a_kill_between_renames(tmp_path, monkeypatch):
    """Replacing an adapter folder never leaves a moment without it on Linux (the two folders are
    swapped by renameat2); where that is impossible the old folder is moved aside first, and a
    kill between the two renames (simulated) is repaired by the next call before it writes."""
    from policies import backbone
    from policies.backbone import atomic_save_dir

    target = tmp_path / "executor@1"
    atomic_save_dir(target, lambda t: (t / "w").write_text("1"))
    atomic_save_dir(target, lambda t: (t / "w").write_text("2"))
    assert (target / "w").read_text() == "2" and sorted(p.name for p in tmp_path.iterdir()) == ["executor@1"]
    aside = tmp_path / ".old-executor@1-killed00"  # mkdtemp: 8 characters after the prefix
    aside.mkdir()
    os.replace(target, aside / "x")  # the fallback's first rename, then the process died
    monkeypatch.setattr(backbone, "_exchange", lambda a, b: False)  # the fallback path from here on
    seen = []
    atomic_save_dir(target, lambda t: seen.append((target / "w").read_text()) or (t / "w").write_text("3"))
    assert seen == ["2"]  # the old folder was back before the new one was written
    assert (target / "w").read_text() == "3" and sorted(p.name for p in tmp_path.iterdir()) == ["executor@1"]


def test_atomic_save_dir_fsyncs_gives_usual_permissions_and_cleans_killed_writes(tmp_path, monkeypatch):
    """Every written file and the parent are fsynced; the folder gets 0o777 less the umask (not
    mkdtemp's 0o700); a killed write's .tmp- sibling of this very target goes at the next call once
    over an hour old (a younger one may be another process's live write); another target's — even
    one whose name starts with this one's — is never touched, nor taken by the repair."""
    from forms_bench import atomic
    from policies.backbone import atomic_save_dir

    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}"))
                        or real_fsync(fd))
    old_mask = os.umask(0o022)
    try:
        for name in (".tmp-a[1]-dead0000", ".tmp-a[1]-young000", ".tmp-a[1]-more-abcdefgh", ".tmp-a1-other000",
                     ".old-a1-xxxxxxxx/x", ".old-a[1]-more-abcdefgh/x"):
            (tmp_path / name).mkdir(parents=True)
        os.utime(tmp_path / ".tmp-a[1]-dead0000", (0, 0))  # killed long ago
        os.utime(tmp_path / ".tmp-a[1]-more-abcdefgh", (0, 0))  # another target's, however old
        target = atomic_save_dir(tmp_path / "a[1]", lambda t: (t / "sub").mkdir() or (t / "sub" / "w").write_text("1"))
    finally:
        os.umask(old_mask)
    assert oct(target.stat().st_mode & 0o777) == oct(0o755) and (target / "sub" / "w").read_text() == "1"
    assert any(p.endswith("/sub/w") for p in synced) and str(tmp_path) in synced  # files, and the rename itself
    assert sorted(p.name for p in tmp_path.iterdir()) == [".old-a1-xxxxxxxx", ".old-a[1]-more-abcdefgh",
                                                         ".tmp-a1-other000", ".tmp-a[1]-more-abcdefgh",
                                                         ".tmp-a[1]-young000", "a[1]"]
    prev = os.umask(0o027)
    try:
        assert atomic.umask() == 0o027 and atomic.umask() == 0o027  # read, not changed
    finally:
        os.umask(prev)


def test_a_run_with_checkpoints_but_no_config_cannot_skip_the_resume_check(tmp_path):
    from advsim.config import config_from_dict

    cfg = config_from_dict({"name": "a", "model": {"backbone": "tiny"}})
    run = RunDir(tmp_path / "r")
    assert run.config_changes(cfg) == []  # a new run
    run.commit_checkpoint("warmstart", {"versions": {}})
    with pytest.raises(RunFileError, match="config.yaml is missing but the run has checkpoints"):
        run.config_changes(cfg)


def test_lock_never_follows_a_symlink_and_episode_chunks_cannot_patch_classes(tmp_path):
    """A received run directory whose .lock links to a user's file: the lock refuses it and the
    file is untouched. A chunk whose BUILD sets state on a class (Episode.parse_rate := 1.0 for
    the rest of the process) is refused before it runs, and the class is unchanged."""
    import gzip

    from advsim.rollout import Episode
    from advsim.run import EpisodeStore

    victim = tmp_path / "victim.txt"
    victim.write_text("IMPORTANT")
    run = RunDir(tmp_path / "r")
    (run.path / ".lock").symlink_to(victim)
    with pytest.raises(RunFileError, match=r"\.lock cannot be opened as the run's lock file"):
        with run.lock():
            pass
    assert victim.read_text() == "IMPORTANT"
    payload = (b"\x80\x02cadvsim.rollout\nEpisode\nN}(X\x0a\x00\x00\x00parse_rateG?\xf0\x00\x00\x00\x00\x00\x00"
               b"X\x06\x00\x00\x00to_rowcadvsim.rollout\nTurn\nu\x86b0X\x04\x00\x00\x00oops.")
    store = EpisodeStore(tmp_path / "episodes", 2)
    store.root.mkdir()
    (store.root / "k.pkl.gz").write_bytes(gzip.compress(payload))
    assert store.get("k") is None
    assert isinstance(Episode.__dict__["parse_rate"], property) and callable(Episode.__dict__["to_row"])


def test_json_to_dev_stdout_appends_to_a_redirected_file(tmp_path):
    """``--json /dev/stdout`` with stdout redirected to a file (``>> log``) appends there, keeping
    what was in it, instead of renaming a new file over it."""
    import subprocess
    import sys

    log = tmp_path / "log.txt"
    log.write_text("PREVIOUS\n")
    code = ("from pathlib import Path\nfrom advsim.cli_output import check_output_path, write_json\n"
            "write_json(check_output_path(Path('/dev/stdout')), {'x': 1})")
    with open(log, "a") as out:
        subprocess.run([sys.executable, "-c", code], stdout=out, check=True)
    assert log.read_text() == 'PREVIOUS\n{\n  "x": 1\n}wrote /dev/stdout\n'
