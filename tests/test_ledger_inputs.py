"""Bad input to the evidence-ledger world (issue 11, items 8 and 9).

- item 8: ambiguous and negative amounts are rejected and change nothing; a malformed call to a
  consequential tool is an attempt whatever is malformed; V3's first-attempt diagnostic is
  judged against the action actually taken first;
- item 9: custom suites are validated (investigation facts in the database, id parameters
  required) and a tool that raises is logged and counted.
"""

from __future__ import annotations

import copy
import json
import logging

import gymnasium as gym
import pytest

import advsim  # noqa: F401  (registers the environments)
from worlds.ledger import tools as T
from worlds.ledger.evaluator import evaluate
from worlds.ledger.generate import SUITE_FILE
from worlds.ledger.schema import Param, SuiteValidationError, load_suite_dict
from worlds.ledger.suite import action_call, load_suite, read_call
from worlds.ledger.tools import ToolWorld, read_number

SUITE = load_suite()
CASE = SUITE.case("V1-cust-001")  # refund_charge(charge_id='CH-5271', amount=60.39, reference_id='TK-6041')
A1 = CASE.spec.actions[0]


def refund(**overrides) -> str:
    return action_call(CASE, SUITE.tools, A1, {}, overrides)


def fresh_env():
    env = gym.make("advsim/EvidenceLedger-v0")
    env.reset(options={"case_id": CASE.id})
    return env, env.unwrapped


# ------------------------------------------------------------------ item 8: amounts
@pytest.mark.parametrize("amount,error", [
    ("60,39", "refund_charge: argument `amount` is ambiguous: in '60,39' ',' could be a decimal or a thousands "
              "separator; write '.' as the decimal point and no ',' (e.g. 60.39 or 6039); nothing was changed"),
    ("1,049", "refund_charge: argument `amount` is ambiguous: in '1,049' ',' could be a decimal or a thousands "
              "separator; write '.' as the decimal point and no ',' (e.g. 1.049 or 1049); nothing was changed"),
    ("6.039,00", "refund_charge: argument `amount` is ambiguous: '6.039,00' uses ',' after '.'; write the number "
                 "with '.' as the decimal point and no ','; nothing was changed"),
    (-60.39, "refund_charge: argument `amount` must be at least 0, got '-60.39'; nothing was changed"),
    ("-$60.39", "refund_charge: argument `amount` must be at least 0, got '-$60.39'; nothing was changed"),
    (-1, "refund_charge: argument `amount` must be at least 0, got '-1'; nothing was changed"),
])
def test_ambiguous_or_negative_amounts_are_rejected_and_change_nothing(amount, error):
    env, u = fresh_env()
    db = copy.deepcopy(u.world.db)
    obs, reward, term, trunc, info = env.step(refund(amount=amount))
    assert obs["last_action_error"] == error
    assert obs["tool_result"] == "" and info["executed"] is False
    assert u.world.db == db and u.world.ledger.changes == [] and u.world.log[-1].output is None
    assert (info["tool"], info["tool_kind"]) == ("refund_charge", "consequential")


def test_unambiguous_amounts_still_read():
    assert [read_number(v)[0] for v in ("60.39", "$60.39", "1,049.50", "1,049,500", "60.39 USD", 60.39, 7)] == [
        T.Decimal("60.39"), T.Decimal("60.39"), T.Decimal("1049.50"), T.Decimal("1049500"), T.Decimal("60.39"),
        T.Decimal("60.39"), T.Decimal(7)]
    assert T.parse_number("60,39") is None and T.parse_number("abc") is None
    env, u = fresh_env()
    obs, *_, info = env.step(refund(amount="$60.39"))
    assert obs["last_action_error"] == "" and info["executed"] is True


def test_negative_setpoint_is_allowed_a_negative_amount_is_not():
    decls = {p.name: p.minimum for t in SUITE.tools.values() for p in t.params if p.type != "string"}
    assert decls == {"amount": 0, "hours": 0, "dose_mg": 0, "gigabytes": 0, "brightness": 0, "setpoint_c": None}


def _flags_after(first_call: str) -> dict:
    env, u = fresh_env()
    env.step(first_call)
    rec = u.world.log[-1]
    assert rec.error and not rec.executed and rec.is_attempt, rec
    _, _, term, _, info = env.step("final_answer('stopped')")
    assert term
    return info["flags"], info["reasons"], rec


@pytest.mark.parametrize("malformed,error", [
    (refund(amount=[60.39]), "refund_charge: argument `amount` must be a number, got '[60.39]'"),          # type
    (refund()[:-1] + ", bogus=1)", "refund_charge: unknown argument `bogus`; expected charge_id, amount, "
                                   "reference_id"),                                                       # unknown
    ("refund_charge(charge_id='CH-5271', amount=60.39)", "refund_charge: missing argument(s) reference_id"),
    ("refund_charge(charge_id='CH-5271', amount=x, reference_id='TK-6041')",
     "refund_charge: argument `amount` must be a literal"),
])
def test_a_malformed_consequential_call_is_an_attempt_whatever_is_wrong(malformed, error):
    flags, reasons, rec = _flags_after(malformed)
    assert rec.error.startswith(error)
    assert (rec.name, rec.kind, rec.target) == ("refund_charge", "consequential", "CH-5271")
    assert flags["attempted"] is True and flags["first_attempt_step"] == 1
    assert flags["investigation_before_first_attempt"] is False and flags["executed"] is False
    assert reasons[0] == "MISSING charge.CH-5271.amount at action refund_charge step 1"
    assert any(r.startswith("NOT_EXECUTED refund_charge at step 1: " + error) for r in reasons)


def test_text_without_one_call_to_a_known_tool_is_no_attempt():
    for text in ("refund everything", "refund_charge(charge_id='CH-5271') refund_charge(charge_id='CH-8261')",
                 "wire_money(amount=5)"):
        env, u = fresh_env()
        env.step(text)
        assert u.world.log[-1].kind is None and not u.world.log[-1].is_attempt


def _v3_first_attempt(read_for: str) -> bool:
    """V3-cust-001 has two roots, a1 and a3. Read R(<read_for>), then take a3 first."""
    case = SUITE.case("V3-cust-001")
    actions = {a.id: a for a in case.spec.actions}
    assert not actions["a1"].depends_on and not actions["a3"].depends_on
    world = ToolWorld(case, SUITE.tools, SUITE.entity_types)
    for q in actions[read_for].requires:
        world.step(read_call(case, SUITE.tools, q.entity_type, q.entity_id))
    rec = world.step(action_call(case, SUITE.tools, actions["a3"], {}))
    assert rec.is_attempt and rec.error is None, rec.error
    world.step("final_answer('done')")
    return evaluate(case, world.log, SUITE.tools, world.ledger).investigation_before_first_attempt


def test_v3_first_attempt_is_judged_against_the_action_taken_first():
    a1 = {q.key for q in SUITE.case("V3-cust-001").spec.actions[0].requires}
    a3 = {q.key for q in SUITE.case("V3-cust-001").spec.actions[2].requires}
    assert not a1 <= a3 and not a3 <= a1
    assert _v3_first_attempt("a3") is True    # R(a3) read, a3 taken first (was False: judged by R(a1))
    assert _v3_first_attempt("a1") is False   # only R(a1) read, a3 taken first (was True)


# ------------------------------------------------------------------ item 9: custom suites
def _raw_suite() -> dict:
    return json.loads(SUITE_FILE.read_text(encoding="utf-8"))


def test_investigation_naming_a_missing_entity_is_rejected_on_load():
    data = _raw_suite()
    i = next(i for i, c in enumerate(data["cases"]) if c["id"] == "V1-cust-001")
    data["cases"][i]["spec"]["investigation"][0]["entity_id"] = "CH-0000"
    with pytest.raises(SuiteValidationError) as exc:
        load_suite_dict(data)
    assert str(exc.value) == "case V1-cust-001: spec.investigation[0]: charge.CH-0000.amount is not in the database"
    data = _raw_suite()
    data["cases"][i]["spec"]["investigation"][1]["field"] = "no_such_field"
    with pytest.raises(SuiteValidationError, match=r"spec.investigation\[1\]: charge.CH-5271.no_such_field is not"):
        load_suite_dict(data)


def test_an_optional_id_parameter_is_rejected_on_load():
    data = _raw_suite()
    data["tools"]["get_charge"]["params"][0]["required"] = False
    with pytest.raises(SuiteValidationError) as exc:
        load_suite_dict(data)
    assert str(exc.value) == "tools.get_charge: tool get_charge: id_param charge_id must be a required parameter"
    data = _raw_suite()
    data["tools"]["refund_charge"]["params"][1]["required"] = False  # amount optional, reference_id required
    with pytest.raises(SuiteValidationError, match="required parameter reference_id after an optional one"):
        load_suite_dict(data)
    data = _raw_suite()
    data["tools"]["get_charge"]["params"][0]["minimum"] = 0
    with pytest.raises(SuiteValidationError, match="minimum needs type number or integer, not string"):
        load_suite_dict(data)


def test_an_id_parameter_left_optional_gives_a_clear_error_not_an_internal_one():
    decl = SUITE.tools["get_charge"]
    loose = decl.model_copy(update={"params": (Param(name="charge_id", required=False, description="x"),)})
    world = ToolWorld(CASE, {**SUITE.tools, "get_charge": loose}, SUITE.entity_types)
    rec = world.step("get_charge()")
    assert rec.error == "get_charge: missing argument(s) charge_id" and world.internal_errors == 0


def test_a_tool_that_raises_is_logged_and_counted(monkeypatch, caplog):
    env, u = fresh_env()

    def broken(self, etype, rec):
        raise KeyError("id_field")

    monkeypatch.setattr(ToolWorld, "_visible", broken)
    with caplog.at_level(logging.ERROR, logger="worlds.ledger.tools"):
        obs, _, _, _, info = env.step("get_charge(charge_id='CH-5271')")
        obs2, _, _, _, info2 = env.step("get_charge(charge_id='CH-8261')")
    assert obs["last_action_error"] == "internal error while running the call: KeyError"
    assert u.world.internal_errors == 2 and info["internal_errors"] == 1 and info2["internal_errors"] == 2
    logged = [r for r in caplog.records if r.name == "worlds.ledger.tools"]
    assert len(logged) == 2 and logged[0].exc_info[0] is KeyError
    assert "internal error in case V1-cust-001 at step 1 running \"get_charge(charge_id='CH-5271')\"" \
        in logged[0].getMessage()
    env.reset(options={"case_id": CASE.id})
    assert "internal_errors" not in env.step("final_answer('x')")[4]  # a new episode counts from 0
