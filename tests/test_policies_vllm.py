"""VLLMEngine on the real SmolLM2-135M (fp32, 2 threads): rollout log-probs == score log-probs, bit for bit.

*Bit-consistent RL* contract (DESIGN.md "Engines and numerics"): diff max = mean = std = k3 = 0
exactly, across batch composition (alone vs among 16 of mixed lengths), long and short prompts,
three LoRA adapters and no adapter in one batch, and after a new adapter version is loaded.
Slow (vLLM start + SmolLM2): run with ``--full``.
"""

from __future__ import annotations


import pytest

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")


def role_adapters(root):
    """SmolLM2-135M with the three role adapters at rank 8, each randomized (seeds 10, 11, 12,
    scale 0.05) and saved as ``<role>@0`` under ``root``: ``(peft model, tokenizer, backbone path)``."""
    from policies.adapters import ROLES, attach_role_adapters, lora_config, randomize_adapter, save_adapter
    from policies.backbone import load_backbone

    model, tok, path = load_backbone()
    pm = attach_role_adapters(model, config=lora_config(r=8, alpha=16))
    for i, r in enumerate(ROLES):
        randomize_adapter(pm, r, seed=10 + i, scale=0.05)
        save_adapter(pm, f"{r}@0", root)
    return pm, tok, path


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    pytest.importorskip("vllm")
    from policies.adapters import ROLES
    from policies.engines import VLLMEngine

    root = tmp_path_factory.mktemp("adapters")
    pm, tok, path = role_adapters(root)
    engine = VLLMEngine(path, max_model_len=1024, max_num_seqs=16, max_loras=4, threads=2,
                        kv_cache_gib=1, seed=0)
    for r in ROLES:
        engine.add_adapter(f"{r}@0", root / f"{r}@0")
    return engine, pm, tok, root


def _requests(tok, n=16, seed=0, adapters=(None, "executor@0", "curriculum@0", "adversary@0"),
              max_new_tokens=8):
    """n prompts: a shared chat prefix (prefix caching) + 5 … 650 seeded random tokens."""
    from policies.engines import GenerationRequest

    prefix = tok.apply_chat_template([{"role": "user", "content": "Fill in the form."}],
                                     tokenize=True, add_generation_prompt=False)
    if hasattr(prefix, "keys"):
        prefix = prefix["input_ids"]
    g = torch.Generator().manual_seed(seed)
    lengths = [5, 650, 40, 300, 12, 520, 90, 260, 8, 610, 150, 33, 400, 70, 200, 480][:n]
    reqs = []
    for i, L in enumerate(lengths):
        ids = list(prefix) + torch.randint(200, 40000, (L,), generator=g).tolist()
        reqs.append(GenerationRequest(tuple(ids), adapters[i % len(adapters)],
                                      max_new_tokens=max_new_tokens, seed=1000 + i))
    return reqs


def _diff(engine, gens):
    from policies import numerics
    from policies.engines import completion_scores

    sc = completion_scores(engine, gens)
    r = torch.tensor([x for g in gens for x in g.logprobs], dtype=torch.float32)
    t = torch.tensor([x for s in sc for x in s], dtype=torch.float32)
    return numerics.diff_report(r, t)


@pytest.fixture(scope="module")
def batch0(setup):
    engine, _, tok, _ = setup
    reqs = _requests(tok)
    return reqs, engine.generate(reqs)


def test_rollout_equals_score_in_a_mixed_batch(setup, batch0):
    engine, _, tok, _ = setup
    _, gens = batch0
    assert sum(len(g.token_ids) for g in gens) >= 100
    assert {str(g.adapter) for g in gens} == {"None", "executor@0", "curriculum@0", "adversary@0"}
    rep = _diff(engine, gens)
    assert (rep.max, rep.mean, rep.std, rep.k3) == (0.0, 0.0, 0.0, 0.0)
    assert rep.n_equal == rep.n_tokens


def test_alone_equals_in_a_batch(setup, batch0):
    engine, _, tok, _ = setup
    reqs, batch = batch0
    for i in (0, 1, 6, 11):  # short & long, every adapter and none
        alone = engine.generate([reqs[i]])[0]
        assert alone.token_ids == batch[i].token_ids
        assert alone.logprobs == batch[i].logprobs  # exact float equality
    # scoring grouping: one sequence alone vs after others gives the same values
    seq = batch[1].sequence
    assert engine.score([seq], "executor@0") == engine.score([batch[0].sequence, seq],
                                                             [None, "executor@0"])[1:]


def test_without_detokenize_the_same_tokens_log_probs_and_text(setup, batch0):
    """VLLMEngine(detokenize=False) (vLLM returns ids and flat log-probs only; the text decoded
    once per completion): the same tokens, log-probs (exact) and text as vLLM's own incremental
    detokenizer, on random-token prompts over every adapter and none, and on a chat prompt that
    ends its turn with the end-of-sequence token."""
    from policies.engines import GenerationRequest

    engine, _, tok, _ = setup
    reqs, batch = batch0
    chat = tok.apply_chat_template([{"role": "user", "content": "Say hello in three words."}],
                                   tokenize=True, add_generation_prompt=True)
    chat = list(chat["input_ids"] if hasattr(chat, "keys") else chat)
    reqs = [*reqs, GenerationRequest(tuple(chat), None, max_new_tokens=40, seed=5, temperature=0.0)]
    batch = [*batch, engine.generate(reqs[-1:])[0]]
    assert batch[-1].finish_reason == "stop" and batch[-1].token_ids[-1] == tok.eos_token_id
    engine.detokenize = False
    try:
        assert engine.output_options() == {"detokenize": False, "flat_logprobs": True}
        light = engine.generate(reqs)
    finally:
        engine.detokenize = True
    assert [g.token_ids for g in light] == [g.token_ids for g in batch]
    assert [g.logprobs for g in light] == [g.logprobs for g in batch]
    assert [g.text for g in light] == [g.text for g in batch]
    assert batch[-1].text.strip() and "<|im_end|>" not in light[-1].text


def test_new_adapter_version(setup):
    from policies.adapters import randomize_adapter, save_adapter

    engine, pm, tok, root = setup
    randomize_adapter(pm, "executor", seed=77, scale=0.05)
    path = save_adapter(pm, "executor@1", root)
    lid = engine.add_adapter("executor@1", path)
    assert lid == 4
    adapters = (None, "executor@1", "curriculum@0", "adversary@0", "executor@0")
    reqs = _requests(tok, n=10, seed=1, adapters=adapters)
    gens = engine.generate(reqs)
    rep = _diff(engine, gens)
    assert (rep.max, rep.mean, rep.std, rep.k3) == (0.0, 0.0, 0.0, 0.0)
    # the new version is used (it changes the numbers) ...
    same_prompt = [r for r in reqs[:1]]
    from dataclasses import replace
    v0 = engine.generate([replace(same_prompt[0], adapter="executor@0")])[0]
    v1 = engine.generate([replace(same_prompt[0], adapter="executor@1")])[0]
    assert v0.logprobs != v1.logprobs
    # ... and with all four adapter slots resident, backbone rows in a batch equal backbone alone
    none_idx = [i for i, r in enumerate(reqs) if r.adapter is None]
    for i in none_idx[1:2]:  # the 520-token prompt
        alone = engine.generate([reqs[i]])[0]
        assert alone.token_ids == gens[i].token_ids and alone.logprobs == gens[i].logprobs


def test_reloaded_adapter_is_bit_identical(setup, tmp_path):
    from policies.adapters import load_adapter, save_adapter

    engine, pm, tok, root = setup
    seq = _requests(tok, n=2)[1].prompt_ids[:300]
    before = engine.score([seq], "curriculum@0")[0]
    # load the saved version into the peft model, save it again elsewhere, register as a new id
    load_adapter(pm, "curriculum@0", root)
    path = save_adapter(pm, "curriculum@0", tmp_path)
    engine.add_adapter("curriculum@0", path)
    after = engine.score([seq], "curriculum@0")[0]
    assert after == before
