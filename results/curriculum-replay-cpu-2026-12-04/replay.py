"""Does the curriculum's learning rate alone collapse it onto level 0? One stage-1 curriculum update
of the H200 run (results/h200-paper-2026-12-04), replayed on the CPU from that run's own adapter.

The H200 run (configs/h200.yaml) sampled 256 proposals from its warm-started curriculum
(curriculum@1), scored them (R_C, family n(x)), updated the curriculum once (4 AdamW steps at 7e-4,
β_KL 0.02, one group of 256) and then proposed 255 of 255 valid tasks at level 0. Here the same
update — the same prompts (hint (i + 1) mod 5, the four probe rows as history), the same 256
outputs (re-tokenised, + EOS), the same logged R_C, group-normalised — is applied to the H200's
curriculum@1 at several learning rates, and each result proposes on iteration 2's prompts (hint
(i + 2) mod 5, the last 6 valid iteration-1 proposals as history, the run's sampling seeds, T = 0.7,
top-p 0.95). Two reference rows: curriculum@1 on iteration 1's prompts (the H200 drew 109 / 36 /
68 / 40 / 2 valid proposals at levels 0-4 there) and the H200's own updated curriculum@2 on
iteration 2's prompts (the H200 drew 255 / 0 / 0 / 0 / 0); and (base2) curriculum@1 without an
update on iteration 2's prompts.

CPU, float32, the torch engine (transformers on the learner's peft model; the H200 sampled in
bf16 with vLLM), so counts agree in distribution, not token for token; the learner's loss and
optimizer are the run's (advsim.learner.Learner.update; the rollout log-probs are not needed: the
update's values come from the engine, and `consistency: measure` only logs the diff).

The H200 run's tokenizer ended sequences with ``<|im_start|>`` (id 1; transformers 5.17's GGUF
conversion, see README.md): with EOS=1 (the default) the replay uses that end-of-sequence token
too — the SFT targets, the run's completions and the engine's stop — so the CPU computes what the
H200 computed; EOS=2 uses this machine's ``<|im_end|>``, under which that run's adapters never stop.

    EOS=1 python results/curriculum-replay-cpu-2026-12-04/replay.py RUN_DIR N VARIANTS OUT.json
    # RUN_DIR: the unpacked H200 run (config.yaml, adapters/, proposals.jsonl); N: proposals
    # sampled per row (the first N prompts); VARIANTS: e.g. refs,base2,0.0007,0.0001
"""
import collections
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

from advsim.coevolution import _parse_all, _propose, _seed
from advsim.config import config_from_dict
from advsim.learner import Learner
from advsim.rewards import group_normalize
from advsim.suites.web import WebFormsSuite
from advsim.train import role_io
from advsim.warmstart import encode_target
from policies.grpo import Sample
from policies.roles import curriculum_example

run, n, variants, out_path = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(","), Path(sys.argv[4])
raw = yaml.safe_load((run / "config.yaml").read_text())
raw["engine"] = {"kind": "torch", "device": "cpu", "dtype": "float32", "consistency": "measure",
                 "max_model_len": 2048, "threads": 2, "max_num_seqs": 32}


def config(lr: float | None = None):
    d = json.loads(json.dumps(raw))
    if lr is not None:
        d["optim"]["learning_rate"] = lr
        d["optim"].pop("role_learning_rates", None)
    return config_from_dict(d)


rows = [json.loads(line) for line in (run / "proposals.jsonl").open()]
probes = [r for r in rows if r["role"] == "probe"]
batch = [r for r in rows if r["role"] == "curriculum" and r["iteration"] == 1]
assert len(probes) == 4 and len(batch) == 256
suite = WebFormsSuite()
cfg0 = config()
hist = cfg0.stage1.history
valid1 = [r for r in probes + batch if r.get("proposal")]


def lines_of(rs):
    return [curriculum_example(suite.proposal_json(suite.proposal_from_dict(r["proposal"])), r.get("p_hat"))
            for r in rs[-hist:]]


def learner_at(version_dirs: list[str], lr: float | None = None) -> Learner:
    """A learner whose adapter folder holds the H200 run's ``version_dirs`` (curriculum@1, …)."""
    root = Path(tempfile.mkdtemp(prefix="cur-replay-")) / "adapters"
    lrn = Learner(config(lr), root)
    eos = int(os.environ.get("EOS", "1"))
    lrn.tokenizer.eos_token = lrn.tokenizer.convert_ids_to_tokens(eos)  # the engine stops on it, encode_target appends it
    for v in version_dirs:
        shutil.copytree(run / "adapters" / v, root / v, dirs_exist_ok=True)
    return lrn


def levels(lrn: Learner, prompts, t: int) -> dict:
    t0 = time.perf_counter()
    gens = _propose(lrn, prompts[:n], "curriculum", _seed(lrn.cfg, 1, t, 1))
    props, _ = _parse_all(gens, lambda text: suite.parse_proposal(io, text))
    c = collections.Counter(p.level if p is not None else "unparsed" for p in props)
    return {"n": len(gens), **{str(k): v for k, v in sorted(c.items(), key=str)},
            "seconds": round(time.perf_counter() - t0, 1)}


res: dict = {"n": n, "eos": int(os.environ.get("EOS", "1")), "rows": {}}
lrn = learner_at(["curriculum@1", "curriculum@2"])
io = role_io(lrn.tokenizer)
hints = suite.curriculum_hints()
prompts1 = [suite.curriculum_prompt(io, hints[(i + 1) % len(hints)], lines_of(probes)) for i in range(256)]
prompts2 = [suite.curriculum_prompt(io, hints[(i + 2) % len(hints)], lines_of(valid1)) for i in range(256)]
h200_2 = collections.Counter(r["level"] for r in rows if r["role"] == "curriculum" and r["iteration"] == 2 and r["valid"])
res["h200"] = {"iteration 1 (curriculum@1)": dict(collections.Counter(r["level"] for r in batch if r["valid"])),
               "iteration 2 (curriculum@2)": dict(h200_2)}


def save():
    out_path.write_text(json.dumps(res, indent=1))
    print(json.dumps(res), flush=True)


if "refs" in variants:
    lrn.restore({"curriculum": 1}, None)
    res["rows"]["H200 curriculum@1, iteration-1 prompts"] = levels(lrn, prompts1, 1)
    save()
    lrn.restore({"curriculum": 2}, None)
    res["rows"]["H200 curriculum@2, iteration-2 prompts"] = levels(lrn, prompts2, 2)
    save()
if "base2" in variants:  # no update: what the warm-started curriculum proposes on iteration 2's prompts
    lrn.restore({"curriculum": 1}, None)
    res["rows"]["H200 curriculum@1 (no update), iteration-2 prompts"] = levels(lrn, prompts2, 2)
    save()
lrn.close()
r_c = [r["reward"] for r in batch]
adv = group_normalize(r_c)
for v in variants:
    if v in ("refs", "base2"):
        continue
    lr = float(v)
    t0 = time.perf_counter()
    lrn = learner_at(["curriculum@1"], lr)
    lrn.restore({"curriculum": 1}, None)
    samples = [Sample(prompts1[i], encode_target(lrn.tokenizer, r["text"]), [0.0] * len(encode_target(lrn.tokenizer, r["text"])),
                      a, lrn.ref("curriculum")) for i, (r, a) in enumerate(zip(batch, adv))]
    stats = lrn.update("curriculum", samples)
    row = {"update": {k: stats.get(k) for k in ("samples", "optimizer_steps", "kl", "grad_norms", "loss", "pg")},
           "update_seconds": round(time.perf_counter() - t0, 1)}
    row.update(levels(lrn, prompts2, 2))
    res["rows"][f"curriculum@1 + replayed update at lr {lr:g}, iteration-2 prompts"] = row
    lrn.close()
    save()
