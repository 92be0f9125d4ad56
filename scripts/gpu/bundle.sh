#!/usr/bin/env bash
# Build the GPU machine's install bundle here (where pip reaches PyPI) and cut it into parts of
# at most 55 MB (equal sizes), one per transfer (the device tool carries at most 64 MiB a call, repo included).
#   bash scripts/gpu/bundle.sh [WORK_DIR]    -> .gpu/b/1 … .gpu/b/N (add /.gpu/ to .git/info/exclude)
# Contents: vLLM 0.22.0 unpacked and slimmed (its FA2, MoE and Rust-frontend binaries and the
# deep_gemm builds for other Pythons removed: Hopper uses FA3; 590 -> 315 MB, 98 MB as tar.xz),
# the wheels of requirements-gpu.txt and requirements-gpu-vllm.txt, and the embedded backbone's GGUF (98 MB).
set -euo pipefail
W=${1:-/tmp/advsim-gpu-bundle}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$W/whl" "$W/x" "$W/bundle"
PLAT=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64
      --platform manylinux_2_31_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)
cat "$ROOT/requirements-gpu.txt" "$ROOT/requirements-gpu-vllm.txt" | grep -v "^#" | grep -v '^$' | while read -r req; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${PLAT[@]}" -d "$W/whl" "$req"
done
(cd "$W/x" && rm -rf vllm vllm-*.dist-info && unzip -q -o "$W"/whl/vllm-0.22.0-*.whl \
  && rm -f vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so vllm/_moe_C.abi3.so vllm/vllm-rs \
           vllm/third_party/deep_gemm/_C.cpython-31[134]-x86_64-linux-gnu.so \
  && tar -cf - vllm vllm-0.22.0.dist-info | xz -T2 -6 > "$W/bundle/vllm-slim.tar.xz")
mkdir -p "$W/bundle/whl" && cp "$W"/whl/*.whl "$W/bundle/whl/" && rm -f "$W"/bundle/whl/vllm-0.22.0-*.whl
(cd "$ROOT" && python3 -c "import shutil; from policies.backbone import smollm2_gguf_path; shutil.copy(smollm2_gguf_path(), '$W/bundle/')")
(cd "$W" && tar -cf bundle.tar bundle && sha256sum bundle.tar > bundle.sha256)
N=$(( ($(stat -c %s "$W/bundle.tar") + 54999999) / 55000000 ))
rm -rf "$ROOT/.gpu/b" && mkdir -p "$ROOT/.gpu/b"
(cd "$W" && split -n "$N" -d -a 1 bundle.tar part.)
for i in $(seq 0 $((N - 1))); do mkdir -p "$ROOT/.gpu/b/$((i + 1))"; mv "$W/part.$i" "$ROOT/.gpu/b/$((i + 1))/"; done
cp "$W/bundle.sha256" "$ROOT/.gpu/b/$N/"
echo "$N parts in .gpu/b/: carry .gpu/b/1 … .gpu/b/$N in consecutive device calls (scripts/gpu/setup.sh)"
