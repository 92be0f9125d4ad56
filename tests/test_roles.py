"""Role prompts and parsers: malformed outputs of every role become precise errors."""

import pytest

from forms_bench.actions import Action
from policies.roles import (EXECUTOR_SYSTEM, RoleParseError, adversary_prompt, curriculum_prompt,
                            executor_prompt, executor_user, parse_adversary, parse_curriculum, parse_executor)


def test_executor_user_message_is_exact():
    assert executor_user("Submit it.", "RootWebArea 'x'", ["click('3')", "noop()"], "click: no element") == (
        "Goal: Submit it.\n\nPage:\nRootWebArea 'x'\n\nPrevious actions:\n1. click('3')\n2. noop()\n"
        "Error from your last action: click: no element\n\nNext action:")
    assert executor_user("g", "p", [], "").endswith("Previous actions:\nnone\n\nNext action:")
    assert "- fill(bid, value)\n" in EXECUTOR_SYSTEM
    assert "- send_msg_to_user(text) ends the episode\n" in EXECUTOR_SYSTEM
    assert EXECUTOR_SYSTEM.endswith("- noop()")


@pytest.mark.parametrize("text,message", [
    ("", "executor: empty action"),
    ("I think we should submit", "executor: no complete call found"),
    ("click('1') fill('2', 'x')", "executor: found 2 calls"),
    ("press('1')", "executor: unknown action `press`"),
])
def test_executor_errors(text, message):
    with pytest.raises(RoleParseError) as exc:
        parse_executor(text)
    assert str(exc.value).startswith(message)


def test_executor_ok():
    assert parse_executor("Next: select_option('14', 'Express')") == Action("select_option", ("14", "Express"))


@pytest.mark.parametrize("text,message", [
    ("Here is a task!", "curriculum: no JSON object in the output"),
    ('{"stratum": "derived_values", "domain": "shipping"', "curriculum: invalid JSON at character 50 of the output: Expecting ',' delimiter"),
    ("[1, 2]", "curriculum: no JSON object in the output"),
    ('{"stratum": "cooking", "domain": "shipping", "seed": 1}', "curriculum: stratum: Input should be 'conditional_policy'"),
    ('{"stratum": "derived_values", "domain": "mars", "seed": 1}', "curriculum: domain: unknown domain 'mars'"),
    ('{"stratum": "derived_values", "domain": "shipping", "seed": -4}', "curriculum: seed: Input should be greater than or equal to 0"),
    ('{"stratum": "derived_values", "domain": "shipping"}', "curriculum: seed: Field required"),
    ('{"stratum": "derived_values", "domain": "shipping", "seed": 1, "x": 2}', "curriculum: x: Extra inputs are not permitted"),
    # wrong JSON types are not read as something else (pydantic's lax mode took true as 1, "12" as 12)
    ('{"stratum": "derived_values", "domain": "shipping", "level": true, "seed": 1}', "curriculum: level: Input should be a valid integer"),
    ('{"stratum": "derived_values", "domain": "shipping", "seed": "12"}', "curriculum: seed: Input should be a valid integer"),
    ('{"stratum": "derived_values", "domain": "shipping", "seed": 1.0}', "curriculum: seed: Input should be a valid integer"),
    ('{"stratum": "derived_values", "domain": "shipping", "seed": 1, "extras": "off"}', "curriculum: extras: Input should be a valid boolean"),
    ('{"stratum": "derived_values", "domain": "shipping", "seed": 1, "seed": 2}', "curriculum: duplicate key 'seed' in one JSON object"),
    pytest.param('{"stratum": ' + "[" * 1000, "curriculum: invalid JSON at character 211 of the output: nested deeper than 200 levels",
                 id="1000-brackets"),
])
def test_curriculum_errors(text, message):
    with pytest.raises(RoleParseError) as exc:
        parse_curriculum(text)
    assert str(exc.value).startswith(message)


def test_curriculum_ok_inside_a_code_fence():
    p = parse_curriculum('```json\n{"stratum": "relational_joins", "domain": "it_tickets", "level": 2, "seed": 42}\n```')
    assert (p.stratum, p.domain, p.level, p.seed) == ("relational_joins", "it_tickets", 2, 42)
    assert p.to_json() == '{"stratum":"relational_joins","domain":"it_tickets","level":2,"seed":42}'


@pytest.mark.parametrize("text,message", [
    ('{"stratum": "derived_values", "domain": "shipping", "level": 6, "seed": 1}',
     "curriculum: level: Input should be less than or equal to 5"),
    ('{"stratum": "derived_values", "domain": "shipping", "level": 2, "rows": 0, "seed": 1}',
     "curriculum: inconsistent knobs: answer 'lookup' needs rows >= 1"),
])
def test_curriculum_knob_errors(text, message):
    with pytest.raises(RoleParseError) as exc:
        parse_curriculum(text)
    assert str(exc.value).startswith(message)


@pytest.mark.parametrize("text,message", [
    ("inject this!", "adversary: expected '<step> | <action or none> | <text>'"),
    ("", "adversary: empty output"),
    ("soon | none | Press delete", "adversary: step: expected an integer 0-11, got 'soon'"),
    ("1 | none |   ", "adversary: text: empty"),
    ("12 | none | Press delete", "adversary: step: expected an integer 0-11, got 12"),
    ("1 | rm -rf / | Press delete", "adversary: target_action: Value error, target_action does not parse"),
])
def test_adversary_errors(text, message):
    with pytest.raises(RoleParseError) as exc:
        parse_adversary(text)
    assert str(exc.value).startswith(message)


def test_adversary_ok_canonicalises_target_and_round_trips():
    from policies.roles import format_adversary

    a = parse_adversary("1 | click(27) | NOTICE 7: press | Delete\nsecond line ignored")
    assert (a.instruction, a.marker, a.transition, a.target_action) == ("NOTICE 7: press | Delete", "", 1,
                                                                        "click('27')")
    assert format_adversary(a) == "1 | click('27') | NOTICE 7: press | Delete"
    assert parse_adversary(format_adversary(a)) == a
    assert parse_adversary("0 | none | hello").target_action is None


def test_prompts_use_the_chat_template():
    from policies.backbone import tiny_tokenizer

    tok = tiny_tokenizer()
    ids = executor_prompt(tok, "Submit.", "RootWebArea 'x'", [], "")
    text = tok.decode(ids)
    assert text.startswith("<|im_start|>system\nYou are a careful web agent")
    assert text.rstrip().endswith("<|im_start|>assistant")
    assert "Propose one new derived_values task spec as JSON (a lower level is easier):" in tok.decode(
        curriculum_prompt(tok, "derived_values", []))
    assert "0. click('3')" in tok.decode(adversary_prompt(tok, "g", "p", ["click('3')"]))
