"""Fingerprint of the tiny pipeline, for refactors that must not change behaviour.

Runs the tiny-backbone pipeline of ``tests/test_train.py`` (warm start, two stage-1 and one
stage-2 iteration) and its evaluation, and prints (or writes) the sha256 of every adapter
version, of ``events.jsonl``, ``proposals.jsonl`` and ``trajectories.jsonl`` (wall-clock keys
removed) and of the evaluation results. Run it before and after a refactor and compare:

    python scripts/tiny_fingerprint.py /tmp/before.json   # on the old commit
    python scripts/tiny_fingerprint.py /tmp/after.json    # on the new one
    cmp /tmp/before.json /tmp/after.json

Two runs of one commit give identical files (checked 2026-12-02); ~1 min on 2 CPU cores.
"""

import hashlib
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advsim.config import config_from_dict  # noqa: E402
from tests.test_train import TINY, adapter_digests, run_tiny, tiny_io  # noqa: E402


def _strip(o):
    """Drop wall-clock fields (``seconds``, ``time``, ``minutes``) at any depth."""
    if isinstance(o, dict):
        return {k: _strip(v) for k, v in o.items() if "second" not in k and k not in ("time", "minutes")}
    if isinstance(o, list):
        return [_strip(x) for x in o]
    return o


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(_strip(obj), sort_keys=True, default=str).encode()).hexdigest()


def fingerprint() -> dict:
    """The fingerprint as a dict (see the module docstring)."""
    from advsim.evaluate import evaluate
    from advsim.learner import Learner
    from policies.backbone import tiny_backbone

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        run = run_tiny(Path(tmp) / "r", warmstart=True)
        out["adapters"] = adapter_digests(Path(tmp) / "r")
        for name in ("events.jsonl", "proposals.jsonl", "trajectories.jsonl"):
            out[name] = _sha(run.read(name))
        cfg = config_from_dict(TINY)
        model, tok = tiny_backbone(seed=cfg.seed)
        learner = Learner(cfg, Path(tmp) / "r" / "adapters", model=model, tokenizer=tok)
        out["eval"] = _sha(evaluate(run.path, tasks="sample:1", seeds=2, browser=False, learner=learner,
                                    io=tiny_io(tok), corpus_attacks=True))
    return out


if __name__ == "__main__":
    fp = json.dumps(fingerprint(), indent=1, sort_keys=True)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(fp + "\n")
    print(fp)
