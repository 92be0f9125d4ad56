#!/usr/bin/env bash
# Stage 2 only (adversary <-> executor), starting from the warm start; to continue a stage-1
# run instead, use the whole pipeline (scripts/pipeline.sh) or `advsim train --resume`.
set -euo pipefail
cd "$(dirname "$0")/.."
advsim train --config "${CONFIG:-configs/demo.yaml}" --run-dir "${RUN:-runs/stage2}" --stages 2 "$@"
