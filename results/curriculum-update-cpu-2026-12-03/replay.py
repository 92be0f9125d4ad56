"""One stage-1 curriculum update replayed on the CPU: does it collapse the proposal distribution
onto level 0, and how much do the repetition penalty's n(x) and the learning rate matter?

The batch is the H200 frontier probe's first stage-1 iteration (results/h200-frontier-2026-12-03):
its 256 curriculum outputs (re-tokenised, each + EOS) on the same 256 prompts (hint (i + 1) mod 5,
the four probe rows as history), with that run's R_C — as logged (n(x) by lexical clusters) or
recomputed with n(x) by spec family — group-normalised over the 256 as in stage 1. The curriculum
adapter is warm-started here on the CPU with configs/h200.yaml's warm-start settings (the H200's
adapter did not come back), so this measures the update's effect on a comparable, not the same,
adapter. Before and after the update, 256 proposals are sampled on the same prompts and seeds
(T = 0.7, top-p 0.95) and counted per level.
    python results/curriculum-update-cpu-2026-12-03/replay.py {lexical|family} LR OUT.json
"""
import collections
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

from advsim.coevolution import _parse_all, _propose
from advsim.config import load_config
from advsim.learner import Learner
from advsim.rewards import curriculum_reward, family_sizes, group_normalize
from advsim.suites.web import WebFormsSuite
from advsim.train import role_io
from advsim.warmstart import curriculum_examples, encode_target
from policies.grpo import Sample
from policies.roles import curriculum_example

mode, lr, out_path = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3])
HERE = Path(__file__).resolve().parent
rows = [json.loads(line) for line in gzip.open(HERE.parent / "h200-frontier-2026-12-03" / "proposals.jsonl.gz", "rt")]
probes = [r for r in rows if r["role"] == "probe"]
batch = [r for r in rows if r["role"] == "curriculum" and r["iteration"] == 1]
assert len(probes) == 4 and len(batch) == 256

demo = load_config("configs/demo.yaml")
# the demo's CPU engine; configs/h200.yaml's optimizer and warm-start settings for the curriculum
demo.optim.learning_rate = lr
demo.optim.micro_batch = 16
demo.optim.min_step_samples = 16
demo.optim.steps_per_update = 4
demo.optim.beta_kl = 0.02
demo.rollout.proposal_max_new_tokens = 96
demo.engine.max_model_len = 2048
cfg = demo
# configs/h200.yaml's warmstart section (loading that file here fails: it asks for CUDA)
W_EXAMPLES, W_EPOCHS, W_LR, W_MICRO, W_SEED = 200, 3, 0.003, 8, 11

t0 = time.perf_counter()
tmp = Path(tempfile.mkdtemp(prefix="cur-replay-"))
learner = Learner(cfg, tmp / "adapters")
io = role_io(learner.tokenizer)
suite = WebFormsSuite()
sft = learner.sft("curriculum", curriculum_examples(io, learner.tokenizer, W_EXAMPLES, W_SEED, suite),
                  W_EPOCHS, W_LR, seed=W_SEED, micro_batch=W_MICRO)
learner.publish("curriculum")
lines = [curriculum_example(suite.proposal_json(suite.proposal_from_dict(r["proposal"])), r["p_hat"]) for r in probes]
hints = suite.curriculum_hints()
prompts = [suite.curriculum_prompt(io, hints[(i + 1) % len(hints)], lines) for i in range(256)]


def levels(tag):
    gens = _propose(learner, prompts, "curriculum", 1000)
    props, _ = _parse_all(gens, lambda text: suite.parse_proposal(io, text))
    c = collections.Counter(p.level if p is not None else "unparsed" for p in props)
    return {str(k): v for k, v in sorted(c.items(), key=str)}


before = levels("before")
if mode == "lexical":
    r_c = [r["reward"] for r in batch]
else:
    props = [suite.proposal_from_dict(r["proposal"]) if r["valid"] else None for r in batch]
    r_c = [curriculum_reward(r["p_hat"], r["valid"], n, 256, 0.5) for r, n in zip(batch, family_sizes(props))]
adv = group_normalize(r_c)
completions = [encode_target(learner.tokenizer, r["text"]) for r in batch]
scores = learner.engine.score([list(p) + c for p, c in zip(prompts, completions)], [learner.ref("curriculum")] * 256)
samples = [Sample(p, c, s[len(p) - 1:], a, learner.ref("curriculum")) for p, c, s, a in zip(prompts, completions, scores, adv)]
stats = learner.update("curriculum", samples)
after = levels("after")
res = {"mode": mode, "learning_rate": lr, "sft_loss_epochs": sft["loss_epochs"], "levels_before": before,
       "levels_after": after, "update": {k: stats[k] for k in ("samples", "optimizer_steps", "kl", "grad_norms", "diff")},
       "r_c_mean_per_level": {str(lv): round(sum(x for r, x in zip(batch, r_c) if r["level"] == lv)
                                             / max(1, sum(r["level"] == lv for r in batch)), 4) for lv in range(5)},
       "adv_max": max(adv), "seconds": round(time.perf_counter() - t0, 1)}
out_path.write_text(json.dumps(res, indent=1))
print(json.dumps(res))
