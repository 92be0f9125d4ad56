#!/usr/bin/env bash
# The whole pipeline: train both stages, then evaluate every checkpoint (sim + real browser)
# and write the report. CONFIG=configs/paper.yaml scales it to the paper's settings.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-configs/demo.yaml}
RUN=${RUN:-runs/pipeline}
advsim train --config "$CONFIG" --run-dir "$RUN" "$@"
advsim eval --run "$RUN" --tasks "${TASKS:-sample:2}" --seeds "${SEEDS:-1}" --world both
