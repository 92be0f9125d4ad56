#!/usr/bin/env bash
# Stage 1 only (curriculum <-> executor) with the demo sizes; edit CONFIG/RUN to scale up.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-configs/demo.yaml}
RUN=${RUN:-runs/stage1}
python - "$CONFIG" > /tmp/advsim-stage1.yaml <<'PY'
import sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
cfg["stages"] = [1]
print(yaml.safe_dump(cfg, sort_keys=False))
PY
advsim train --config /tmp/advsim-stage1.yaml --run-dir "$RUN" "$@"
