"""The learner: one frozen backbone with three role adapters, a rollout engine, and the updates.

It owns the peft model (for gradients), the engine (for rollouts and forward values), one AdamW
optimizer per role, and the version counter of each adapter. Every update:

1. re-scores the samples' token ids with ``engine.score`` under the sampling adapter — the
   forward values ℓ (*Bit-consistent RL*: they must equal the rollout log-probs; diff is
   reported, and ``consistency="strict"`` raises on any non-zero diff);
2. computes ℓ0 with every adapter disabled (the reference policy; a plain transformers forward,
   batched — the KL anchor needs no bit-consistency, only ℓ does);
3. builds the peft graph of ℓ and joins it to the values with
   ``value + (graph − graph.detach())``;
4. minimises AdvSim2Real's loss (:func:`policies.grpo.grpo_loss`) with AdamW on the active
   adapter only, gradient-norm clip, then saves the next adapter version atomically and
   publishes it to the engine (``engine.add_adapter``; vLLM: a new LoRA id).

The engine is any :class:`policies.engines.Engine`, built by :func:`policies.engines.make_engine`
from the config's ``engine`` section; the learner calls only the protocol (no engine-specific
branches). Its model and every tensor it builds live on the engine's device
(``engine.device``). The backbone is loaded in ``engine.dtype`` (the engine's weight values);
with vLLM the gradient graph then runs in float32 (bf16 weights are held exactly; a bf16 graph's
adapter gradient was 19 % off the fp32 one in relative L2 on the H200, docs/gpu.md);
TorchEngine samples with this model, so its graph is ``engine.dtype``. Bit-identical on every
device: the forward *values* of the loss (the engine's log-probs, rollout = score). Not
bit-identical: the graph's own values, which only carry the gradient
(``value + (graph − graph.detach())``).

On CUDA the gradient graphs run under ``torch.use_deterministic_algorithms``
(``optim.deterministic_backward``, :meth:`Learner.deterministic`): PyTorch's float32 SDPA
backward is otherwise not reproducible run to run, so one seed gave different adapters.

With LoRA on the top ``model.lora_layers`` layers only, the frozen layers below are run once
per sequence (:meth:`Learner.trunk_states`) and shared by ℓ0 and the peft graph, which then run
only the adapted layers.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import time
from pathlib import Path
from typing import Sequence

import torch

from advsim.config import TrainConfig
from forms_bench.atomic import atomic_write_bytes
from policies.adapters import ROLES, activate, attach_role_adapters, load_adapter, lora_config, reference_policy, save_adapter
from policies.grpo import Sample, completion_tensor, grpo_loss, sft_loss
from policies.numerics import check, diff_report, surrogate

log = logging.getLogger(__name__)
DETERMINISTIC_WORKSPACE_CONFIGS = (":4096:8", ":16:8")
"""The ``CUBLAS_WORKSPACE_CONFIG`` values PyTorch documents as required for cuBLAS under
``torch.use_deterministic_algorithms`` (it raises ``RuntimeError`` without one on its plain cuBLAS
path; with cuBLASLt preferred, as vLLM's batch-invariant mode sets it, torch 2.11 ran without one
on an H100: ``results/h100-contract-nows-2026-12-05/learner-workspace-h100.txt``)."""


def length_grouped_batches(lengths: Sequence[int], micro_batch: int, rng: random.Random,
                           group: int = 16) -> list[list[int]]:
    """One epoch's micro-batches of example indices, grouped by length (as transformers'
    ``LengthGroupedSampler``): shuffle, cut into mega-batches of ``group × micro_batch``, sort
    each by length (longest first), split into micro-batches, shuffle their order.

    Left-padding a batch to its longest sequence costs compute on every padded position; with
    warm-start pages of 250–900 tokens, random pairs waste about a fifth of the forward.
    Deterministic in ``rng``'s state. Every index appears exactly once.
    """
    order = list(range(len(lengths)))
    rng.shuffle(order)
    mega = group * micro_batch
    batches = []
    for start in range(0, len(order), mega):
        chunk = sorted(order[start:start + mega], key=lambda i: -lengths[i])
        batches += [chunk[k:k + micro_batch] for k in range(0, len(chunk), micro_batch)]
    rng.shuffle(batches)
    return batches


class EngineChangedError(RuntimeError):
    """A resumed run's engine runs its linear layers on another kernel than the run's earlier
    updates recorded (``events.jsonl``'s ``engine.linear_kernel``): its values would differ."""


class Learner:
    """Backbone + role adapters + engine + optimizers.

    Args:
        cfg: the run config.
        adapter_root: folder where adapter versions are saved (``<root>/<role>@<v>``).
        engine: an engine to use instead of building one from ``cfg.engine`` (tests); the
            learner works on its ``device``.
        model, tokenizer: a backbone to use instead of loading ``cfg.model.backbone`` (tests);
            moved to the learner's device.
        backbone_path: the checkpoint folder of ``model`` (what a vLLM engine loads).

    Attributes:
        device: ``torch.device`` of the model and of every tensor the learner builds:
            ``cfg.engine.device``, where the engine runs too (a given engine must run there).

    Raises:
        ValueError: ``cfg.engine`` asks for what this build cannot run (e.g. ``engine.device:
            'cuda'`` without CUDA), or a given engine on another device than ``cfg.engine.device``.
    """

    def __init__(self, cfg: TrainConfig, adapter_root: str | Path, engine=None, model=None, tokenizer=None,
                 backbone_path: str | Path | None = None):
        from policies.backbone import load_backbone, tiny_backbone
        from policies.engines import check_engine_settings

        e = cfg.engine
        check_engine_settings(e.kind, e.device, e.dtype)
        self.device = torch.device(e.device)
        if engine is not None and engine.device.type != self.device.type:
            raise ValueError(f"engine.device is {e.device!r} but the given engine runs on {engine.device}")
        torch.manual_seed(cfg.seed)
        torch.set_num_threads(e.threads)
        if self.device.type == "cuda" and cfg.optim.deterministic_backward and e.kind != "vllm":
            # TorchEngine shares this process and the learner's model: one fixed cuBLAS workspace for
            # both, as before (vLLM's engine keeps its own engine.cublas_workspace_config instead)
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        if (self.device.type == "cuda" and e.kind == "vllm" and getattr(e, "cublas_linear", True)
                and torch.cuda.get_device_capability(self.device)[0] == 9):
            # the engine's linear layers on cuBLAS (Hopper only: policies.vllm_cuda_patches) need split-K off
            # (a 1 KiB cuBLASLt workspace), which torch reads once, at the process's first cuBLASLt call: the
            # learner's warm start comes first. Same default as make_engine's.
            os.environ.setdefault("CUBLASLT_WORKSPACE_SIZE", "1")
        self.cfg = cfg
        self.adapter_root = Path(adapter_root)
        if model is None:
            dtype = getattr(torch, e.dtype)
            if cfg.model.backbone == "tiny":
                model, tokenizer = tiny_backbone(seed=cfg.seed, dtype=dtype)
                backbone_path = None
            else:
                model, tokenizer, backbone_path = load_backbone(cfg.model.backbone, dtype=dtype)
        if e.kind == "vllm":  # the graph holds the engine's weight values exactly, in float32
            model = model.to(torch.float32)
        model = model.to(self.device)
        self.tokenizer = tokenizer
        lcfg = lora_config(cfg.model.lora_rank, cfg.model.lora_alpha)
        if cfg.model.lora_layers is not None:
            n_layers = model.config.num_hidden_layers
            lcfg.layers_to_transform = list(range(max(0, n_layers - cfg.model.lora_layers), n_layers))
        self.model = attach_role_adapters(model, config=lcfg, seed=cfg.seed)
        self.versions = {r: 0 for r in ROLES}
        self.optimizers = {r: self._optimizer(r, cfg.optim.lr(r)) for r in ROLES}
        self._backbone_path = backbone_path
        self._engine = engine
        self.engine_log: Path | None = None  # fd 2 goes here while the engine starts (advsim.run.stderr_to)
        # the engine record of the run's last update (advsim.train sets it while it resumes a run): an engine
        # on another linear-layer kernel would give other values, so check_resume_engine raises instead
        self.resume_engine: dict | None = None
        self._saved: dict[str, Path] = {}  # every adapter version saved or restored, in order
        for r in ROLES:
            self.publish(r)

    @property
    def engine(self):
        """The rollout engine, built on first use (so a warm start trains before vLLM starts and
        binds its CPU threads); on creation every version saved so far is registered.

        Raises:
            EngineChangedError: the new engine fails :meth:`check_resume_engine` (it is closed
                and dropped first, so nothing runs on it).
        """
        if self._engine is None:
            from advsim.run import stderr_to

            with stderr_to(self.engine_log):
                engine = self._make_engine()
            try:
                self.check_resume_engine(engine)
            except EngineChangedError:
                getattr(engine, "close", lambda: None)()
                raise
            self._engine = engine
            saved, self._saved = self._saved, {}
            for ref, path in saved.items():
                self._register(ref, path)
        return self._engine

    @property
    def engine_started(self) -> bool:
        """Whether the rollout engine has been built (:attr:`engine` builds it on first use)."""
        return self._engine is not None

    def check_resume_engine(self, engine=None) -> None:
        """While a run resumes (:attr:`resume_engine` set by :func:`advsim.train.train`), refuse an
        engine whose linear layers run on another kernel than the run's last update recorded: its
        values would differ. Checks ``engine``, else the running engine, if any; nothing to check
        when the run's updates recorded no kernel (CPU, kind torch, runs from before the record).

        Raises:
            EngineChangedError: another kernel, or none where the run recorded one. The message
                names the kernels, the engine's reason, and, where the batched-token budgets differ
                (the engine's start-up cuBLAS proof covers that many rows), ``engine.max_num_batched_tokens``.
        """
        engine = engine if engine is not None else self._engine
        want = (self.resume_engine or {}).get("linear_kernel")
        if engine is None or not want:
            return
        got = getattr(engine, "linear_kernel", None)
        if got == want:
            return
        budget, was = getattr(engine, "max_num_batched_tokens", None), self.resume_engine.get("max_num_batched_tokens")
        hint = ""
        if isinstance(budget, int) and budget != was:
            hint = (f" This engine's steps hold {budget} tokens, the run's recorded "
                    + (f"{was}" if was else "none (a run from before 2026-12-05c ran max(max_model_len, 8192))")
                    + ", and the start-up cuBLAS proof covers that many rows: set engine.max_num_batched_tokens "
                    "to the run's value.")
        raise EngineChangedError(
            f"this run's earlier updates ran the linear layers on {want!r}; this engine runs them on {got!r} "
            f"({getattr(engine, 'linear_kernel_reason', '')}): another kernel gives other values, so the run cannot "
            "resume here. Resume it on the card and engine settings it started with, or start a new run directory."
            + hint)

    def engine_record(self) -> dict[str, str | int] | None:
        """What generated the rollouts, for the run's events (``None`` until the engine has started):
        ``{"kind", "device", "dtype", "class"}`` from the config and the engine object, plus, for vLLM
        on CUDA, ``"linear_kernel"`` (``"cublas"``, ``"triton"`` — vLLM's batch-invariant matmul — or
        ``"vllm default"``) and ``"linear_kernel_reason"`` (the proof or the reason for a fallback,
        :class:`policies.engines.VLLMEngine`), so a report names the kernels its diff = 0 was measured on,
        ``"lora_shrink"`` (the LoRA shrink tile, ``"16x256"`` or ``"vllm"``), and for vLLM
        ``"max_num_batched_tokens"`` (the tokens one engine step held) and, when vLLM's engine core
        ran in a process of its own (``engine.multiprocessing``), ``"engine_core": "own process"``, and
        with vLLM's v2 model runner (``engine.model_runner``), ``"model_runner": "v2"``."""
        if self._engine is None:
            return None
        e = self.cfg.engine
        out = {"kind": e.kind, "device": e.device, "dtype": e.dtype, "class": type(self._engine).__name__}
        kernel = getattr(self._engine, "linear_kernel", None)
        if kernel:
            out["linear_kernel"] = kernel
            out["linear_kernel_reason"] = getattr(self._engine, "linear_kernel_reason", "")
        shrink = getattr(self._engine, "lora_shrink", None)
        if shrink and e.device == "cuda":
            out["lora_shrink"] = shrink
        budget = getattr(self._engine, "max_num_batched_tokens", None)
        if isinstance(budget, int):
            out["max_num_batched_tokens"] = budget
        if getattr(self._engine, "multiprocessing", False) is True:
            out["engine_core"] = "own process"
        if getattr(self._engine, "model_runner", "v1") == "v2":
            out["model_runner"] = "v2"
        return out

    def _register(self, ref: str, path: Path) -> None:
        """Remember version ``ref`` (saved in ``path``) and publish it to the engine, if one runs."""
        self._saved[ref] = path
        if self._engine is not None:
            self._engine.add_adapter(ref, path)

    # -- construction ------------------------------------------------------------------------
    def _params(self, role: str) -> list[torch.nn.Parameter]:
        return [p for n, p in self.model.named_parameters() if f".{role}." in n and "lora_" in n]

    def _optimizer(self, role: str, lr: float) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self._params(role), lr=lr, weight_decay=self.cfg.optim.weight_decay)

    def _make_engine(self):
        """The engine of ``cfg.engine`` (:func:`policies.engines.make_engine`): vLLM loads the
        backbone checkpoint; the torch engine shares this learner's peft model."""
        from policies.engines import make_engine

        return make_engine(self.cfg.engine, backbone=self._backbone_path, model=self.model, tokenizer=self.tokenizer,
                           adapter_root=self.adapter_root, seed=self.cfg.seed,
                           max_lora_rank=max(8, self.cfg.model.lora_rank),
                           cache_dir=self.adapter_root.parent / "vllm-cache")

    # -- adapters ----------------------------------------------------------------------------
    def ref(self, role: str) -> str:
        """The current version of ``role``: ``"executor@3"``."""
        return f"{role}@{self.versions[role]}"

    def publish(self, role: str) -> Path:
        """Save the current weights of ``role`` as its current version and register them with the engine."""
        path = save_adapter(self.model, self.ref(role), self.adapter_root)
        self._register(self.ref(role), path)
        return path

    def restore(self, versions: dict[str, int], optimizer_file: Path | None) -> None:
        """Load saved adapter versions (and optimizer states) after a restart.

        ``optimizer_file`` is read with ``torch.load(weights_only=True)``: AdamW's state is
        tensors, numbers and lists, and a run directory received from elsewhere must not run code
        (a pickle's ``__reduce__``) when it resumes.

        Raises:
            FileNotFoundError: ``optimizer_file`` is given but missing (a resume with fresh AdamW
                state would silently differ from an uninterrupted run).
        """
        for role, v in versions.items():
            self.versions[role] = v
            load_adapter(self.model, f"{role}@{v}", self.adapter_root)
            self._register(f"{role}@{v}", self.adapter_root / f"{role}@{v}")
        if optimizer_file is not None:
            if not optimizer_file.exists():
                raise FileNotFoundError(f"{optimizer_file}: the checkpoint's optimizer state is missing; resuming "
                                        "with fresh AdamW state would not equal an uninterrupted run")
            states = torch.load(optimizer_file, weights_only=True)
            for role, st in states.items():
                self.optimizers[role].load_state_dict(st)

    def save_optimizers(self, path: Path) -> None:
        """Optimizer states of every role, written atomically."""
        import io

        buf = io.BytesIO()
        torch.save({r: o.state_dict() for r, o in self.optimizers.items()}, buf)
        atomic_write_bytes(path, buf.getvalue())

    # -- log-probs ---------------------------------------------------------------------------
    def _graph(self, seqs: Sequence[Sequence[int]], prompt_lens: Sequence[int], width: int,
               reference: bool = False, trunk: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        """``[B, width]`` log-probs of each sequence's completion tokens (left-aligned, zero
        padded) under the active adapter (with gradient) or the backbone (``reference=True``,
        no gradient).

        Memory: sequences are left-padded (positions from the attention mask) so every
        completion ends at the last position, and only the last ``width + 1`` positions go
        through the LM head (``logits_to_keep``) — the full ``[B, T, vocab]`` logits of a
        1,000-token page would take gigabytes.

        ``trunk``: per sequence, the cached ``[T_i, d]`` states entering the first LoRA layer
        (:meth:`trunk_states`); the forward then starts there and runs only the adapted layers.
        """
        B, T = len(seqs), max(len(s) for s in seqs)
        ids = torch.full((B, T), self.tokenizer.pad_token_id or 0, dtype=torch.long)
        att = torch.zeros((B, T), dtype=torch.long)
        for b, s in enumerate(seqs):
            ids[b, T - len(s):] = torch.tensor(list(s), dtype=torch.long)
            att[b, T - len(s):] = 1
        ids, att = ids.to(self.device), att.to(self.device)
        pos = (att.cumsum(-1) - 1).clamp_min(0)
        ctx = reference_policy(self.model) if reference else contextlib.nullcontext()
        grad = contextlib.nullcontext() if not reference else torch.no_grad()
        with ctx, grad:
            if trunk is None:
                logits = self.model(input_ids=ids, attention_mask=att, position_ids=pos, use_cache=False,
                                    logits_to_keep=width + 1).logits[:, :-1]
            else:
                layers, k = self._trunk()
                h = torch.zeros((B, T, trunk[0].shape[-1]), dtype=trunk[0].dtype, device=self.device)
                for b, t in enumerate(trunk):
                    h[b, T - t.shape[0]:] = t
                inner = self.model.get_base_model().model
                inner.layers = torch.nn.ModuleList(list(layers)[k:])
                try:
                    logits = self.model(inputs_embeds=h, attention_mask=att, position_ids=pos, use_cache=False,
                                        logits_to_keep=width + 1).logits[:, :-1]
                finally:
                    inner.layers = layers
            lp = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, T - width:, None]).squeeze(-1)
        rows = []
        for b, (s, pl) in enumerate(zip(seqs, prompt_lens)):
            n = len(s) - pl
            rows.append(torch.nn.functional.pad(lp[b, width - n:], (0, width - n)))
        return torch.stack(rows)

    # -- frozen trunk (warm start) --------------------------------------------------------------
    def _trunk(self) -> tuple[torch.nn.ModuleList, int] | None:
        """The decoder's layer list and the index of its first LoRA layer, when the layers
        below it are frozen (``model.lora_layers`` set); ``None`` otherwise."""
        n_lora = self.cfg.model.lora_layers
        inner = getattr(self.model.get_base_model(), "model", None)
        layers = getattr(inner, "layers", None)
        if n_lora is None or not isinstance(layers, torch.nn.ModuleList) or n_lora >= len(layers):
            return None
        return layers, len(layers) - n_lora

    @torch.no_grad()
    def trunk_states(self, seq: Sequence[int]) -> torch.Tensor | None:
        """``[T, d]`` float32 hidden states entering the first LoRA layer for one sequence.

        With LoRA on the top ``lora_layers`` layers only, everything below is the frozen
        backbone, so these states do not change while an adapter trains: the warm start
        computes them once per example and every epoch runs only the adapted layers
        (:meth:`_graph` with ``trunk=``). ``None`` when LoRA covers every layer.
        """
        found = self._trunk()
        if found is None:
            return None
        layers, k = found
        box: dict[str, torch.Tensor] = {}

        class _Stop(Exception):
            pass

        def grab(module, args, kwargs):
            box["h"] = (args[0] if args else kwargs["hidden_states"]).detach()
            raise _Stop

        ids = torch.tensor([list(seq)], dtype=torch.long, device=self.device)
        handle = layers[k].register_forward_pre_hook(grab, with_kwargs=True)
        try:
            self.model(input_ids=ids, attention_mask=torch.ones_like(ids),
                       position_ids=torch.arange(ids.shape[1], device=self.device)[None], use_cache=False)
        except _Stop:
            pass
        finally:
            handle.remove()
        return box["h"][0]

    # -- updates -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def deterministic(self):
        """Run the enclosed gradient graph and backward under
        ``torch.use_deterministic_algorithms(True, warn_only=False)`` when the learner is on CUDA and
        ``optim.deterministic_backward`` is set; the previous setting is restored on exit, so the
        engine's own kernels (vLLM in this process) never run under it. A no-op on the CPU, whose
        kernels are already run-to-run deterministic.

        ``warn_only=False`` is what makes PyTorch *choose* the deterministic variant of a kernel
        that has one: the float32 SDPA backward (the memory-efficient kernel) then reduces over
        key blocks in one split. With ``warn_only=True`` that kernel only warns ("Memory Efficient
        attention defaults to a non-deterministic algorithm") and stays non-deterministic. An op
        with no deterministic kernel raises ``RuntimeError`` at the first update that uses it;
        set ``optim.deterministic_backward: false`` to trade reproducibility for running it.

        PyTorch documents that cuBLAS needs ``CUBLAS_WORKSPACE_CONFIG`` at one of
        :data:`DETERMINISTIC_WORKSPACE_CONFIGS` in this mode; vLLM's engine on CUDA keeps the
        variable unset (``engine.cublas_workspace_config``: ~60–90 µs of host time per eager
        matmul), so where it is not one of them it is ``:4096:8`` inside the block and back as it
        was on exit (a TorchEngine learner sets ``:4096:8`` for the whole process at start, as
        before). On Hopper ``:4096:8`` is the size of PyTorch's default workspace (32 MiB); on
        other cards (8.125 MiB default) a cuBLAS workspace PyTorch allocates keeps the size of
        whichever comes first, the block or the engine (unmeasured there). Cost: on an H100 an
        eager bf16 matmul took 266.7 µs of host time at ``:4096:8`` against 29.6 µs unset
        (``scripts/gpu/learner_workspace.py``); the learner paid vLLM's ``:16:8`` (57 µs alone in
        ``mm_host_cost.py --factors``) before 2026-12-05b. A GRPO update's wall time under each
        is not measured.

        Measured on the H200 (``scripts/gpu/sft_determinism.py``): 8 AdamW steps of LoRA on
        SmolLM2-135M's shapes in float32, twice from one state: SDPA left 417,314 of 488,448 adapter
        weights different (max 3.4e-6); under this mode, or with eager attention, none.
        """
        if self.device.type != "cuda" or not self.cfg.optim.deterministic_backward:
            yield
            return
        before, before_warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
        workspace = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
        if workspace not in DETERMINISTIC_WORKSPACE_CONFIGS:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        torch.use_deterministic_algorithms(True, warn_only=False)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(before, warn_only=before_warn)
            if workspace is None:
                os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
            else:
                os.environ["CUBLAS_WORKSPACE_CONFIG"] = workspace

    def update(self, role: str, samples: Sequence[Sample]) -> dict:
        """One GRPO-style update of ``role`` on ``samples`` (all sampled by its current version):
        ``optim.steps_per_update`` AdamW steps (fewer when there are under ``optim.min_step_samples`` trained
        samples per step), each on one mini-batch of a seeded shuffle.

        With ``optim.skip_zero_advantage`` (default) samples with Â = 0 are left out, and an
        update with none left is skipped (no step, no new version; ``"skipped"`` says why):
        they carry no policy gradient, and AdamW turns the KL term's tiny gradient alone into a
        step of ≈ lr on every parameter — on SmolLM2 one such stage-1 update (4 steps at lr 1e-3,
        every group uniform) took level-0 success from 45 % to 5 % (2026-12-01).

        Returns:
            Stats: loss and pg (summed over the optimizer steps, each the 1/N mean of its
            mini-batch), kl (k3 per token), grad_norms (one per step), diff (max/mean/std/k3 between rollout and
            training log-probs), tokens, samples, grad_norm, version (the new one), and wall seconds
            of its parts: score_seconds (the engine's forward values ℓ for every sample),
            step_seconds (the gradient graphs and AdamW steps) and publish_seconds (saving the new
            adapter version and registering it with the engine).

        Raises:
            ConsistencyError: ``consistency="strict"`` and a non-zero diff.
        """
        given = len(samples)
        samples = [s for s in samples if len(s.completion_ids) > 0]
        if self.cfg.optim.skip_zero_advantage:
            samples = [s for s in samples if s.advantage != 0]
        if not samples:
            return {"samples": 0, "samples_given": given, "version": self.versions[role],
                    "skipped": "no sample with a non-zero advantage" if given else "no samples"}
        ref = self.ref(role)
        seqs = [list(s.prompt_ids) + list(s.completion_ids) for s in samples]
        plens = [len(s.prompt_ids) for s in samples]
        lens = [len(s.completion_ids) for s in samples]
        t0 = time.perf_counter()
        scores = self.engine.score(seqs, [ref] * len(seqs))
        score_seconds = time.perf_counter() - t0
        train_vals = [sc[pl - 1:] for sc, pl in zip(scores, plens)]
        width_all = max(lens)
        # the diff compares the engine's floats with the rollout's: exact on the CPU, whatever the device
        report = diff_report(completion_tensor([s.rollout_logprobs for s in samples], lens, width_all, torch.float64),
                             completion_tensor(train_vals, lens, width_all, torch.float64),
                             completion_tensor([[1.0] * n for n in lens], lens, width_all) > 0)
        check(report, self.cfg.engine.consistency)  # strict: raises ConsistencyError on any diff
        diff = report.as_dict()
        activate(self.model, role)
        opt = self.optimizers[role]
        opt.zero_grad(set_to_none=True)
        n = len(samples)
        totals = {"loss": 0.0, "pg": 0.0, "kl_sum": 0.0, "tokens": 0.0}
        # optimizer steps: one per mini-batch of a seeded shuffle (steps_per_update = 1: the whole batch)
        steps = max(1, min(self.cfg.optim.steps_per_update, n // self.cfg.optim.min_step_samples))
        order = list(range(n))
        if steps > 1:
            random.Random(f"{role}:{self.versions[role]}").shuffle(order)
        bounds = [round(k * n / steps) for k in range(steps + 1)]
        grad_norms = []
        t0 = time.perf_counter()
        for k in range(steps):
            chunk = order[bounds[k]:bounds[k + 1]]
            with self.deterministic():
                self._step(role, opt, chunk, samples, seqs, plens, lens, train_vals, totals, grad_norms)
        step_seconds = time.perf_counter() - t0
        self.versions[role] += 1
        t0 = time.perf_counter()
        self.publish(role)
        return {"loss": totals["loss"], "pg": totals["pg"], "kl": totals["kl_sum"] / max(totals["tokens"], 1.0),
                "diff": diff, "tokens": int(totals["tokens"]), "samples": n, "samples_given": given,
                "grad_norm": grad_norms[-1],
                "grad_norms": grad_norms, "optimizer_steps": steps, "version": self.versions[role],
                "score_seconds": round(score_seconds, 2), "step_seconds": round(step_seconds, 2),
                "publish_seconds": round(time.perf_counter() - t0, 2)}

    def _step(self, role, opt, chunk, samples, seqs, plens, lens, train_vals, totals, grad_norms) -> None:
        """One optimizer step on the samples ``chunk`` (indices), accumulated over micro-batches;
        the loss is normalised by the chunk's size (1/N of L(ϑ) with N = len(chunk))."""
        n = len(chunk)
        mb = max(1, self.cfg.optim.micro_batch)
        for start in range(0, n, mb):
            idx = chunk[start:start + mb]
            width = max(lens[i] for i in idx)
            mseqs = [seqs[i] for i in idx]
            mpl = [plens[i] for i in idx]
            trunk = [self.trunk_states(x) for x in mseqs] if self._trunk() is not None else None
            graph = self._graph(mseqs, mpl, width, trunk=trunk)
            ref_lp = self._graph(mseqs, mpl, width, reference=True, trunk=trunk)
            values = completion_tensor([train_vals[i] for i in idx], [lens[i] for i in idx], width, graph.dtype,
                                       device=self.device)
            logp = surrogate(values, graph)
            mask = completion_tensor([[1.0] * lens[i] for i in idx], [lens[i] for i in idx], width, graph.dtype,
                                     device=self.device)
            adv = torch.tensor([samples[i].advantage for i in idx], dtype=graph.dtype, device=self.device)
            loss, st = grpo_loss(logp, ref_lp, adv, mask, self.cfg.optim.beta_kl, n_samples=n)
            loss.backward()
            totals["loss"] += float(loss.detach())
            totals["pg"] += st["pg"]
            totals["kl_sum"] += st["kl"] * st["tokens"]
            totals["tokens"] += st["tokens"]
        params = self._params(role)
        grad_norms.append(float(torch.nn.utils.clip_grad_norm_(params, self.cfg.optim.max_grad_norm)))
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sft(self, role: str, examples: Sequence[tuple[Sequence[int], Sequence[int]]], epochs: int,
            learning_rate: float, seed: int, progress=None, micro_batch: int | None = None) -> dict:
        """Supervised warm start of ``role`` on ``(prompt_ids, target_ids)`` pairs.

        Mean NLL of the target tokens (:func:`policies.grpo.sft_loss`), AdamW (a separate
        optimizer), one step per ``micro_batch`` examples (default ``optim.micro_batch``) of
        similar length (:func:`length_grouped_batches`: little padding), seeded shuffling,
        gradient clip.
        With more than one epoch and LoRA on the top layers only, the frozen layers' output is
        computed once per example (:meth:`trunk_states`) and each epoch runs only the adapted
        layers: the same loss up to float rounding, about 1/3 of the cost on SmolLM2 with 6 of
        30 layers adapted. Afterwards the next version of ``role`` is saved and registered.

        Returns:
            ``{"loss_first": …, "loss_last": …, "loss_epochs": [mean loss of each epoch], "steps": …,
            "version": …}``.
        """
        activate(self.model, role)
        opt = self._optimizer(role, learning_rate)
        rng = random.Random(seed)
        mb = max(1, micro_batch or self.cfg.optim.micro_batch)
        losses = []
        seqs_all = [list(p) + list(t) for p, t in examples]
        cache = [self.trunk_states(s) for s in seqs_all] if epochs > 1 else [None] * len(examples)
        for _ in range(epochs):
            for idx in length_grouped_batches([len(s) for s in seqs_all], mb, rng):
                seqs = [seqs_all[i] for i in idx]
                pls = [len(examples[i][0]) for i in idx]
                width = max(len(examples[i][1]) for i in idx)
                trunk = None if cache[idx[0]] is None else [cache[i] for i in idx]
                with self.deterministic():
                    lp = self._graph(seqs, pls, width, trunk=trunk)
                    mask = completion_tensor([[1.0] * len(examples[i][1]) for i in idx],
                                             [len(examples[i][1]) for i in idx], width, lp.dtype, device=self.device)
                    loss = sft_loss(lp, mask)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                torch.nn.utils.clip_grad_norm_(self._params(role), self.cfg.optim.max_grad_norm)
                opt.step()
                losses.append(float(loss.detach()))
                if progress:
                    progress(len(idx))
        self.versions[role] += 1
        self.publish(role)
        per_epoch = max(1, -(-len(examples) // mb))
        epoch_means = [sum(losses[i:i + per_epoch]) / len(losses[i:i + per_epoch])
                       for i in range(0, len(losses), per_epoch)]
        return {"loss_first": losses[0] if losses else math.nan, "loss_last": losses[-1] if losses else math.nan,
                "loss_epochs": epoch_means, "steps": len(losses), "version": self.versions[role]}

    def close(self) -> None:
        """Close the engine (``engine.close()``: vLLM frees its KV cache) and forget it; a later
        use of :attr:`engine` starts a new one with every saved version published."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None
