"""TorchEngine: transformers-only engine over a (Peft)Model (see :mod:`policies.engines`)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Sequence, Union

from policies.adapters import AdapterRef

log = logging.getLogger(__name__)

AdapterSpec = Union[AdapterRef, str, None]

from policies.engines.base import Generation, GenerationRequest, _per_sequence


class TorchEngine:
    """transformers-only engine over a (Peft)Model: per-adapter batches, left-padded ``generate``.

    Args:
        model: a ``PeftModel`` with role adapters (or a plain causal LM: then only
            ``adapter=None`` requests are allowed).
        tokenizer: its tokenizer (eos ends completions; pad id used for padding).
        adapter_root: folder of saved adapter versions; a request for a version other than
            the one loaded in the role's slot loads it from here
            (:func:`policies.adapters.load_adapter`).
        loaded: which version each role's slot holds now (default version 0 for every slot).
        batch_size: most sequences per forward.
        shared_model: ``model`` is the trainer's own (the learner's peft model): a version
            published with :meth:`add_adapter` was saved from its slot, so publishing only records
            that the slot holds it. False: :meth:`add_adapter` loads the weights from the folder.
        static_cache: sample with transformers' static KV cache (``cache_implementation="static"``);
            on CUDA transformers then compiles the decoding step with ``torch.compile`` (its
            "reduce-overhead" mode: CUDA graphs), the configuration the throughput benchmark
            calls "transformers static cache + compile". A compiled step is specialised to its
            shapes, so each batch is padded to a fixed set of them: the prompt length up to a
            multiple of ``length_bucket`` (more left padding) and the row count up to the next
            power of two, at most ``batch_size`` (extra rows repeat the first prompt; their
            samples are dropped). The sampled tokens and log-probs of a prompt may then depend on
            the padding around it, as they already do on its batch-mates' lengths.
        length_bucket: prompt-length multiple for ``static_cache`` (tokens, ≥ 1).
        max_model_len: the longest prompt + ``max_new_tokens`` a request may ask for (tokens), as
            the config's ``engine.max_model_len`` sets it for vLLM; None (default): no limit here.

    Raises:
        ValueError: ``batch_size`` or ``length_bucket`` below 1 (whether or not ``static_cache``),
            or ``max_model_len`` below 2.

    The engine computes on the model's device (:attr:`device`; move the model before building
    the engine) and in the model's dtype.

    Sampling uses ``model.generate`` with ``output_logits=True`` (dynamic KV cache, no compile;
    with ``static_cache``, the static cache and transformers' compiled decoding step on CUDA); a
    sampled token's log-prob is ``log_softmax`` of its raw logits. Requests are grouped by
    (adapter, sampling settings); a group is seeded with its first request's seed. ``generate``
    and ``score`` differ by ~1e-7 … 1e-6 (KV-cache decoding vs full forward; padding): measure,
    don't require, diff = 0.
    """

    request_type = GenerationRequest  # what generate() takes (judges build requests from it)

    def __init__(self, model, tokenizer, *, adapter_root: str | os.PathLike | None = None,
                 loaded: dict[str, int] | None = None, batch_size: int = 16, shared_model: bool = False,
                 static_cache: bool = False, length_bucket: int = 128, max_model_len: int | None = None) -> None:
        if batch_size < 1 or length_bucket < 1:
            raise ValueError(f"batch_size and length_bucket must be >= 1; got {batch_size}, {length_bucket}")
        if max_model_len is not None and max_model_len < 2:
            raise ValueError(f"max_model_len must be >= 2 or None; got {max_model_len}")
        self.max_model_len = max_model_len
        self.model = model
        self.static_cache = static_cache
        self.length_bucket = length_bucket
        self.shared_model = shared_model
        self._roots: dict[AdapterRef, Path] = {}  # where each published version was saved
        self.tokenizer = tokenizer
        self.adapter_root = adapter_root
        slots = list(getattr(model, "peft_config", {}) or {})
        self.loaded: dict[str, int] = {r: 0 for r in slots}
        if loaded:
            self.loaded.update(loaded)
        self.batch_size = batch_size
        self._closed = False

    @property
    def device(self):
        """``torch.device`` of the model's weights (where the engine builds its inputs)."""
        return next(self.model.parameters()).device

    def add_adapter(self, ref: AdapterRef | str, path: str | os.PathLike) -> None:
        """Publish version ``ref`` saved in the peft folder ``path`` (``<root>/<role>@<version>``,
        as :func:`policies.adapters.save_adapter` writes it).

        ``shared_model=True``: the slot already holds these weights (they were saved from it);
        only the slot's version is updated. Otherwise the weights are copied from ``path`` into
        the role's slot now. Either way ``ref`` can be re-loaded from ``path`` later.

        Raises:
            KeyError: the model has no slot for ``ref.role``.
            ValueError: ``path`` is not named after ``ref``.
            FileNotFoundError: (``shared_model=False``) no weights in ``path``.
        """
        from policies.adapters import load_adapter

        ref = AdapterRef.parse(ref)
        path = Path(path)
        if ref.role not in self.loaded:
            raise KeyError(f"model has no adapter slot {ref.role!r}")
        if path.name != str(ref):
            raise ValueError(f"adapter folder {path} is not named {ref} (<root>/<role>@<version>)")
        self._roots[ref] = path.parent
        if not self.shared_model:
            load_adapter(self.model, ref, path.parent)
        self.loaded[ref.role] = ref.version

    def close(self) -> None:
        """Mark the engine closed (it holds no resources of its own; a shared model stays with its
        owner); idempotent. Later :meth:`generate`/:meth:`score` calls raise ``RuntimeError``."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this TorchEngine is closed")

    def _use(self, ref: AdapterRef | None):
        """Context manager: run ``self.model`` as adapter ``ref`` (None: adapters disabled)."""
        import contextlib

        from policies.adapters import load_adapter

        if ref is None:
            if hasattr(self.model, "disable_adapter"):
                return self.model.disable_adapter()
            return contextlib.nullcontext()
        if ref.role not in self.loaded:
            raise KeyError(f"model has no adapter slot {ref.role!r}")
        if self.loaded[ref.role] != ref.version:
            root = self._roots.get(ref, self.adapter_root)
            if root is None:
                raise KeyError(f"adapter {ref} requested but slot holds "
                               f"{ref.role}@{self.loaded[ref.role]} and no adapter_root is set")
            load_adapter(self.model, ref, root)
            self.loaded[ref.role] = ref.version
        self.model.set_adapter(ref.role)
        return contextlib.nullcontext()

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Sample completions; see the class docstring for grouping and seeding.

        Raises:
            ValueError: prompt + max_new_tokens exceeds ``max_model_len`` (nothing is sampled).
            KeyError: an adapter the engine cannot load.
            RuntimeError: the engine is closed.
        """
        import torch

        self._check_open()
        if self.max_model_len is not None:
            for r in requests:
                if len(r.prompt_ids) + r.max_new_tokens > self.max_model_len:
                    raise ValueError(f"prompt of {len(r.prompt_ids)} tokens + {r.max_new_tokens} new tokens exceeds "
                                     f"max_model_len={self.max_model_len}")
        device = self.device
        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        out: list[Generation | None] = [None] * len(requests)
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            key = (r.adapter_ref(), r.temperature, r.top_p, r.top_k, r.max_new_tokens, r.stop_token_ids)
            groups.setdefault(key, []).append(i)
        for (ref, temp, top_p, top_k, max_new, stops), idx in groups.items():
            for start in range(0, len(idx), self.batch_size):
                chunk = idx[start:start + self.batch_size]
                L = max(len(requests[i].prompt_ids) for i in chunk)
                rows = len(chunk)
                if self.static_cache:  # a fixed set of shapes for the compiled decoding step
                    L = -(-L // self.length_bucket) * self.length_bucket
                    rows = min(1 << (rows - 1).bit_length(), self.batch_size)  # len(chunk) <= batch_size
                ids = torch.full((rows, L), pad, dtype=torch.long)
                att = torch.zeros((rows, L), dtype=torch.long)
                for row in range(rows):
                    p = requests[chunk[row] if row < len(chunk) else chunk[0]].prompt_ids  # extra rows: the first prompt
                    ids[row, L - len(p):] = torch.tensor(p)
                    att[row, L - len(p):] = 1
                ids, att = ids.to(device), att.to(device)
                seed = requests[chunk[0]].seed
                torch.manual_seed(seed if seed is not None else 0)
                eos = [t for t in {tok.eos_token_id, *stops} if t is not None]
                gen_kwargs: dict[str, Any] = dict(max_new_tokens=max_new, eos_token_id=eos,
                                                  pad_token_id=pad, output_logits=True,
                                                  return_dict_in_generate=True)
                if self.static_cache:
                    gen_kwargs["cache_implementation"] = "static"
                if temp > 0:
                    gen_kwargs.update(do_sample=True, temperature=temp, top_p=top_p,
                                      top_k=top_k if top_k > 0 else None)
                else:
                    gen_kwargs.update(do_sample=False)
                with torch.no_grad(), self._use(ref):
                    res = self.model.generate(input_ids=ids, attention_mask=att, **gen_kwargs)
                seqs = res.sequences[:, L:]
                logits = torch.stack(res.logits, dim=1).float()  # [B, T, V]
                lps = torch.log_softmax(logits, dim=-1).gather(-1, seqs[:, : logits.shape[1]].unsqueeze(-1)).squeeze(-1)
                # one device-to-host copy per batch (float() of each element would synchronise the GPU once per token)
                seq_rows, lp_rows = seqs.tolist(), lps.tolist()
                for row, i in enumerate(chunk):
                    toks = seq_rows[row]
                    n = len(toks)
                    for k, t in enumerate(toks):
                        if t in eos:
                            n = k + 1
                            break
                    toks = toks[:n]
                    finish = "stop" if toks and toks[-1] in eos else "length"
                    out[i] = Generation(requests[i], toks, lp_rows[row][:n], ref,
                                        finish, tok.decode(toks, skip_special_tokens=True))
        return out  # type: ignore[return-value]

    def score(self, sequences: Sequence[Sequence[int]],
              adapter: AdapterSpec | Sequence[AdapterSpec] = None) -> list[list[float]]:
        """Full-forward log-probs (right-padded batches per adapter); same layout as :meth:`Engine.score`.

        Raises:
            KeyError: an adapter the engine cannot load.
            RuntimeError: the engine is closed.
        """
        self._check_open()
        adapters = _per_sequence(adapter, len(sequences))
        out: list[list[float] | None] = [None] * len(sequences)
        groups: dict[AdapterRef | None, list[int]] = {}
        for i, a in enumerate(adapters):
            groups.setdefault(a, []).append(i)
        for ref, idx in groups.items():
            for start in range(0, len(idx), self.batch_size):
                chunk = idx[start:start + self.batch_size]
                lp = token_logprobs_batch(self.model, [sequences[i] for i in chunk],
                                          context=self._use(ref), grad=False)
                rows = lp.tolist()  # one device-to-host copy per batch
                for row, i in enumerate(chunk):
                    out[i] = rows[row][: len(sequences[i]) - 1]
        return out  # type: ignore[return-value]


def token_logprobs_batch(model, sequences: Sequence[Sequence[int]], *, context=None, grad: bool = True):
    """Differentiable per-token log-probs of right-padded sequences under ``model``'s current adapter.

    Args:
        model: a causal LM or PeftModel (the active adapter is used).
        sequences: B token id lists.
        context: optional context manager entered around the forward (e.g. adapter selection).
        grad: keep the autograd graph.

    The inputs are built on the device of ``model``'s weights.

    Returns:
        float tensor ``[B, T-1]`` (T = longest length; the model's dtype, but float32 for a
        bf16/fp16 model: the log-softmax is taken in float32), entry ``[b, i]`` = log p(seq_b[i+1] | seq_b[:i+1]);
        entries past a sequence's end are 0.
    """
    import contextlib

    import torch

    B = len(sequences)
    T = max(len(s) for s in sequences)
    ids = torch.zeros((B, T), dtype=torch.long)
    att = torch.zeros((B, T), dtype=torch.long)
    for b, s in enumerate(sequences):
        ids[b, : len(s)] = torch.tensor(list(s), dtype=torch.long)
        att[b, : len(s)] = 1
    device = next(model.parameters()).device
    ids, att = ids.to(device), att.to(device)
    with (context or contextlib.nullcontext()), (contextlib.nullcontext() if grad else torch.no_grad()):
        logits = model(input_ids=ids, attention_mask=att).logits[:, :-1]
        if logits.dtype in (torch.bfloat16, torch.float16):  # log-softmax in fp32 (fp32/fp64 stay as they are)
            logits = logits.float()
        lp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return lp * att[:, 1:].to(lp.dtype)
