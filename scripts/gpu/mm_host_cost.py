"""Host (CPU) time per ``F.linear`` call in bf16 with the contract's cuBLAS settings, with none of
them, and with each alone. Each setting runs in its own process (PyTorch and cuBLAS read the
environment once). A diagnostic for the contract's prefill profile
(results/h200-contract-light-2026-12-05: aten::mm took ~0.5 ms of self CPU time per call there,
~0.045 ms in vLLM's default). Needs a CUDA GPU; run from the repository root:

    PYTHONPATH=$PWD python3 scripts/gpu/mm_host_cost.py           # default and contract, 15 shapes
    PYTHONPATH=$PWD python3 scripts/gpu/mm_host_cost.py --factors # one setting at a time, one shape

Settings: ``default`` (PyTorch's), ``contract`` (policies.vllm_cuda_patches.hopper_settings, as
vLLM 0.22's batch-invariant mode sets them on Hopper), and the contract's parts alone:
``workspace-config`` (CUBLAS_WORKSPACE_CONFIG=:16:8; ``workspace-config-4096``: :4096:8, the other
deterministic value PyTorch documents), ``lt-workspace`` (CUBLASLT_WORKSPACE_SIZE=1
KiB), ``cublaslt`` (preferred_blas_library cublaslt), ``cublaslt+lt-workspace``; and the contract
with :4096:8 or with the variable unset (``contract-4096``, ``contract-unset``: the settings of the
bench rows ``contract-ws4096`` and ``contract-nows``).
"""
import json
import os
import subprocess
import sys
import time

SHAPES = [(960, 576), (576, 576), (3072, 576), (576, 1536), (49152, 576)]  # SmolLM2-135M's, as vLLM fuses them
ROWS = (8192, 512, 64)
FACTORS = ("default", "workspace-config", "workspace-config-4096", "lt-workspace", "cublaslt",
           "cublaslt+lt-workspace", "contract", "contract-4096", "contract-unset")


def apply(setting: str) -> None:
    import torch

    if setting.startswith("contract"):
        from policies.vllm_cuda_patches import hopper_settings

        hopper_settings({"contract": ":16:8", "contract-4096": ":4096:8", "contract-unset": None}[setting])
        return
    parts = set(setting.split("+"))
    if "workspace-config" in parts:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":16:8"
    if "workspace-config-4096" in parts:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    if "lt-workspace" in parts:
        os.environ["CUBLASLT_WORKSPACE_SIZE"] = "1"
    if "cublaslt" in parts:
        torch.backends.cuda.preferred_blas_library(backend="cublaslt")


def measure(setting: str, shapes, rows, calls: int = 50) -> list[dict]:
    """Per (rows, N, K): host µs per call (the loop's time before a synchronize) and wall µs per
    call (after it)."""
    import torch
    import torch.nn.functional as F

    apply(setting)
    out = []
    for m in rows:
        for n, k in shapes:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
            for _ in range(5):
                F.linear(x, w)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                F.linear(x, w)
            host = (time.perf_counter() - t0) / calls
            torch.cuda.synchronize()
            wall = (time.perf_counter() - t0) / calls
            out.append({"setting": setting, "rows": m, "N": n, "K": k, "host_us": round(host * 1e6, 1),
                        "wall_us": round(wall * 1e6, 1)})
    return out


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        factors = sys.argv[3] == "1"
        print(json.dumps(measure(sys.argv[2], SHAPES[:1] if factors else SHAPES, (512,) if factors else ROWS,
                                 100 if factors else 50)))
        sys.exit(0)
    factors = "--factors" in sys.argv
    for setting in FACTORS if factors else ("default", "contract"):
        res = subprocess.run([sys.executable, __file__, "--one", setting, "1" if factors else "0"],
                             capture_output=True, text=True)
        if res.returncode:
            print(setting, "failed:", res.stderr[-2000:])
            continue
        for r in json.loads(res.stdout.strip().splitlines()[-1]):
            print(f"{r['setting']:22s} M={r['rows']:5d} N={r['N']:6d} K={r['K']:5d}  host {r['host_us']:8.1f} "
                  f"us/call  wall {r['wall_us']:8.1f} us/call")
