#!/usr/bin/env bash
# Stage 1 only (curriculum <-> executor), demo sizes unless CONFIG says otherwise.
# Extra arguments go to `advsim train` (e.g. --resume).
set -euo pipefail
cd "$(dirname "$0")/.."
advsim train --config "${CONFIG:-configs/demo.yaml}" --run-dir "${RUN:-runs/stage1}" --stages 1 "$@"
