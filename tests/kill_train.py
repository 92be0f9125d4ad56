"""Subprocess helper of ``test_train.py``: run the tiny pipeline, SIGKILL itself at one point.

``python -m tests.kill_train RUN_DIR [--resume] [--kill POINT]`` where POINT is

- ``sft:N``       — after the N-th warm-start role finished training (its adapter saved),
- ``update:N``    — right after the N-th GRPO update published its adapter version,
- ``commit:NAME`` — inside the commit of checkpoint NAME, after its optimizer state and
  ``state.json`` were written but before ``LATEST`` points at it,
- ``chunk:N``     — right after the N-th chunk of rollouts was saved (in the middle of a phase),
- ``append:N``    — in the middle of the N-th log append: half of its bytes written (a torn last
  line, as a crash mid-``write`` leaves), then killed.

Every run here saves rollouts in chunks of 2 episodes (``rollout.chunk_episodes``).

The kill is a real ``SIGKILL`` of this process (no cleanup, no atexit), at a point chosen by
count rather than by timer so the test is deterministic.
"""

from __future__ import annotations

import argparse
import os
import signal

from advsim import run as run_mod
from advsim.learner import Learner


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def arm(point: str) -> None:
    kind, _, arg = point.partition(":")
    if kind in ("sft", "update"):
        original = getattr(Learner, kind)
        count = {"n": 0}

        def wrapped(self, *a, **kw):
            out = original(self, *a, **kw)
            count["n"] += 1
            if count["n"] == int(arg):
                _die()
            return out

        setattr(Learner, kind, wrapped)
    elif kind == "chunk":
        original_put = run_mod.EpisodeStore.put
        count = {"n": 0}

        def put(self, key, episodes):
            original_put(self, key, episodes)
            count["n"] += 1
            if count["n"] == int(arg):
                _die()

        run_mod.EpisodeStore.put = put
    elif kind == "commit":
        original_write = run_mod.atomic_write_text

        def write_text(path, text, *a, **kw):
            if path.name == "LATEST" and text.strip() == arg:
                _die()
            return original_write(path, text, *a, **kw)

        run_mod.atomic_write_text = write_text
    elif kind == "append":
        import json

        original_append = run_mod.append_jsonl
        count = {"n": 0}

        def append(path, rows):
            rows = list(rows)
            count["n"] += 1
            if count["n"] == int(arg):
                data = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows).encode()
                half = data[: len(data) // 2].rstrip(b"\n")
                assert half, "pick an append with rows"
                with open(path, "ab") as fh:
                    fh.write(half)
                    fh.flush()
                    os.fsync(fh.fileno())
                _die()
            return original_append(path, rows)

        run_mod.append_jsonl = append
    else:
        raise SystemExit(f"unknown kill point {point!r}")


def main() -> None:
    from tests.test_train import run_tiny

    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--kill")
    args = ap.parse_args()
    if args.kill:
        arm(args.kill)
    run_tiny(args.run_dir, resume=args.resume, warmstart=True, chunk_episodes=2)


if __name__ == "__main__":
    main()
