"""The action parser is linear in the length of its input (issue 11, item 1).

Before the fix every candidate ``name(`` re-tokenized the rest of the text:
``env.step("fill(" * 8000)`` took 154 s, the ledger's ``("get_charge(" * 2000)[:16384]`` 15.6 s
and ``Injection(target_action="noop(" * 2000)`` 7.3 s. The time limits below are CPU seconds of
this thread (a machine shared with a training run makes wall time meaningless) and are ~100x
what the linear scan needs.
"""

from __future__ import annotations

import json
import time

import gymnasium as gym
import pytest
from pydantic import ValidationError

import advsim  # noqa: F401  (registers the environments)
from forms_bench.actions import ACTION_SPECS, Action, ActionParseError, _call_spans, parse_action
from forms_bench.injection import Injection

NO_CALL = "no complete call found (unbalanced parentheses or quotes?)"


def cpu(fn):
    """(result, CPU seconds of this thread) of ``fn()``."""
    t0 = time.thread_time()
    out = fn()
    return out, time.thread_time() - t0


def test_web_env_step_on_a_looping_output_is_fast():
    env = gym.make("advsim/WebForms-v0").unwrapped
    obs, _ = env.reset(seed=0)
    page = obs["page"]
    (obs2, reward, terminated, truncated, info), secs = cpu(lambda: env.step("fill(" * 8000))
    assert secs < 1.0, f"40k characters took {secs:.2f} s CPU (was 154 s)"
    assert obs2["last_action_error"].startswith(NO_CALL)
    assert obs2["page"] == page and info["step"] == 1 and info["action"] is None
    assert (reward, terminated, truncated) == (0.0, False, False)


@pytest.mark.parametrize("text", ["click(" * 20_000, "fill('" * 20_000, "click([{" * 15_000,
                                  "click('''" * 12_000, "fill('\\" * 17_000, "click('\n" * 15_000])
def test_parse_action_rejects_adversarial_text_in_linear_time(text):
    t0 = time.thread_time()
    with pytest.raises(ActionParseError) as exc:
        parse_action(text)
    secs = time.thread_time() - t0
    assert str(exc.value).startswith(NO_CALL)
    assert secs < 1.0, f"{len(text)} characters took {secs:.2f} s CPU"


def test_ledger_env_step_on_a_looping_output_is_fast():
    env = gym.make("advsim/EvidenceLedger-v0").unwrapped
    case_id = next(c.id for c in env.suite.cases if "get_charge" in c.tools)
    env.reset(options={"case_id": case_id})
    text = ("get_charge(" * 2000)[:16384]  # within the action space's 16,384 characters
    (obs, reward, terminated, truncated, info), secs = cpu(lambda: env.step(text))
    assert secs < 1.0, f"{len(text)} characters took {secs:.2f} s CPU (was 15.6 s)"
    assert obs["last_action_error"].startswith(NO_CALL)
    assert info["tool"] is None and info["executed"] is False and info["step"] == 1


def test_injection_target_action_is_fast_to_reject():
    t0 = time.thread_time()
    with pytest.raises(ValidationError) as exc:
        Injection(instruction="hello world", target_action="noop(" * 2000)
    assert time.thread_time() - t0 < 1.0  # was 7.3 s
    assert "target_action does not parse: " + NO_CALL in str(exc.value)


def test_linear_growth_on_the_worst_input():
    """Doubling the input roughly doubles the time: 8x the length costs < 16x (quadratic: 64x)."""
    def best(text):
        times = []
        for _ in range(5):
            t0 = time.thread_time()
            with pytest.raises(ActionParseError):
                parse_action(text)
            times.append(time.thread_time() - t0)
        return min(times)

    small, large = best("fill(" * 2_000), best("fill(" * 16_000)
    assert large < 16 * max(small, 1e-4), (small, large)


@pytest.mark.parametrize("text,expected", [
    # a balanced call nested in one that never closes is still found
    ("fill('1', click('2')", Action("click", ("2",))),
    # a comment hides a bracket; "\r" ends a comment as "\n" does (tokenize's rule)
    ("click('3' # )\n)", Action("click", ("3",))),
    ("click('3' # )\r)", Action("click", ("3",))),
    # brackets and quotes inside triple-quoted strings, across lines
    ("fill('4', '''a ) ' \" (\nb''')", Action("fill", ("4", "a ) ' \" (\nb"))),
    ('fill("5", """x""")', Action("fill", ("5", "x"))),
    # escaped quotes and an escaped newline inside a literal
    ("fill('6', 'it\\'s )')", Action("fill", ("6", "it's )"))),
    ("fill('7', 'a\\\nb')", Action("fill", ("7", "ab"))),
    # prose with apostrophes before the call
    ("I'll say it's done: send_msg_to_user('ok')", Action("send_msg_to_user", ("ok",))),
])
def test_scanner_reads_literals_and_comments_as_python_does(text, expected):
    assert parse_action(text) == expected


def test_scanner_spans_and_messages():
    names = list(ACTION_SPECS)
    assert _call_spans("x fill('1', 'a') y click('2') z", names) == [(2, 16), (19, 29)]
    assert _call_spans("xfill('1', 'a') fill2('b')", names) == []  # whole identifiers only
    assert _call_spans("fill(" * 3 + "noop()", names) == [(15, 21)]
    assert _call_spans("fill('1', '''never closed", names) == []
    # a stray quote (unterminated on its line) is skipped, as tokenize reports it
    with pytest.raises(ActionParseError, match="unterminated string literal"):
        parse_action("fill('1', 'unterminated)")
    long_call = "fill('1', '" + "a" * 8987 + "')"
    assert len(long_call) == 9000
    with pytest.raises(ActionParseError, match="call is 9000 characters long; at most 8192"):
        parse_action("Here: " + long_call)


def test_bench_parser_measures_every_entry_point(tmp_path):
    from typer.testing import CliRunner

    from advsim.bench import parser as bench
    from advsim.cli import app

    payload = bench.measure(repeats=1, sizes=(2_000, 4_000))
    assert list(payload["rows"]) == [f"parse_action {p!r}" for p in bench.WEB_PATTERNS] + [
        "WebForms env step 'fill('", "Ledger env step 'get_charge('", "Injection(target_action='noop(')"]
    for label, row in payload["rows"].items():
        assert len(row["cpu_s"]) == len(row["wall_s"]) == 2 and row["cpu_s"][1] < 1.0, label
        assert NO_CALL in row["error"], label
    with pytest.raises(ValueError, match="repeats must be at least 1"):
        bench.measure(repeats=0)

    out = tmp_path / "parser.json"
    result = CliRunner().invoke(app, ["bench", "parser", "--repeats", "1", "--json", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["sizes"] == [25_000, 50_000, 100_000, 200_000]
    assert all(r["cpu_s"][-1] < bench.MAX_SECONDS for r in data["rows"].values())
    assert "parse_action 'fill('" in result.output
