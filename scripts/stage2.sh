#!/usr/bin/env bash
# Stage 2 only (adversary <-> executor) continuing a run that finished stage 1 (RUN), or a fresh
# run from the warm start. Extra arguments go to `advsim train` (e.g. --resume).
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-configs/demo.yaml}
RUN=${RUN:-runs/stage2}
python - "$CONFIG" > /tmp/advsim-stage2.yaml <<'PY'
import sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
cfg["stages"] = [2]
print(yaml.safe_dump(cfg, sort_keys=False))
PY
advsim train --config /tmp/advsim-stage2.yaml --run-dir "$RUN" "$@"
