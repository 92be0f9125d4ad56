"""The pipeline on an NVIDIA GPU (``engine.device: cuda``): skipped where CUDA is not available.

Run on the GPU machine with ``python -m pytest -q tests/test_gpu.py``. CPU CI covers the
configuration and its errors (``tests/test_config_validation.py``: ``device: cuda`` without
CUDA is a clear error).
"""

import math
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (an NVIDIA GPU)")]

from advsim.config import config_from_dict  # noqa: E402
from tests.test_train import TINY, WARMSTART, adapter_digests, tiny_io  # noqa: E402


def _cuda_cfg(**over):
    data = {**TINY, "warmstart": WARMSTART, "engine": {"kind": "torch", "device": "cuda", "dtype": "float32",
                                                       "consistency": "measure", "max_num_seqs": 64}}
    data.update(over)
    return config_from_dict(data)


def test_tiny_pipeline_trains_and_evaluates_on_cuda(tmp_path):
    """Warm start, two stage-1 and one stage-2 iteration and the per-level evaluation, every
    tensor on the GPU: the adapters move, every update's diff is finite and small, and a resumed
    run gives the same adapters."""
    from advsim.evaluate import evaluate
    from advsim.learner import Learner
    from advsim.train import train
    from policies.backbone import tiny_backbone

    cfg = _cuda_cfg()
    model, tok = tiny_backbone(seed=cfg.seed)
    learner = Learner(cfg, tmp_path / "r" / "adapters", model=model, tokenizer=tok)
    assert learner.device.type == "cuda" and next(learner.model.parameters()).device.type == "cuda"
    run = train(cfg, tmp_path / "r", learner=learner, io=tiny_io(tok))
    events = [e for e in run.read("events.jsonl") if "stage" in e]  # the warm start's row has none
    assert [(e["stage"], e["iteration"]) for e in events] == [(1, 1), (1, 2), (2, 1)]
    for e in events:
        d = e["executor"]["diff"]["max"]
        assert e["executor"]["samples"] > 0 and math.isfinite(d) and d < 1e-3
    digests = adapter_digests(tmp_path / "r")
    executor = sorted(k for k in digests if k.startswith("executor@"))
    assert len(executor) >= 3 and len({digests[k] for k in executor}) == len(executor)  # every update moved it
    results = evaluate(run.path, tasks="sample:1", seeds=1, browser=False, learner=learner, io=tiny_io(tok),
                       corpus_attacks=False)
    lv = results["checkpoints"]["robust-iter-1"]["levels"]["0"]["clean"]
    assert lv["n"] == 3 and 0.0 <= lv["rate"] <= 1.0

    # the same run in two parts (a fresh learner resumes after capability-iter-1) gives the same adapters
    model, tok = tiny_backbone(seed=cfg.seed)
    part = Learner(cfg, tmp_path / "p" / "adapters", model=model, tokenizer=tok)
    train(cfg, tmp_path / "p", learner=part, io=tiny_io(tok), stop_after="capability-iter-1")
    model, tok = tiny_backbone(seed=cfg.seed)
    again = Learner(cfg, tmp_path / "p" / "adapters", model=model, tokenizer=tok)
    train(cfg, tmp_path / "p", learner=again, io=tiny_io(tok), resume=True)
    assert adapter_digests(tmp_path / "p") == digests  # bit for bit (optim.deterministic_backward)


def test_real_backbone_scores_on_cuda_match_cpu():
    """The embedded backbone's per-token log-probs on the GPU (fp32, TF32 off) agree with the CPU's
    to 1e-3 nats: the same model, not a broken device path; and the checkpoint converted on this
    machine ends sequences with ``<|im_end|>`` as its GGUF says (this image's transformers 5.17 used
    to give ``<|im_start|>``). Skipped when the backbone is absent."""
    from policies.backbone import load_backbone, resolve_backbone
    from policies.engines import TorchEngine

    try:
        resolve_backbone()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    torch.backends.cuda.matmul.allow_tf32 = False
    model, tok, _ = load_backbone()
    assert (tok.eos_token, tok.eos_token_id, tok.pad_token_id, model.generation_config.eos_token_id) == \
        ("<|im_end|>", 2, 2, 2)
    seq = tok.encode("Fill the form: set Name to Ada Lovelace, then press Submit.")
    cpu = TorchEngine(model.eval(), tok).score([seq])[0]
    gpu = TorchEngine(model.to("cuda").eval(), tok).score([seq])[0]
    assert len(cpu) == len(gpu) == len(seq) - 1
    assert max(abs(a - b) for a, b in zip(cpu, gpu)) < 1e-3


def test_warm_start_is_bit_reproducible_on_cuda(tmp_path):
    """``optim.deterministic_backward``: the learner's SFT of the embedded backbone's executor
    adapter (float32 graph, as beside a vLLM engine; LoRA on the top 6 layers, so epoch 2 runs from
    the cached trunk states), twice from one seed on the GPU, gives bit-identical adapter weights.
    Sequences of 300-700 tokens, where PyTorch's memory-efficient SDPA backward splits its key
    reduction unless ``torch.use_deterministic_algorithms(True, warn_only=False)`` is in force (with
    ``warn_only=True`` it only warns). The run with the mode off is printed, not asserted: whether
    its float32 atomics reorder is up to the card. Skipped when the backbone is absent."""
    from safetensors.torch import load_file

    from advsim.learner import Learner
    from policies.backbone import resolve_backbone

    try:
        resolve_backbone()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    g = random.Random(0)
    examples = [([g.randrange(100, 49000) for _ in range(g.randint(300, 700))],
                 [g.randrange(100, 49000) for _ in range(24)]) for _ in range(24)]

    def warm_start(name: str, deterministic: bool) -> torch.Tensor:
        cfg = config_from_dict({**TINY, "model": {"backbone": "smollm2-135m-instruct", "lora_rank": 8,
                                                  "lora_alpha": 16, "lora_layers": 6},
                                "engine": {"kind": "torch", "device": "cuda", "dtype": "float32",
                                           "consistency": "measure"},
                                "optim": {**TINY["optim"], "deterministic_backward": deterministic}})
        learner = Learner(cfg, tmp_path / name / "adapters")
        out = learner.sft("executor", examples, epochs=2, learning_rate=3e-3, seed=1, micro_batch=4)
        assert out["steps"] == 12 and out["loss_last"] < out["loss_first"]
        w = load_file(str(tmp_path / name / "adapters" / "executor@1" / "adapter_model.safetensors"))
        return torch.cat([w[k].flatten().float() for k in sorted(w)])

    a, b = warm_start("a", True), warm_start("b", True)
    assert a.numel() > 400_000 and torch.equal(a, b)
    off = [warm_start("off-a", False), warm_start("off-b", False)]
    print(f"deterministic_backward off: {int((off[0] != off[1]).sum())} of {a.numel()} adapter weights differ "
          f"(max {float((off[0] - off[1]).abs().max()):.2e})")
