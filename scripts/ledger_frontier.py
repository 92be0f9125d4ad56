"""Does the embedded backbone have a frontier in the evidence-ledger world after a warm start?

A measurement toward issue 14 (the ledger world trains), not a training pipeline: it warm-starts
the executor adapter on ground-truth demonstrations of generated cases
(:func:`advsim.warmstart.suite_demonstrations`, levels of ``--train-levels``), then runs the
warm-started executor on a held-out pool of generated cases per level through the same batched
rollouts the web world uses (:func:`advsim.rollout.run_episodes` with
:class:`advsim.suites.EvidenceLedgerSuite`) and prints ECS per level with n and a 95 % Wilson
interval, the executor's parse rate, and the most common failure reasons.

    HF_HUB_OFFLINE=1 python scripts/ledger_frontier.py --run-dir runs/ledger-probe --json runs/ledger-probe.json

Engine, backbone and LoRA placement are those of ``configs/demo.yaml`` (vLLM on CPU, diff = 0).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", type=Path, default=Path("runs/ledger-probe"))
    ap.add_argument("--config", type=Path, default=Path(__file__).resolve().parents[1] / "configs" / "demo.yaml")
    ap.add_argument("--train-cases", type=int, default=36, help="generated cases per training level")
    ap.add_argument("--train-levels", default="0", help="comma-separated levels of the demonstrations")
    ap.add_argument("--eval-cases", type=int, default=24, help="held-out cases per evaluated level")
    ap.add_argument("--eval-levels", default="0,1,3")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=12)
    ap.add_argument("--tool-listing", choices=("full", "compact"), default="compact")
    ap.add_argument("--domains", default=None, help="comma-separated domains (default: all six)")
    ap.add_argument("--lr", type=float, default=None, help="warm-start learning rate (default: the config's)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    from advsim.config import load_config
    from advsim.evaluate import rate
    from advsim.rollout import EpisodeSpec, run_episodes
    from advsim.run import RunDir
    from advsim.suites import EvidenceLedgerSuite
    from advsim.train import build_learner, role_io
    from advsim.warmstart import suite_demonstrations
    from forms_bench.atomic import atomic_write_json
    from worlds.ledger.difficulty import sample_cases

    cfg = load_config(args.config)
    t0 = time.perf_counter()
    learner = build_learner(cfg, RunDir(args.run_dir))
    io = role_io(learner.tokenizer)
    suite = EvidenceLedgerSuite(tool_listing=args.tool_listing)
    doms = args.domains.split(",") if args.domains else None
    train_levels = [int(x) for x in args.train_levels.split(",")]
    eval_levels = [int(x) for x in args.eval_levels.split(",")]
    train = [c for lv in train_levels for c in sample_cases(lv, args.train_cases, 10_000, doms)]
    examples = suite_demonstrations(suite, io, learner.tokenizer, train)
    w = cfg.warmstart
    stats = learner.sft("executor", examples, args.epochs, args.lr or w.learning_rate, seed=w.seed,
                        micro_batch=w.micro_batch)
    t1 = time.perf_counter()
    print(f"warm start: {len(examples)} demonstrations from {len(train)} cases, loss per epoch "
          f"{' '.join(f'{x:.3f}' for x in stats['loss_epochs'])} ({t1 - t0:.0f} s with engine start)", flush=True)
    pool = {lv: sample_cases(lv, args.eval_cases, 90_000, doms) for lv in eval_levels}
    r = cfg.rollout
    out = {"train_levels": train_levels, "train_cases": len(train), "demonstrations": len(examples),
           "loss_epochs": stats["loss_epochs"], "levels": []}
    for lv, cases in pool.items():
        eps = run_episodes(learner.engine, suite.executor_prompt(io), [EpisodeSpec(c) for c in cases],
                           learner.ref("executor"), seed=cfg.seed + lv, suite=suite, max_steps=args.max_steps,
                           max_new_tokens=64, temperature=r.temperature, top_p=r.top_p)
        ecs = rate([e.success for e in eps])
        turns = [t for e in eps for t in e.turns]
        parse = sum(t.action is not None for t in turns) / max(1, len(turns))
        reasons = collections.Counter(x.split(" ")[0] for e in eps for x in e.reasons).most_common(4)
        per_domain = collections.Counter(c.domain for c, e in zip(cases, eps) if e.success)
        row = {"level": lv, "ecs": ecs, "parse_rate": parse, "turns_mean": len(turns) / len(eps),
               "top_reasons": reasons, "success_by_domain": dict(per_domain),
               "examples": [{"case": c.id, "success": e.success, "reasons": e.reasons[:3],
                             "turns": [t.text[:160] for t in e.turns[:8]]} for c, e in list(zip(cases, eps))[:6]]}
        out["levels"].append(row)
        print(f"level {lv}: ECS {ecs['rate']:.1%} (n={ecs['n']}, {ecs['ci_low']:.1%}-{ecs['ci_high']:.1%}), "
              f"parse {parse:.0%}, {row['turns_mean']:.1f} turns, reasons {reasons}", flush=True)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"total {out['seconds']:.0f} s")
    if args.json:
        atomic_write_json(args.json, out)
    learner.close()
    return out


if __name__ == "__main__":
    main()
