#!/usr/bin/env bash
# The H200 measurements of issue 15, in parts that fit one 10-minute device call each.
#   bash scripts/gpu/measure.sh bench LABELS [TIMEOUT_S] [PER_CONFIG_S] [BACKBONE] [PARTS] [EXECUTOR_DIR]
#        # advsim.bench.cuda for some configurations -> $OUT/bench-<first label>.json; PARTS e.g.
#        # throughput,profile (default consistency,throughput); EXECUTOR_DIR: a run's trained
#        # adapters/executor@N (e.g. results/demo-executor-2026-12-04/executor@2) instead of the random one;
#        # REPEATS=N timed runs per row (default 2; the rate is their median). A configuration that fails or
#        # is still running when the call ends leaves its output in $OUT/bench-<first label>.partial.logs/<label>.log. PER_CONFIG_S: give a
#        # fresh machine's configurations >= 240 s each (cold compile caches: on 2026-12-05 a fresh H100
#        # timed out contract-light AND default at 140 s each before measuring anything)
#   bash scripts/gpu/measure.sh tests [TIMEOUT_S] [PYTEST_ARGS…]  # the gpu-marked tests (their two files only:
#        # other test modules import packages the GPU image lacks, e.g. Playwright)
#   bash scripts/gpu/measure.sh train CONFIG   # one resumable part of a training run -> $OUT/events.jsonl …
#   bash scripts/gpu/measure.sh train-bg CONFIG [WAIT_S]  # the whole run in its own process session, then watch
#   bash scripts/gpu/measure.sh watch CONFIG [WAIT_S]     # wait for that run (at most WAIT_S), bring its files back;
#        # UNTIL=robust-iter-1 returns as soon as that checkpoint is the latest (so a call can be sized in advance)
#   bash scripts/gpu/measure.sh pair CONFIG_A CONFIG_B [WAIT_S]  # two runs side by side on one GPU (each config sets
#        engine.gpu_memory_utilization <= 0.5), started 20 s apart if not running; waits for both (at most WAIT_S)
#        and brings each one's watch files back as $OUT/<name>.tar.gz (the tool brings back 8 files a call)
# train-bg starts `advsim demo --resume` with setsid, so it outlives the call while the machine stays
# held; one engine start for the whole run. The machine is given back after 30 s idle between calls
# (and the run with it): put the train-bg call and its watch calls in ONE batch of tool calls, so they
# follow each other without a pause (twice on 2026-12-04 a run was lost after its warm start, and a
# third time there after two stage-1 iterations, when a third watch was sent 60 s after the second
# returned: send every call of a session, staging included, in that one batch, sized in advance). A run directory brought back
# earlier (FULL=1 watch: .gpu/run/run.tar.gz.part-*, carried) is unpacked first, so a run goes on on a fresh machine.
# Each watch returns console.log, summary.json and either (default) the metrics files,
# $OUT/run-files.tar.gz (the run directory without adapters, checkpoints, trajectories, saved chunks
# and engine log: plots, config, proposals, demo.json) and trajectories.jsonl.gz, or (FULL=1) the run
# directory less saved chunks and all but the latest checkpoint's optimizer state, as run.tar.gz.part-*
# (15 MB parts; the tool brings back 8 files, 16 MiB each, 64 MiB a call): what resumes the run on a
# fresh machine (carry .gpu/run/ holding those parts; train-bg unpacks them). Unpack it here with
# `cat run.tar.gz.part-* | tar -xzf -` to read every file.
# Needs `source scripts/gpu/setup.sh install` first (same shell).
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
case "$1" in
  bench)
    [ -n "$2" ] || { echo "usage: [REPEATS=N] measure.sh bench contract,default,… [timeout_s] [per_config_s] [backbone] [parts] [executor_dir]"; exit 2; }
    tag=${2%%,*}; tag=${tag//[^A-Za-z0-9_.-]/-}
    timeout "${3:-540}" python3 -m advsim.bench.cuda "$OUT/bench-$tag.json" "$2" "${4:-300}" "${5:-smollm2-135m-instruct}" \
      "${6:-consistency,throughput}" "${7:-}" ${REPEATS:+"$REPEATS"} 2>&1 | tee "$OUT/bench-$tag.log" | { grep -v "^INFO\|^(EngineCore\|^DEBUG" || true; }
    rc=$?  # the bench's own status (pipefail): 1 when a configuration failed or a contract row differs, 2 bad input
    [ -f "$OUT/bench-$tag.json" ] || cp "$OUT/bench-$tag.partial.json" "$OUT/bench-$tag.json" 2>/dev/null; rm -f "$OUT/bench-$tag.partial.json"
    exit $rc ;;
  tests)
    timeout "${2:-500}" python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu.py tests/test_gpu_vllm.py "${@:3}" 2>&1 | tee "$OUT/tests.log" | tail -60 ;;
  train)
    RUN=/root/runs/$(basename "$2" .yaml)
    timeout "${3:-500}" python3 -m advsim demo --config "$2" --run-dir "$RUN" --resume --json "$RUN.json" 2>&1 \
      | tee "$OUT/train.log" | grep -v "^INFO\|^(EngineCore" | tail -40
    for f in events.jsonl eval.json report.md; do [ -f "$RUN/$f" ] && cp "$RUN/$f" "$OUT/"; done
    [ -f "$RUN.json" ] && cp "$RUN.json" "$OUT/summary.json"; ls "$RUN" ;;
  train-bg)
    name=$(basename "$2" .yaml); RUN=/root/runs/$name; mkdir -p /root/runs
    if [ ! -d "$RUN" ] && ls .gpu/run/run.tar.gz.part-* > /dev/null 2>&1; then cat .gpu/run/run.tar.gz.part-* | tar -xzf - -C /root/runs; fi
    if ! pgrep -f "advsim demo --config $2" > /dev/null; then
      setsid nohup python3 -m advsim demo --config "$2" --run-dir "$RUN" --resume --json "$RUN.json" \
        > "$RUN.console.log" 2>&1 < /dev/null &
      echo "started $name (pid $!)"
    fi
    bash "$0" watch "$2" "${3:-540}" ;;
  pair)
    mkdir -p /root/runs
    for c in "$2" "$3"; do
      name=$(basename "$c" .yaml)
      if ! pgrep -f "advsim demo --config $c" > /dev/null; then
        VLLM_CACHE_ROOT=/root/advsim-cache/vllm-$name setsid nohup python3 -m advsim demo --config "$c" \
          --run-dir "/root/runs/$name" --resume --json "/root/runs/$name.json" > "/root/runs/$name.console.log" 2>&1 < /dev/null &
        echo "started $name (pid $!)"; [ "$c" = "$2" ] && sleep 20
      fi
    done
    t0=$(date +%s)
    while { pgrep -f "advsim demo --config $2" || pgrep -f "advsim demo --config $3"; } > /dev/null \
          && [ $(( $(date +%s) - t0 )) -lt "${4:-540}" ]; do sleep 5; done
    for c in "$2" "$3"; do
      name=$(basename "$c" .yaml); mkdir -p "/tmp/pair/$name"
      echo "== $name"; OUT=/tmp/pair/$name bash "$0" watch "$c" 0 | grep -v "^total\|^-rw\|^drw" | tail -12
      tar -czf "$OUT/$name.tar.gz" -C /tmp/pair "$name"
    done
    ls -la "$OUT" ;;
  watch)
    name=$(basename "$2" .yaml); RUN=/root/runs/$name; t0=$(date +%s)
    while pgrep -f "advsim demo --config $2" > /dev/null && [ $(( $(date +%s) - t0 )) -lt "${3:-540}" ] \
          && { [ -z "$UNTIL" ] || [ "$(cat "$RUN/checkpoints/LATEST" 2>/dev/null)" != "$UNTIL" ]; }; do sleep 5; done
    [ -n "$UNTIL" ] && echo "latest checkpoint: $(cat "$RUN/checkpoints/LATEST" 2>/dev/null || echo none)"
    pgrep -f "advsim demo --config $2" > /dev/null && echo "still running" || echo "finished"
    grep -v "^INFO\|^(EngineCore\|^DEBUG" "$RUN.console.log" | tail -40
    cp "$RUN.console.log" "$OUT/console.log"
    [ -f "$RUN.json" ] && cp "$RUN.json" "$OUT/summary.json"
    if [ -n "$FULL" ]; then  # what resumes it elsewhere: all but saved chunks and the older checkpoints' optimizer states
      latest=$(cat "$RUN/checkpoints/LATEST" 2>/dev/null); ex=(--exclude "$name/episodes" --exclude "$name/eval-episodes")
      for d in "$RUN"/checkpoints/*/; do
        [ -d "$d" ] && [ "$(basename "$d")" != "$latest" ] && ex+=(--exclude "$name/checkpoints/$(basename "$d")/optimizer.pt")
      done
      tar -czf /tmp/run.tar.gz -C /root/runs "${ex[@]}" "$name" && (cd "$OUT" && split -b 15M /tmp/run.tar.gz run.tar.gz.part-)
    else
      for f in events.jsonl eval.json report.md; do [ -f "$RUN/$f" ] && cp "$RUN/$f" "$OUT/"; done
      tar -czf "$OUT/run-files.tar.gz" -C /root/runs --exclude "$name/episodes" --exclude "$name/eval-episodes" --exclude "$name/adapters" \
        --exclude "$name/checkpoints" --exclude "$name/trajectories.jsonl" --exclude "$name/engine.log" "$name"
      [ -f "$RUN/trajectories.jsonl" ] && gzip -c "$RUN/trajectories.jsonl" > "$OUT/trajectories.jsonl.gz"
    fi
    ls -la "$OUT"; echo "saved chunks: $(ls "$RUN"/episodes 2>/dev/null | wc -l)" ;;
esac
