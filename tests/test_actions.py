import pytest

from tests.fuzz import fuzz_strings
from forms_bench.actions import Action, ActionParseError, action_prompt, parse_action, tool_schemas


@pytest.mark.parametrize("text,expected", [
    ("fill('12', 'Jane Doe')", Action("fill", ("12", "Jane Doe"))),
    ("  click(20)\n", Action("click", ("20",))),
    ("I will submit now: click('20')", Action("click", ("20",))),
    ("```python\nselect_option(\"14\", \"Express\")\n```", Action("select_option", ("14", "Express"))),
    ("fill(bid='3', value=\"it's (really) fine\")", Action("fill", ("3", "it's (really) fine"))),
    ("fill('3', 'line1\\nline2')", Action("fill", ("3", "line1\nline2"))),
    ("send_msg_to_user('Ünïcödé ✓')", Action("send_msg_to_user", ("Ünïcödé ✓",))),
    ("noop()", Action("noop", ())),
    ("uncheck('15')", Action("uncheck", ("15",))),
])
def test_parse_valid(text, expected):
    assert parse_action(text) == expected
    assert parse_action(expected.to_text()) == expected


@pytest.mark.parametrize("text,message", [
    ("", "empty action"),
    ("click('1') click('2')", "found 2 calls; exactly one action per step is allowed"),
    ("fill('1')", "fill: missing argument(s) value"),
    ("click('1', '2')", "click takes 1 argument(s) (bid), got 2"),
    ("noop(1)", "noop takes 0 argument(s) (none), got 1"),
    ("type('1', 'x')", "unknown action `type`"),
    ("__import__('os').system('touch /tmp/advsim-pwned')", "unknown action `__import__`"),
    ("fill('1', 'unterminated)", "invalid call syntax in `fill('1', 'unterminated)`: unterminated string literal"),
    ("fill('1', 'x'", "no complete call found (unbalanced parentheses or quotes?)"),
    ("click(bid=x)", "click: argument `bid` must be a literal"),
    ("click(['a'])", "click: argument `bid` must be a string, got list"),
    ("fill('1', value='a', value='b')", "fill: argument `value` given twice"),
    ("fill('1', 'a', extra='b')", "fill: unknown argument `extra`; expected bid, value"),
    ("click(*args)", "click: *args/**kwargs are not allowed"),
    ("click(-1)", "click: argument `bid` must be a string, got int"),
    (None, "action must be a string, got NoneType"),
    # a 10-token model output: literal_eval refuses it cleanly; the message once came from
    # ast.unparse, which recursed past the stack limit (RecursionError, not a parse error)
    pytest.param("click(" + "-" * 330 + "1)",
                 "click: argument `bid` must be a literal (a quoted string or a number), got `---", id="330-minus"),
    pytest.param("fill('1', " + "not " * 500 + "x)",
                 "fill: argument `value` must be a literal (a quoted string or a number), got `not not", id="500-not"),
    pytest.param("fill('1', " + "not " * 2000 + "x)",
                 "call has more than 512 tokens (`fill('1', not not", id="2000-not"),
    pytest.param("click(bid=a" + "[0]" * 160 + ")",
                 "click: argument `bid` must be a literal (a quoted string or a number), got `a[0][0]", id="160-subscripts"),
    pytest.param("click(bid=a" + "[0]" * 400 + ")", "call has more than 512 tokens (`click(bid=a[0][0]", id="400-subscripts"),
])
def test_parse_errors_are_precise(text, message):
    with pytest.raises(ActionParseError) as exc:
        parse_action(text)
    assert message in str(exc.value)


def test_prompt_and_schema_come_from_the_same_definitions():
    prompt = action_prompt()
    names = [s["function"]["name"] for s in tool_schemas()]
    assert names == ["fill", "select_option", "check", "uncheck", "click", "send_msg_to_user", "noop"]
    for n in names:
        assert f"\n{n}(" in prompt
    fill = tool_schemas()[0]["function"]
    assert fill["parameters"]["required"] == ["bid", "value"]
    assert fill["description"].startswith("Fill the text box")


def test_fuzzed_actions_never_raise_anything_but_parse_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for s in fuzz_strings(10_000):
        try:
            parse_action(s)
        except ActionParseError:
            pass
    assert list(tmp_path.iterdir()) == []


def test_an_invalid_escape_in_model_text_parses_without_a_warning():
    """Model outputs are full of backslashes: ``ast`` would emit a DeprecationWarning (3.11) or
    SyntaxWarning (3.12) for '\\_' on every such action; the parser keeps the text and stays quiet."""
    import warnings

    from forms_bench.actions import parse_action

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse_action(r"fill('1', 'a\_b')").args == ("1", "a\\_b")


def test_a_long_expression_gets_one_message_whatever_the_recursion_limit():
    """A 4,000-term sum (a syntax tree 4,000 deep) is refused by its token count before parsing,
    so the message does not depend on whether the parser would have recursed past the limit; a
    call just under the count is parsed and judged by its arguments."""
    import sys

    long_sum = "click('a', " + "+".join(["1"] * 4000) + ")"
    short_sum = "click('a', " + "+".join(["1"] * 250) + ")"  # 506 tokens
    old = sys.getrecursionlimit()
    try:
        for limit in (1000, 5000):
            sys.setrecursionlimit(limit)
            with pytest.raises(ActionParseError, match=r"^call has more than 512 tokens \(`click\('a', 1\+1"):
                parse_action(long_sum)
            with pytest.raises(ActionParseError, match=r"^click takes 1 argument\(s\) \(bid\), got 2$"):
                parse_action(short_sum)
    finally:
        sys.setrecursionlimit(old)
    with pytest.raises(ActionParseError, match="unterminated string literal"):  # the tokenizer gives up: ast says why
        parse_action("fill('1', 'x" + " y" * 600 + ")")
