"""p̂ of a run's executor checkpoint at difficulty knob settings between the named levels."""
import json, sys, math
from advsim.config import load_config
from advsim.run import RunDir
from advsim.train import build_learner, role_io
from advsim.suites import suite_from_config
from advsim.rollout import EpisodeSpec, run_episodes
from forms_bench import STRATA
from forms_bench.difficulty import Difficulty
from forms_bench.generate import make_task
from forms_bench.proposal import DOMAIN_NAMES

run = RunDir(sys.argv[1]); ckpt = sys.argv[2]; n = int(sys.argv[3])
cfg = load_config(run.path / "config.yaml")
learner = build_learner(cfg, run); io = role_io(learner.tokenizer); suite = suite_from_config(cfg.world)
v = json.loads((run.checkpoint_dir(ckpt) / "state.json").read_text())["versions"]
learner.restore(v, None)
KNOBS = [dict(answer="goal", targets=1, rows=0, extras=False), dict(answer="goal", targets=2, rows=0, extras=False),
         dict(answer="goal", targets=1, rows=0, extras=True), dict(answer="goal", targets=2, rows=0, extras=True),
         dict(answer="lookup", targets=1, rows=1, extras=False), dict(answer="lookup", targets=1, rows=3, extras=True)]
specs, tags = [], []
for k, kn in enumerate(KNOBS):
    d = Difficulty(**kn)
    for i in range(n):
        t = make_task(STRATA[i % len(STRATA)], DOMAIN_NAMES[(i // len(STRATA)) % len(DOMAIN_NAMES)], 1_500_000 + 1000 * k + i, knobs=d)
        specs.append(EpisodeSpec(task=t)); tags.append(d.slug())
r = cfg.rollout
eps = run_episodes(learner.engine, suite.executor_prompt(io), specs, f"executor@{v['executor']}", seed=7, suite=suite,
                   max_steps=r.max_steps, max_new_tokens=r.max_new_tokens, temperature=r.temperature, top_p=r.top_p)
from collections import defaultdict
agg = defaultdict(list)
for tag, e in zip(tags, eps):
    agg[tag].append(bool(e.success))
for tag, xs in agg.items():
    k, m = sum(xs), len(xs); p = k / m; z = 1.96
    c = (p + z*z/(2*m)) / (1 + z*z/m); h = z*math.sqrt(p*(1-p)/m + z*z/(4*m*m)) / (1 + z*z/m)
    print(f"{ckpt} {tag:20s} {k:3d}/{m:3d} = {100*p:5.1f} % ({100*(c-h):.1f}-{100*(c+h):.1f})")
