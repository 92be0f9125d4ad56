"""JSON nesting is bounded by one fixed limit, whatever the interpreter's recursion limit
(forms_bench.unique_keys.check_json_depth)."""

import json
import sys

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
    assert messages == ["curriculum: invalid JSON (nested deeper than 200 levels at character 211)"] * 2
