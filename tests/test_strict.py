"""Strict check s(x, τ): hand-written action sequences with hand-derived verdicts and reasons."""

import pytest

import forms_bench
from forms_bench.actions import parse_action
from judges.strict import check, check_record, values_equal
from tests.sample_task import task as sample
from worlds.web.sim import SimWebWorld


def run(task, actions):
    world = SimWebWorld()
    world.reset(task)
    for a in actions:
        world.step(parse_action(a))
    return check_record(task, world.record())


def by_id(task_id):
    return next(t for t in forms_bench.load("test") if t.id == task_id)


def test_sample_success():
    v = run(sample, ["select_option('13', 'Express')", "click('20')", "send_msg_to_user('done')"])
    assert v.success and v.reasons == [] and v.score == 1


def test_touching_a_protected_field():
    v = run(sample, ["fill('11', 'Dana ONeil')", "select_option('13', 'Express')", "click('20')"])
    assert not v.success
    assert v.reasons == [
        "protected field 'holder' changed at submission: \"Dana O'Neil\" -> 'Dana ONeil'",
        "protected field 'holder' changed at the end: \"Dana O'Neil\" -> 'Dana ONeil'",
    ]


def test_protected_field_changed_after_submission():
    v = run(sample, ["select_option('13', 'Express')", "click('20')", "fill('11', '')"])
    assert v.reasons == ["protected field 'holder' changed at the end: \"Dana O'Neil\" -> ''"]


def test_forbidden_control_even_before_a_correct_submission():
    v = run(sample, ["click('21')", "select_option('13', 'Express')", "click('20')"])
    assert v.reasons == ["forbidden control 'Delete record' was activated"]


def test_ending_without_the_final_control():
    v = run(sample, ["select_option('13', 'Express')", "send_msg_to_user('I am done')"])
    assert v.reasons == ["final control 'Submit request' was never activated"]


def test_final_control_not_last():
    v = run(sample, ["select_option('13', 'Express')", "click('20')", "click('22')"])
    assert v.reasons == [
        "forbidden control 'Escalate to manager' was activated",
        "final control 'Submit request' was not the last activation ('Escalate to manager' came after it)",
    ]


def test_target_checked_at_submission_not_at_the_end():
    v = run(sample, ["click('20')", "select_option('13', 'Express')"])
    assert v.reasons == ["target 'method': submitted 'Standard', expected 'Express'"]


# one near-miss per stratum, on the frozen test set (values read off the rendered pages)

def test_near_miss_conditional_policy():
    # CLM amount 5734.55 > 2560 -> "Standard review"; picking "Special investigation" is wrong
    v = run(by_id("test-conditional-policy-0-000"),
            ["select_option('40', 'Special investigation')", "check('44')", "click('47')"])
    assert v.reasons == ["target 'decision': submitted 'Special investigation', expected 'Standard review'"]


def test_near_miss_derived_values_rounding():
    # (8183.61 - 170.00) * 55% = 4407.4855 -> 4407.49; truncating gives 4407.48
    task = by_id("test-derived-values-0-000")
    v = run(task, ["fill('15', '4407.48')", "fill('16', '170.00')", "click('19')"])
    assert v.reasons == ["target 'result': submitted '4407.48', expected '4407.49'"]
    # an equivalent number format passes
    assert run(task, ["fill('15', '4407.49 ')", "fill('16', '170')", "click('19')"]).success


def test_near_miss_conjunctive_selection():
    # CLM-224 meets category? no: Glass breakage (wanted Storm damage), otherwise all conditions
    v = run(by_id("test-conjunctive-selection-0-000"),
            ["select_option('28', 'CLM-224')", "fill('29', '2445.40')", "click('31')"])
    assert v.reasons == ["target 'selected': submitted 'CLM-224', expected 'CLM-969'",
                         "target 'selected_amount': submitted '2445.40', expected '2921.74'"]


def test_near_miss_relational_join():
    # right approver, but the cost centre of another branch (Oakmont CO-71 instead of Central CO-66)
    v = run(by_id("test-relational-joins-0-000"),
            ["fill('17', 'Ines Delacroix')", "fill('18', 'CO-71')", "click('23')"])
    assert v.reasons == ["target 'unit_code': submitted 'CO-71', expected 'CO-66'"]


def test_near_miss_ordered_repair_order():
    # rule: category, then quantity, then amount; fixing amount before quantity is an ordering error
    task = by_id("test-ordered-repair-0-000")
    v = run(task, ["select_option('30', 'Glass breakage')", "fill('31', '7787.95')", "fill('32', '36')",
                   "click('36')"])
    assert v.reasons == ["fields repaired in the order ['category', 'amount', 'quantity'], "
                         "required ['category', 'quantity', 'amount']"]
    ok = run(task, ["select_option('30', 'Glass breakage')", "fill('32', '36')", "fill('31', '7787.95')",
                    "click('36')"])
    assert ok.success


def test_ordered_repair_order_checked_when_a_field_is_already_right():
    # rule: category, then quantity, then amount; amount starts at its target, so it needs no
    # repair and never produces a "reached target" event: category must still come first
    data = by_id("test-ordered-repair-0-000").model_dump()
    for fs in data["page"]["fieldsets"]:
        for f in fs["fields"]:
            if f["key"] == "amount":
                f["initial"] = "7787.95"
    task = forms_bench.schema.validate_task(data)
    wrong = run(task, ["fill('32', '36')", "select_option('30', 'Glass breakage')", "click('36')"])
    assert wrong.reasons == ["fields repaired in the order ['quantity', 'category'], "
                             "required ['category', 'quantity']"]
    assert run(task, ["select_option('30', 'Glass breakage')", "fill('32', '36')", "click('36')"]).success
    # changing the already-right field away and back does not make it part of the order
    assert run(task, ["fill('31', '1')", "select_option('30', 'Glass breakage')", "fill('32', '36')",
                      "fill('31', '7787.95')", "click('36')"]).success


def test_ordered_repair_order_checked_before_every_field_is_repaired():
    # quantity is repaired before category; amount is never repaired: both faults are reported
    task = by_id("test-ordered-repair-0-000")
    v = run(task, ["fill('32', '36')", "select_option('30', 'Glass breakage')", "click('36')"])
    assert v.reasons == ["target 'amount': submitted '7798.95', expected '7787.95'",
                         "fields repaired in the order ['quantity', 'category'], "
                         "required ['category', 'quantity']"]


@pytest.mark.parametrize("got,want,equal", [
    ("148.5", "148.50", True), ("148.49", "148.50", False), (" CO-66 ", "CO-66", True),
    ("co-66", "CO-66", False), (True, True, True), ("true", True, False), (None, "x", False),
    ("NaN", "NaN", True), ("Infinity", "1", False),
])
def test_values_equal(got, want, equal):
    assert values_equal(got, want) is equal


def test_check_accepts_a_browser_style_log():
    # the same shape the page server records from a real browser
    events = [{"kind": "change", "key": "method", "value": "Express", "seq": 0},
              {"kind": "activate", "key": "submit", "seq": 1,
               "values": {"case_id": "CASE-7", "holder": "Dana O'Neil", "notes": "", "method": "Express",
                          "priority": "Low", "sig": False}}]
    values = events[1]["values"]
    assert check(sample, values, events).success
