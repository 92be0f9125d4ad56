"""Malformed configs fail before any work, with a message naming the field (issue 11, item 11)."""

from pathlib import Path

import pytest
import yaml

from advsim.config import ConfigError, config_from_dict, load_config

DEMO = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


@pytest.mark.parametrize("text,message", [
    ("name: ../../etc/x", "name: String should match pattern"),
    ("model: {backbone: llama-3-8b-instruct}", "model.backbone: 'llama-3-8b-instruct' is neither one of"),
    ("eval: {tasks: 'sample:abc'}", "eval.tasks: 'sample:abc': expected sample:N"),
    ("model: {kv_cache_gib: 10000}", "model.kv_cache_gib: 10000 GiB is more than this machine's memory"),
    ("rollout: {max_new_tokens: 5000}", "rollout.max_new_tokens: 5000 must be below model.max_model_len (2048)"),
    ("eval: {levels: [0, 9]}", "eval.levels: [9] outside the difficulty levels 0-5"),
])
def test_bad_fields_are_named(text, message):
    with pytest.raises(ConfigError) as exc:
        config_from_dict(yaml.safe_load(text))
    assert message in str(exc.value)


def test_duplicate_block_and_missing_section_in_a_file(tmp_path):
    demo = DEMO.read_text()
    dup = tmp_path / "dup.yaml"
    dup.write_text(demo + "stage1:\n  proposals: 3\n")
    with pytest.raises(ConfigError, match="duplicate key 'stage1'"):
        load_config(dup)
    data = yaml.safe_load(demo)
    del data["stage2"]
    missing = tmp_path / "missing.yaml"
    missing.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="missing section"):
        load_config(missing)
    data["stages"] = [1]
    missing.write_text(yaml.safe_dump(data))
    assert load_config(missing).stages == [1]  # stage 2 is not run: its section is not needed


def test_cli_rejects_before_any_work(tmp_path):
    from typer.testing import CliRunner

    from advsim.cli import app

    bad = tmp_path / "bad.yaml"
    bad.write_text(DEMO.read_text().replace("backbone: smollm2-135m-instruct", "backbone: llama-3-8b-instruct"))
    res = CliRunner().invoke(app, ["train", "--config", str(bad), "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 2 and "model.backbone" in res.output
    assert not (tmp_path / "run").exists()
