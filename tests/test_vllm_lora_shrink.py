"""The LoRA shrink tile patch (policies/vllm_lora_shrink.py): its setting, its config and how it
installs; the GPU's consistency rows check the patched engine end to end."""

import types

import pytest

from policies import vllm_lora_shrink as shrink


def test_parse_tile_reads_vllm_and_rows_by_k():
    assert shrink.parse_tile("vllm") is None
    assert shrink.parse_tile("16x256") == (16, 256)
    assert shrink.parse_tile("32x16") == (32, 16)


@pytest.mark.parametrize("bad", ["", "16", "16x", "x256", "8x256", "16x300", "16X256", " 16x256", "16x256 ",
                                 "016x256", "16x0256", "64x256", "128x16", "16x512", "1" * 5000 + "x256", None, 16])
def test_parse_tile_refuses_anything_else_by_name(bad):
    with pytest.raises(ValueError, match="lora_shrink must be 'vllm' or ROWSxK") as exc:
        shrink.parse_tile(bad)
    assert len(str(exc.value)) < 200  # a long value is cut short in the message


def _vllm_like_configs(op_type, max_loras, batch, hidden_size, rank, num_slices, add_inputs=None):
    """vLLM 0.22's batch-invariant defaults (utils.get_lora_op_configs), for shrink and expand."""
    if op_type == "shrink":
        return {"block_m": 32, "block_n": 16, "block_k": 256 if batch < 128 else 32, "split_k": 1,
                "num_warps": 4, "num_ctas": 1, "group_size_m": 8, "num_stages": 2, "max_nreg": None}
    assert op_type == "expand"
    return {"block_m": 64, "block_n": 64 if num_slices > 1 else 128, "block_k": 32, "num_warps": 4,
            "num_ctas": 1, "num_stages": 2, "max_nreg": None}


def test_wrapped_configs_fix_the_shrink_tile_at_every_batch_and_leave_expand():
    get = shrink.wrap(_vllm_like_configs, 16, 256)
    for batch in (1, 16, 127, 128, 256, 32768):
        cfg = get("shrink", max_loras=5, batch=batch, hidden_size=576, rank=8, num_slices=3)
        assert (cfg["block_m"], cfg["block_k"], cfg["split_k"], cfg["block_n"]) == (16, 256, 1, 16)
        assert set(cfg) == set(_vllm_like_configs("shrink", 5, batch, 576, 8, 3))  # every key vLLM reads
    # vLLM's own config switches its K step at 128 rows; the wrapped one does not
    assert _vllm_like_configs("shrink", 5, 127, 576, 8, 3)["block_k"] == 256
    assert _vllm_like_configs("shrink", 5, 128, 576, 8, 3)["block_k"] == 32
    assert get("expand", 5, 256, 576, 8, 3, add_inputs=True) == _vllm_like_configs("expand", 5, 256, 576, 8, 3)
    a = get("shrink", 5, 1, 576, 8, 1)
    a["block_m"] = 99  # a caller's change does not leak into the next call
    assert get("shrink", 5, 1, 576, 8, 1)["block_m"] == 16
    assert get.__wrapped__ is _vllm_like_configs


def test_install_rebinds_the_modules_function_once_per_process(monkeypatch):
    monkeypatch.setattr(shrink, "_STATE", {"tile": None, "reason": "not installed"})
    mod = types.SimpleNamespace(__name__="fake_lora_shrink_op", get_lora_op_configs=_vllm_like_configs)
    assert shrink.install(16, 256, module=mod) == (True, "LoRA shrink: 16 rows x K step 256 at every batch size, "
                                                          "split-K off")
    assert mod.get_lora_op_configs("shrink", 5, 256, 576, 8, 3)["block_k"] == 256
    assert shrink.installed_tile() == (16, 256)
    assert shrink.install(16, 256, module=mod)[0] is True  # the same tile again: nothing changes
    assert mod.get_lora_op_configs.__wrapped__ is _vllm_like_configs
    ok, why = shrink.install(32, 64, module=mod)
    assert not ok and why == "LoRA shrink tile 16x256 is already installed in this process"


def test_install_refuses_a_module_without_the_function(monkeypatch):
    monkeypatch.setattr(shrink, "_STATE", {"tile": None, "reason": "not installed"})
    ok, why = shrink.install(16, 256, module=types.SimpleNamespace(__name__="other_layout"))
    assert not ok and why == "other_layout has no get_lora_op_configs (another vLLM layout)"
    assert shrink.installed_tile() is None


def test_install_refuses_this_machines_vllm_by_version(monkeypatch):
    monkeypatch.setattr(shrink, "_STATE", {"tile": None, "reason": "not installed"})
    vllm = pytest.importorskip("vllm")
    ok, why = shrink.install(16, 256)
    assert not ok and why == f"vLLM {vllm.__version__}: the LoRA shrink tile is proven on 0.22.x only"


def test_engine_refuses_a_tile_off_cuda_before_loading_anything():
    from policies.engines.vllm_engine import VLLMEngine

    with pytest.raises(ValueError, match=r"lora_shrink '16x256' is for vLLM on CUDA with consistent=True .*"
                                         r"device is 'cpu'"):
        VLLMEngine("no-such-model", device="cpu", lora_shrink="16x256")
    with pytest.raises(ValueError, match="lora_shrink must be 'vllm' or ROWSxK"):
        VLLMEngine("no-such-model", device="cpu", lora_shrink="fast")


def test_bench_label_takes_the_tile_on_the_contract_only():
    from advsim.bench.cuda import engine_settings, is_contract

    assert engine_settings("contract+lora_shrink=16x256") == {"consistent": True, "cuda_graphs": True,
                                                              "lora_shrink": "16x256"}
    assert is_contract("contract+lora_shrink=16x256")
    with pytest.raises(ValueError, match="applies in batch-invariant mode only"):
        engine_settings("default+lora_shrink=16x256")
    with pytest.raises(ValueError, match="'contract\\+lora_shrink=16x257': lora_shrink must be"):
        engine_settings("contract+lora_shrink=16x257")


def test_config_field_defaults_to_the_tile_on_vllm_cuda_and_old_runs_keep_vllms(monkeypatch, tmp_path):
    """engine.lora_shrink: null resolves to '16x256' for vLLM on CUDA (the measured choice) and to
    'vllm' elsewhere, where a tile is an error; make_engine passes it on. A CUDA run saved before the
    field existed ran vLLM's tile: resuming it under today's default is a change whose error says
    to write 'vllm', which then resumes."""
    from advsim.config import ConfigError, config_from_dict
    from policies.engines import base
    from tests.test_train import TINY
    from tests.test_vllm_cuda_patches import (_capture_vllm_engine_kwargs, assert_a_cuda_only_text_field,
                                              assert_a_run_saved_before_the_field_resumes_with_its_value)

    cuda = assert_a_cuda_only_text_field(monkeypatch, "lora_shrink", "16x256", "32x64", "16x100",
                                         r"engine.lora_shrink must be 'vllm' or ROWSxK .*got '16x100'")
    for number in (16, 256, True):  # YAML: lora_shrink: 16, 0x100, yes
        with pytest.raises(ConfigError, match=rf"engine.lora_shrink: {number} is not 'vllm' or a tile ROWSxK \(quote "
                                              r"it, e.g. '16x256'\)"):
            config_from_dict({**TINY, "engine": {**cuda, "lora_shrink": number}})

    got = _capture_vllm_engine_kwargs(monkeypatch)
    cfg = config_from_dict({**TINY, "engine": cuda})
    base.make_engine(cfg.engine, backbone="x")
    assert got["lora_shrink"] == "16x256"

    assert_a_run_saved_before_the_field_resumes_with_its_value(monkeypatch, tmp_path, cfg, "lora_shrink", "vllm",
                                                               "16x256")


def test_engine_default_is_the_tile_for_the_cuda_contract_only():
    import inspect

    from policies.engines.vllm_engine import CUDA_SHRINK, VLLMEngine, _lora_shrink_tile

    assert inspect.signature(VLLMEngine).parameters["lora_shrink"].default is None
    assert CUDA_SHRINK == "16x256" and _lora_shrink_tile(CUDA_SHRINK, "cuda", True) == (16, 256)
    assert _lora_shrink_tile("vllm", "cuda", False) is None and _lora_shrink_tile("vllm", "cpu", True) is None
    with pytest.raises(ValueError, match="consistent=False"):
        _lora_shrink_tile("16x256", "cuda", False)  # the negative control keeps vLLM's split-K shrink
