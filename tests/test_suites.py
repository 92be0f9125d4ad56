"""The task-suite protocol (advsim.suites): both worlds pass one self-check through it."""

import json

import pytest

from advsim.suites import (SUITES, EvidenceLedgerSuite, Oracle, ScriptedOracle, TaskSuite, WebFormsSuite,
                           check_suite, play)


@pytest.mark.parametrize("name", ["web", "ledger"])
def test_every_builtin_suite_passes_its_self_check_through_the_protocol(name):
    suite = SUITES[name]()
    assert isinstance(suite, TaskSuite)
    report = check_suite(suite)
    assert report.ok, report.failures[:5]
    n = len(suite.tasks())
    assert report.runs["ground_truth"] == [n, n] and n == {"web": 150, "ledger": 656}[name]
    if name == "web":
        assert report.runs == {"ground_truth": [150, 150], "control:submit-at-once": [150, 150],
                               "control:stop-at-once": [150, 150]}
    else:  # the suite's own negative controls, e.g. acting on a look-alike record
        assert report.runs["control:wrong_entity"] == [570, 570] and report.runs["control:stale"] == [264, 264]


class _Swapped(WebFormsSuite):
    """A broken suite: its ground truth is the stop-at-once control."""

    def ground_truth(self, task) -> Oracle:
        return ScriptedOracle(["send_msg_to_user('Done.')"], "send_msg_to_user('Done.')")


def test_a_broken_ground_truth_fails_the_check_with_the_verdicts_reason():
    suite = WebFormsSuite()
    tasks = suite.tasks()[:3]
    report = check_suite(_Swapped(tasks))
    assert not report.ok and report.runs["ground_truth"] == [0, 3]
    assert report.failures[0] == (f"{tasks[0].id} ground_truth: reward 0.0, reasons "
                                  f"[\"final control '{tasks[0].page.control(tasks[0].spec.final_control).label}' "
                                  "was never activated\"]")


def test_ledger_ground_truth_uses_the_ids_earlier_calls_returned():
    """A case whose second action must use the id the first returned: the plan oracle reads it
    from info["output"], and the env reports success and the id."""
    from worlds.ledger.suite import controls

    suite = EvidenceLedgerSuite()
    case = next(c for c in suite.tasks() if "invented_id" in controls(suite.suite, c))  # a dependent action
    env = suite.make_env(max_steps=40)
    oracle = suite.ground_truth(case)
    reward, info, steps = play(suite, env, case, oracle, 40)
    assert reward == 1.0 and info["success"] is True and info["task_id"] == case.id and info["ecs"] == 1
    assert oracle._outputs and all(v for v in oracle._outputs.values())  # ids were read from info["output"]
    # the same case with an invented id fails with the evaluator's reason
    bad, want = suite.negative_controls(case)["invented_id"]
    reward, info, _ = play(suite, env, case, bad, 40)
    assert reward == 0.0 and info["success"] is False and any(want in r for r in info["reasons"])


def test_suite_check_command(tmp_path):
    from typer.testing import CliRunner

    from advsim.cli import app

    out = tmp_path / "check.json"
    res = CliRunner().invoke(app, ["suite", "check", "ledger", "--cases", "tests/data/own_ledger_cases.json",
                                   "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["ok"] is True and data["suite"] == "evidence-ledger" and data["runs"]["ground_truth"] == [4, 4]
    res = CliRunner().invoke(app, ["suite", "check", "forms"])
    assert res.exit_code == 2 and "WORLD must be one of web, ledger" in res.output


def test_both_envs_take_task_id_in_reset_options_and_report_success_at_the_end():
    web, ledger = WebFormsSuite(), EvidenceLedgerSuite()
    task = web.tasks()[0]
    case = next(c for c in ledger.tasks() if c.protocol != "Legacy")  # Legacy cases end with decide(...)
    wenv, lenv = web.make_env(), ledger.make_env()
    _, winfo = wenv.reset(options={"task_id": task.id})
    _, linfo = lenv.reset(options={"task_id": case.id})
    assert winfo["task_id"] == task.id and linfo["task_id"] == linfo["case_id"] == case.id
    assert "success" not in winfo and "success" not in linfo  # only at episode end
    with pytest.raises(ValueError, match="options name two cases"):
        lenv.reset(options={"task_id": case.id, "case_id": ledger.tasks()[-1].id})
    _, r, term, _, info = lenv.step("final_answer('Nothing to do.')")
    assert term and info["success"] is (info["ecs"] == 1) and r == float(info["success"])
