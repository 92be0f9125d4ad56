#!/usr/bin/env bash
# The H200 measurements of issue 15, in parts that fit one 10-minute device call each.
#   bash scripts/gpu/measure.sh bench LABELS   # advsim.bench.cuda for some configurations -> $OUT/bench-<first label>.json
#   bash scripts/gpu/measure.sh tests          # the gpu-marked tests
#   bash scripts/gpu/measure.sh train CONFIG   # one resumable part of a training run -> $OUT/events.jsonl …
# Needs `source scripts/gpu/setup.sh install` first (same shell).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
case "$1" in
  bench)
    [ -n "$2" ] || { echo "usage: measure.sh bench contract,default,… [timeout_s] [per_config_s]"; exit 2; }
    tag=${2%%,*}; tag=${tag//+/-}
    timeout "${3:-540}" python3 -m advsim.bench.cuda "$OUT/bench-$tag.json" "$2" "${4:-300}" 2>&1 | tee "$OUT/bench-$tag.log" | grep -v "^INFO\|^(EngineCore\|^DEBUG"
    [ -f "$OUT/bench-$tag.json" ] || cp "$OUT/bench-$tag.partial.json" "$OUT/bench-$tag.json" 2>/dev/null; rm -f "$OUT/bench-$tag.partial.json" ;;
  tests)
    timeout "${2:-500}" python3 -m pytest -q -s -m gpu -p no:cacheprovider "${@:3}" 2>&1 | tee "$OUT/tests.log" | tail -60 ;;
  train)
    RUN=/root/runs/$(basename "$2" .yaml)
    timeout "${3:-500}" python3 -m advsim demo --config "$2" --run-dir "$RUN" --resume --json "$RUN.json" 2>&1 \
      | tee "$OUT/train.log" | grep -v "^INFO\|^(EngineCore" | tail -40
    for f in events.jsonl eval.json report.md; do [ -f "$RUN/$f" ] && cp "$RUN/$f" "$OUT/"; done
    [ -f "$RUN.json" ] && cp "$RUN.json" "$OUT/summary.json"; ls "$RUN" ;;
esac
