"""Does the learner's deterministic block work in a process whose engine keeps CUBLAS_WORKSPACE_CONFIG
unset (engine.cublas_workspace_config: unset)? Plain torch, no vLLM, no advsim import (the GPU image
lacks pydantic without the bundle); it mirrors ``advsim.learner.Learner.deterministic``:
    python3 scripts/gpu/learner_workspace.py
Prints: (1) whether PyTorch refuses cuBLAS under use_deterministic_algorithms with the variable unset
(the reason for the block's :4096:8), (2) whether two fp32 LoRA-shaped backward passes inside the
block, with an engine-like bf16 matmul between them outside it, give bit-equal gradients, (3) whether
the engine-like bf16 product is the same bits before and after the blocks, (4) host µs per eager bf16
matmul outside the block (unset) and inside (:4096:8)."""
import os
import time

import torch
import torch.nn.functional as F

os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
os.environ["CUBLASLT_WORKSPACE_SIZE"] = "1"  # vLLM's Hopper setting, as the engine keeps it
torch.backends.cuda.preferred_blas_library(backend="cublaslt")
g = torch.Generator(device="cuda").manual_seed(0)
x = torch.randn(512, 576, device="cuda", generator=g)
w = torch.randn(960, 576, device="cuda", generator=g, requires_grad=True)
a = torch.randn(8, 576, device="cuda", generator=g, requires_grad=True)  # LoRA A, B
b = torch.randn(960, 8, device="cuda", generator=g, requires_grad=True)
xb, wb = x.bfloat16(), w.detach().bfloat16()
y0 = F.linear(xb, wb)  # the engine's kind of product, variable unset

torch.use_deterministic_algorithms(True, warn_only=False)
try:
    F.linear(x, w).sum().backward()
    print("(1) unset + deterministic mode: cuBLAS ran")
except RuntimeError as e:
    print("(1) unset + deterministic mode: RuntimeError:", str(e).splitlines()[0][:160])
torch.use_deterministic_algorithms(False)


def block():
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    torch.use_deterministic_algorithms(True, warn_only=False)
    try:
        w.grad = a.grad = b.grad = None
        loss = (F.linear(x, w) + F.linear(F.linear(x, a), b)).pow(2).mean()
        loss.backward()
        return w.grad.clone(), a.grad.clone(), b.grad.clone()
    finally:
        torch.use_deterministic_algorithms(False)
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)


g1 = block()
y1 = F.linear(xb, wb)
g2 = block()
y2 = F.linear(xb, wb)
print("(2) gradients bit-equal across blocks:", all(torch.equal(p, q) for p, q in zip(g1, g2)))
print("(3) engine-like bf16 product bit-equal before/after the blocks:", torch.equal(y0, y1) and torch.equal(y1, y2))


def host_us(n=200):
    for _ in range(10):
        F.linear(xb, wb)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        F.linear(xb, wb)
    h = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return h


out = host_us()
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
inside = host_us()
os.environ.pop("CUBLAS_WORKSPACE_CONFIG")
print(f"(4) host us per eager bf16 matmul: unset {out:.1f}, :4096:8 {inside:.1f}  ({torch.__version__}, "
      f"{torch.cuda.get_device_name()})")
