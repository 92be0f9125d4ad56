"""R_C per level on this run's stage-1 proposals, recomputed on the CPU from proposals.jsonl.gz
with n(x) by lexical clusters of the task text (what the run used) and by spec family
(advsim.rewards.family_sizes, the default since). Exact: p̂ and the proposals are logged; no model.
    python results/h200-frontier-2026-12-03/repetition_offline.py
"""
import collections
import gzip
import json
import statistics
from pathlib import Path

from advsim.rewards import cluster_sizes, curriculum_reward, family_sizes
from advsim.suites.web import WebFormsSuite

suite = WebFormsSuite()
rows = [json.loads(line) for line in gzip.open(Path(__file__).with_name("proposals.jsonl.gz"), "rt")]
for it in (1, 2):
    cur = [r for r in rows if r["iteration"] == it and r["role"] == "curriculum"]
    props = [suite.proposal_from_dict(r["proposal"]) if r["valid"] else None for r in cur]
    texts = [suite.task_text(suite.instantiate(p)) if p else r["text"] for p, r in zip(props, cur)]
    lexical = cluster_sizes(texts, 0.5)
    assert lexical == [r["cluster"] for r in cur]  # what the run logged
    for name, n in (("lexical (run)", lexical), ("family", family_sizes(props))):
        rc = [curriculum_reward(r["p_hat"], r["valid"], c, len(cur), 0.5) for r, c in zip(cur, n)]
        by, byn = collections.defaultdict(list), collections.defaultdict(list)
        for r, x, c in zip(cur, rc, n):
            if r["valid"]:
                by[r["level"]].append(x)
                byn[r["level"]].append(c)
        print(f"iteration {it} {name:14s}", "  ".join(
            f"L{k} (n={len(v)}): mean n(x) {statistics.mean(byn[k]):5.1f}, mean R_C {statistics.mean(v):.3f}"
            for k, v in sorted(by.items())))
