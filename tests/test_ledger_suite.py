"""The frozen 656-case suite: counts, validation errors, checksum, generator reproducibility,
tool declarations, and the self-check (reference = 1, equivalent variants = 1, controls = 0)."""

from __future__ import annotations

import hashlib
import json
import statistics
from collections import Counter

import pytest

from tests.test_ledger_evaluator import mini_suite_dict
from worlds.ledger import suite as S
from worlds.ledger.generate import CHECKSUM_FILE, SUITE_FILE, dumps_suite, generate_suite
from worlds.ledger.schema import DOMAINS, PROTOCOL_COUNTS, PROTOCOLS, SuiteValidationError, load_suite_dict

SUITE = S.load_suite()


def test_counts_per_protocol_and_domain():
    assert len(SUITE.cases) == 656
    by_p = Counter(c.protocol for c in SUITE.cases)
    assert dict(by_p) == {"Legacy": 86, "V0": 175, "V1": 131, "V2": 132, "V3": 132} == PROTOCOL_COUNTS
    cells = Counter((c.protocol, c.domain) for c in SUITE.cases)
    assert all(cells[(p, d)] >= 14 for p in PROTOCOLS for d in DOMAINS)  # every domain in every protocol
    assert cells[("V0", "customer_ops")] == 30 and cells[("V0", "healthcare_ops")] == 29  # 175 = 5*30 + 25
    assert len({c.id for c in SUITE.cases}) == 656
    templates = Counter((c.domain, c.template) for c in SUITE.cases)
    assert all(sum(1 for (d, _) in templates if d == dom) == 3 for dom in DOMAINS)


def test_specified_reads_between_five_and_seven_on_average():
    for p in ("V0", "V1", "V2", "V3"):
        reads = [c.reads for c in SUITE.cases if c.protocol == p]
        assert 5.0 <= statistics.mean(reads) <= 7.0, p
        assert max(reads) <= 17
    for c in SUITE.cases[:40]:
        assert c.reads == S.count_reads(c, SUITE.tools)


def test_protocol_structures():
    for c in SUITE.cases:
        acts = c.spec.actions
        if c.protocol == "V2":
            assert [a.depends_on for a in acts] == [(), ("a1",)]
            assert acts[1].args and any(x.from_output == "a1" for x in acts[1].args.values())
        if c.protocol == "V3":  # fork/join DAG: a1 -> a2 -> a4 <- a3
            assert [a.depends_on for a in acts] == [(), ("a1",), (), ("a2", "a3")]
        if c.protocol in ("V0", "V1"):
            assert len(acts) == 1 and c.spec.investigation == acts[0].requires
        if c.protocol == "Legacy":
            assert c.tools == ("decide",) and c.spec.legacy.candidate in c.context


def test_generator_reproduces_frozen_file_byte_for_byte():
    text = dumps_suite(generate_suite())
    assert text == SUITE_FILE.read_text(encoding="utf-8")
    assert CHECKSUM_FILE.read_text().split()[0] == hashlib.sha256(text.encode()).hexdigest()


def test_checksum_verified_on_load(tmp_path):
    good = tmp_path / "suite.json"
    data = mini_suite_dict()
    raw = json.dumps(data).encode()
    good.write_bytes(raw)
    with pytest.raises(S.ChecksumError, match="checksum file suite.json.sha256 is missing"):
        S.load_suite(good)
    (tmp_path / "suite.json.sha256").write_text(hashlib.sha256(raw).hexdigest() + "  suite.json\n")
    assert [c.id for c in S.load_suite(good).cases] == ["mini-V0", "mini-V1", "mini-V2", "mini-Legacy"]
    good.write_bytes(raw.replace(b"49.99", b"49.98", 1))
    with pytest.raises(S.ChecksumError, match="does not match the recorded"):
        S.load_suite(good)
    assert S.load_suite(good, verify=False).case("mini-V0").database["charge"]["C1"]["amount"] == 49.98


def _error(mutate) -> str:
    d = mini_suite_dict()
    mutate(d)
    with pytest.raises(SuiteValidationError) as exc:
        load_suite_dict(d)
    return str(exc.value)


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d["cases"][1]["spec"]["actions"][0].update(tool="refund"),
     "case mini-V1: spec.actions[0].tool: unknown consequential tool 'refund'"),
    (lambda d: d["cases"][1]["tools"].__setitem__(3, "refund"), "case mini-V1: tools[3]: unknown tool 'refund'"),
    (lambda d: d["cases"][1].pop("context"), "case mini-V1: context: Field required"),
    (lambda d: d["cases"][1].update(reads=-1), "case mini-V1: reads: Input should be greater than or equal to 0"),
    (lambda d: d["cases"][1]["spec"]["actions"][0]["requires"][0].update(field="amout"),
     "case mini-V1: spec.actions[0].requires[0]: charge.C2.amout is not in the database"),
    (lambda d: d["cases"][1]["spec"].update(actions=d["cases"][2]["spec"]["actions"]),
     "case mini-V1: spec.actions: V1 needs exactly one action, got 2"),
    (lambda d: d["cases"][2]["spec"]["actions"][1].update(depends_on=["a9"]),
     "case mini-V2: spec.actions[1].depends_on: 'a9' is not an earlier action (actions must be listed in a "
     "topological order)"),
    (lambda d: d["cases"][2]["spec"]["actions"][1]["args"].update(refund_id={"from_output": "a2"}),
     "case mini-V2: spec.actions[1].args.refund_id: from_output 'a2' must be one of depends_on"),
    (lambda d: d["cases"][1]["spec"]["actions"][0].update(args={}),
     "case mini-V1: spec.actions[0].args: expected ['amount'], got []"),
    (lambda d: d["cases"][1]["spec"]["actions"][0].update(target="C7"), "case mini-V1: spec.actions[0].target: no charge 'C7'"),
    (lambda d: d["cases"][1]["spec"]["actions"][0]["args"]["amount"].update(valu=3),
     "case mini-V1: spec.actions[0].args.amount.valu: Extra inputs are not permitted"),
    (lambda d: d["cases"][1].update(protocol="V4"),
     "case mini-V1: protocol: Input should be 'Legacy', 'V0', 'V1', 'V2' or 'V3'"),
    (lambda d: d["cases"][1].update(id="mini-V0"), "case mini-V0: id: duplicate case id"),
    (lambda d: d["cases"][1]["database"]["charge"]["C2"].update(charge_id="C3"),
     "case mini-V1: database.charge.C2.charge_id: must equal the key"),
    (lambda d: d["tools"]["refund_charge"].update(mode="get"),
     "tools.refund_charge: tool refund_charge: mode get must have kind information"),
    (lambda d: d.pop("seed"), "suite: missing top-level field 'seed'"),
])
def test_validation_errors_name_case_and_field(mutate, message):
    assert _error(mutate) == message


def test_tool_declared_once_feeds_prompt_and_schema():
    d = SUITE.tools["refund_charge"]
    assert d.prompt_text() == (
        "refund_charge(charge_id: string, amount: number, reference_id: string)  [consequential]\n"
        "    Refund a card charge. Processed asynchronously: confirm the charge status afterwards.\n"
        "    - charge_id: charge to refund\n"
        "    - amount: amount to refund, e.g. 49.99\n"
        "    - reference_id: ticket or cancellation id this refund settles")
    schema = d.json_schema()
    assert schema["function"]["name"] == "refund_charge" and schema["function"]["x-kind"] == "consequential"
    assert schema["function"]["parameters"]["properties"]["amount"] == {"type": "number",
                                                                         "description": "amount to refund, e.g. 49.99"}
    assert schema["function"]["parameters"]["required"] == ["charge_id", "amount", "reference_id"]
    decide = SUITE.tools["decide"].json_schema()["function"]["parameters"]
    assert decide["required"] == ["verdict"]
    kinds = Counter(t.kind for t in SUITE.tools.values())
    assert kinds["consequential"] == 47 and kinds["final"] == 1 and kinds["decision"] == 1


def test_twins_are_wrong_entity_traps_with_identical_values():
    for c in SUITE.cases:
        if c.protocol == "Legacy":
            continue
        a = c.spec.actions[0]
        etype = SUITE.tools[a.tool].entity_type
        target, twin = c.database[etype][a.target], c.database[etype][c.twin]
        same = [q.field for q in a.requires if q.entity_id == a.target and target[q.field] == twin[q.field]]
        assert c.twin != a.target and same, c.id


def test_suite_self_check_passes_everything():
    report = S.check(SUITE)
    assert report.failures == []
    assert report.runs["reference"] == {p: [n, n] for p, n in PROTOCOL_COUNTS.items()}
    # variants and controls on every protocol (V2/V3 include stale, skipped dependency, invented/borrowed ids)
    assert report.runs["variant"]["V3"] == [816, 816] and report.runs["variant"]["V0"] == [554, 554]
    assert report.runs["control"] == {"Legacy": [172, 172], "V0": [525, 525], "V1": [655, 655],
                                      "V2": [1188, 1188], "V3": [1188, 1188]}


def test_controls_carry_exact_reasons_on_one_case():
    case = SUITE.case("V2-cust-001")  # duplicate-charge refund: CH-8750 duplicates CH-5943 (same amount)
    ref = S.reference_plan(case, SUITE.tools)
    assert ref == ["get_charge(charge_id='CH-8750')", "get_charge(charge_id='CH-5943')", "get_order(order_id='OR-1155')",
                   "get_payment_method(payment_method_id='PM-8974')", S.Act("a1"),
                   "get_customer(customer_id='CU-5030')", "get_charge(charge_id='CH-8750')", S.Act("a2"),
                   "final_answer('Done: all requested actions completed after verification.')"]
    ctl = S.controls(SUITE, case)
    assert set(ctl) == {"wrong_entity", "premature", "wrong_target", "wrong_argument", "duplicate_action",
                        "stale", "skipped_dependency", "invented_id", "borrowed_id"}
    reasons = {name: S.run_plan(SUITE, case, plan)[1].reasons for name, (plan, _) in ctl.items()}
    assert reasons["stale"] == ["STALE charge.CH-8750.status at action notify_customer step 7 "
                                "(read at step 1, changed at step 5)"]
    assert reasons["wrong_entity"] == ["MISSING charge.CH-8750.amount at action refund_charge step 5",
                                       "MISSING charge.CH-8750.status at action refund_charge step 5",
                                       "MISSING charge.CH-8750.duplicate_of at action refund_charge step 5"]
    assert reasons["premature"] == ["MISSING payment_method.PM-8974.status at action refund_charge step 4"]
    assert reasons["wrong_argument"] == ["WRONG_ARG refund_charge.amount: expected 39.28, got 40.28 at step 5"]
    assert reasons["borrowed_id"][0].startswith("UNBOUND_OUTPUT notify_customer.reference_id='RF-")
    assert reasons["skipped_dependency"][0] == ("DEPENDENCY notify_customer at step 7 requires a1 (refund_charge) "
                                                "executed before it")


def test_equivalent_variants_cover_every_kind():
    kinds = Counter(k for c in SUITE.cases for k in S.variants(SUITE, c))
    assert kinds["swapped_independent"] == kinds["interleaved_independent"] == 132
    assert kinds["other_tool"] == 570 and kinds["extra_reads"] == 570
    assert kinds["number_with_currency"] == 276


def test_frozen_tasks_for_eval_tasks_all_sample_and_ids():
    """``eval.tasks`` on the ledger suite: ``all`` is the 656 cases; ``sample:2`` is two cases per
    protocol taken in turn from the domains (not the suite's first domain twice); ids pick those
    cases in order; an unknown id is a ValueError naming it."""
    from advsim.suites.ledger import EvidenceLedgerSuite

    suite = EvidenceLedgerSuite()
    assert len(suite.frozen_tasks("all")) == 656
    sample = suite.frozen_tasks("sample:2")
    assert [(c.protocol, c.domain) for c in sample] == [
        (p, d) for p in ("Legacy", "V0", "V1", "V2", "V3") for d in ("customer_ops", "engineering_ops")]
    assert [c.id for c in suite.frozen_tasks("V0-eng-001, Legacy-cust-001")] == ["V0-eng-001", "Legacy-cust-001"]
    with pytest.raises(ValueError, match="nope-1"):
        suite.frozen_tasks("V0-eng-001,nope-1")
