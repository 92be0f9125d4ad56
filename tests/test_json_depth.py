"""JSON nesting is bounded by one fixed limit, whatever the interpreter's recursion limit
(forms_bench.unique_keys.check_json_depth)."""

import json
import sys
from pathlib import Path

import pytest

from forms_bench.unique_keys import MAX_JSON_DEPTH, JsonDepthError, check_json_depth, loads
from policies.roles import RoleParseError, parse_curriculum


def test_the_limit_is_exact_and_brackets_in_strings_do_not_count():
    assert MAX_JSON_DEPTH == 200
    ok = "[" * 200 + "]" * 200
    check_json_depth(ok)
    assert loads(ok) == json.loads(ok)
    with pytest.raises(JsonDepthError) as exc:
        loads("[" * 201 + "]" * 201)
    assert (exc.value.msg, exc.value.pos, exc.value.lineno, exc.value.colno) == ("nested deeper than 200 levels", 200, 1, 201)
    assert isinstance(exc.value, json.JSONDecodeError)
    # brackets inside strings, escaped quotes included, are text
    obj = loads('{"a": "' + "[" * 500 + '\\\\", "b": "\\"' + "{" * 500 + '"}')
    assert obj == {"a": "[" * 500 + "\\", "b": '"' + "{" * 500}
    # the scan stops where the first value closes: text after it is not this check's business
    check_json_depth("[1] " + "[" * 1000, limit=5)
    check_json_depth('"x" ' + "[" * 1000, limit=5)  # a string value: nothing to check
    with pytest.raises(JsonDepthError) as exc:
        check_json_depth('  {"a": [[[', limit=3)
    assert exc.value.pos == 10


def test_a_raised_recursion_limit_changes_nothing():
    """json's C decoder stops at the interpreter's recursion limit, which libraries raise (torch's
    inductor does): a CI run that imported it first parsed 1,000 brackets without a RecursionError
    and gave another message. The fixed limit gives the same error either way."""
    text = '{"stratum": ' + "[" * 1000
    old = sys.getrecursionlimit()
    messages = []
    try:
        for limit in (old, 100_000):
            sys.setrecursionlimit(limit)
            with pytest.raises(RoleParseError) as exc:
                parse_curriculum(text)
            messages.append(str(exc.value))
    finally:
        sys.setrecursionlimit(old)
    assert messages == ["curriculum: invalid JSON at character 211 of the output: nested deeper than 200 levels"] * 2


def test_positions_count_from_the_models_output_and_json_whitespace_only():
    with pytest.raises(RoleParseError) as exc:
        parse_curriculum('Sure! Here is the spec:\n{"a": 1,}')
    assert str(exc.value) == "curriculum: invalid JSON at character 32 of the output: Expecting property name enclosed in double quotes"
    with pytest.raises(RoleParseError) as exc:
        parse_curriculum('x {"a": "abc')
    assert str(exc.value) == "curriculum: invalid JSON at character 8 of the output: Unterminated string"
    # NBSP is not JSON whitespace: json's own error at character 0, not a depth error further on
    with pytest.raises(json.JSONDecodeError) as exc:
        loads("\xa0" + "[" * 201)
    assert not isinstance(exc.value, JsonDepthError) and exc.value.pos == 0


def test_yaml_aliases_and_merge_keys_are_refused_with_their_place():
    import yaml

    from forms_bench.unique_keys import unique_key_loader

    def problem(text):
        with pytest.raises(yaml.YAMLError) as exc:
            yaml.load(text, Loader=unique_key_loader())  # noqa: S506 - a SafeLoader subclass
        m = exc.value.problem_mark
        return exc.value.problem, m.line + 1, m.column + 1

    alias = "aliases (*name) are not supported: write the value out"
    assert problem("a: &x [1]\nb: *x") == (alias, 2, 4)
    assert problem("a: &a {x: 1}\nb: {<<: *a, y: 2}") == (alias, 2, 9)
    assert problem("b: {<<: {x: 1}, y: 2}") == ("merge keys (<<) are not supported: write the keys out", 1, 5)
    # billion laughs: 9 aliases per level, 8 levels — once 351 MB in an error message, now refused at the first alias
    lol = "goal: g\ntargets:\n  Amount: [&l0 [" + ",".join(['"lol"'] * 9) + "]"
    lol += "".join(f", &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 8)) + "]\n"
    assert problem(lol)[0] == alias
    assert yaml.load("a: &x 1\nb: [2, {c: 3}]", Loader=unique_key_loader()) == {"a": 1, "b": [2, {"c": 3}]}  # an anchor alone is fine
    # PyYAML builds these three past the duplicate-key check (!!omap [a: 1, a: 2] loaded)
    assert problem("x: !!omap [a: 1, a: 2]") == ("!!omap is not supported: write a list or a mapping", 1, 4)
    assert problem("x: !!set {a, b}")[0] == "!!set is not supported: write a list or a mapping"
    assert problem("!!pairs [a: 1]")[0] == "!!pairs is not supported: write a list or a mapping"


def test_a_yaml_document_at_the_depth_limit_loads_from_a_deep_caller():
    """Mappings are constructed from PyYAML's queue, not by recursion: 200 nested mappings (the
    limit) load under a recursion limit of 700 (a recursive constructor needed 825 frames), in
    flow and block style; duplicate keys deep inside are still found."""
    import yaml

    from forms_bench.unique_keys import unique_key_loader

    flow = "{a: " * MAX_JSON_DEPTH + "1" + "}" * MAX_JSON_DEPTH
    block = "\n".join("  " * i + "a:" for i in range(MAX_JSON_DEPTH)) + " 1"
    old = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(700)
        for text in (flow, block):
            value = yaml.load(text, Loader=unique_key_loader())  # noqa: S506 - a SafeLoader subclass
            for _ in range(MAX_JSON_DEPTH):
                value = value["a"]
            assert value == 1
        with pytest.raises(yaml.YAMLError, match="duplicate key 'b'"):
            yaml.load("{a: " * 150 + "{b: 1, b: 2}" + "}" * 150, Loader=unique_key_loader())  # noqa: S506
    finally:
        sys.setrecursionlimit(old)


def test_a_saved_config_writes_no_aliases(monkeypatch):
    """A config's YAML writes a value that two fields share out twice: ``yaml.safe_dump`` wrote
    ``&id001`` / ``*id001``, which every loader of ours refuses. (``asdict`` copies containers
    today, so this guards ``to_dict``'s future.)"""
    import yaml

    from advsim import config as config_mod
    from forms_bench.unique_keys import unique_key_loader

    cfg = config_mod.load_config(Path(config_mod.__file__).parent.parent / "configs" / "demo.yaml")
    shared = [64, 256]
    data = {**cfg.to_dict(), "shared_a": shared, "shared_b": shared}
    monkeypatch.setattr(type(cfg), "to_dict", lambda self: data)
    text = config_mod.dump_config(cfg)
    assert "shared_a:\n- 64\n- 256\nshared_b:\n- 64\n- 256\n" in text and "&" not in text
    assert yaml.load(text, Loader=unique_key_loader()) == data  # noqa: S506 - a SafeLoader subclass


def test_run_and_suite_files_nested_too_deeply_are_clear_errors(tmp_path):
    from advsim.run import RunDir, RunFileError
    from worlds.ledger.suite import load_suite
    from worlds.ledger.validation import SuiteValidationError

    deep = "[" * 100_000 + "]" * 100_000
    run = RunDir(tmp_path / "r")
    (run.checkpoint_dir("warm") / "state.json").parent.mkdir(parents=True, exist_ok=True)
    (run.checkpoint_dir("warm") / "state.json").write_text(deep)
    with pytest.raises(RunFileError, match="cannot be read: nested deeper than 200 levels: line 1 column 201"):
        run.state("warm")
    (run.path / "events.jsonl").write_text('{"seq": 1, "seq": 2}\n')
    with pytest.raises(RunFileError, match=r"events.jsonl, line 1: not a JSON row \(duplicate key 'seq'\)"):
        run.read("events.jsonl")
    (tmp_path / "s.json").write_text(deep)
    with pytest.raises(SuiteValidationError, match="^s.json: not a valid JSON suite: nested deeper than 200 levels: line 1 column 201"):
        load_suite(tmp_path / "s.json", verify=False)
