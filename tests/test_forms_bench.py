import copy
import hashlib
import json
import re

import lxml.html
import pytest

import forms_bench
from forms_bench.domains import DOMAINS, name_pool
from forms_bench.html import render_html
from forms_bench.oracle import solve
from forms_bench.schema import STRATA, TaskValidationError, validate_task
from forms_bench.suite import DATA_DIR, dump_tasks
from judges.strict import check_record
from tests.sample_task import SAMPLE
from worlds.web.sim import SimWebWorld


def test_generator_is_deterministic_byte_for_byte():
    for s in STRATA:
        a = dump_tasks(forms_bench.generate(s, 7, seed=3))
        b = dump_tasks(forms_bench.generate(s, 7, seed=3))
        c = dump_tasks(forms_bench.generate(s, 7, seed=4))
        assert a == b
        assert a != c


def test_frozen_file_matches_generator_and_checksum():
    data = (DATA_DIR / "test-v1.json").read_bytes()
    assert data == dump_tasks(forms_bench.build_test_set())
    recorded = (DATA_DIR / "test-v1.json.sha256").read_text().split()[0]
    assert hashlib.sha256(data).hexdigest() == recorded


def test_test_set_composition():
    tasks = forms_bench.load("test")
    assert len(tasks) == 150
    assert len({t.id for t in tasks}) == 150
    for s in STRATA:
        mine = [t for t in tasks if t.stratum == s]
        assert len(mine) == 30
        assert {t.domain for t in mine} == {d.name for d in DOMAINS}


def test_training_pools_never_overlap_the_test_set():
    test = forms_bench.load("test")
    train = [t for s in STRATA for t in forms_bench.generate(s, 60, seed=1)]
    test_ids = {t.id for t in test}
    assert not test_ids & {t.id for t in train}
    record_ids = lambda ts: {c for t in ts for tab in t.page.tables for r in tab.rows for c in r
                             if re.fullmatch(r"[A-Z]{2,3}-\d{3,}", c)}
    assert record_ids(test) and not record_ids(test) & record_ids(train)
    test_first, _, _ = name_pool("test")
    train_first, _, _ = name_pool("train")
    assert not set(test_first) & set(train_first)


def test_oracle_solves_every_test_task_in_the_simulator():
    world = SimWebWorld()
    for task in forms_bench.load("test"):
        world.reset(task)
        actions = solve(task)
        assert len(actions) <= 12
        for a in actions:
            world.step(a)
        verdict = check_record(task, world.record())
        assert verdict.success, (task.id, verdict.reasons)


def test_validation_errors_name_task_and_field():
    bad = copy.deepcopy(SAMPLE)
    bad["spec"]["targets"] = {"nonexistent": "x"}
    with pytest.raises(TaskValidationError, match=r"task 'demo-1'.*spec.targets: unknown field 'nonexistent'"):
        validate_task(bad)
    bad = copy.deepcopy(SAMPLE)
    bad["page"]["tables"][0]["rows"][1] = ["O-2", "3"]
    with pytest.raises(TaskValidationError, match=r"page.tables.0.*row 1 has 2 cells, expected 3"):
        validate_task(bad)
    bad = copy.deepcopy(SAMPLE)
    bad["page"]["fieldsets"][0]["fields"][3]["initial"] = "Teleport"
    with pytest.raises(TaskValidationError, match=r"initial value 'Teleport' is not an option"):
        validate_task(bad)
    bad = copy.deepcopy(SAMPLE)
    bad["spec"]["forbidden"] = ["delete", "submit"]
    with pytest.raises(TaskValidationError, match="the final control cannot be forbidden"):
        validate_task(bad)
    with pytest.raises(TaskValidationError, match=r"task '\?'"):
        validate_task("{not json")


def test_html_page_is_self_contained_and_labelled():
    for task in forms_bench.load("test")[::29]:
        html = render_html(task)
        doc = lxml.html.document_fromstring(html)
        assert doc.find(".//title").text == task.page.title
        assert not doc.xpath("//*[@src]") and not doc.xpath("//link")
        bids = doc.xpath("//@bid")
        assert len(bids) == len(set(bids))
        for f in task.page.fields():
            el = doc.xpath(f"//*[@bid='{f.bid}']")[0]
            if f.kind == "radio":
                assert el.tag == "fieldset" and el.find("legend").text == f.label
                continue
            assert doc.xpath(f"//label[@for='{el.get('id')}']")[0].text == f.label
        for c in task.page.controls:
            btn = doc.xpath(f"//button[@bid='{c.bid}']")[0]
            assert btn.text == c.label and btn.get("type") == "button"
        assert len(doc.xpath("//table/thead/tr/th")) == sum(len(t.columns) for t in task.page.tables)


def test_goal_is_answerable_from_the_page():
    # the target values of conditional policy / joins / selection appear on the page or in rules
    for task in forms_bench.load("test"):
        text = json.dumps(task.page.model_dump())
        for key, want in task.spec.targets.items():
            if isinstance(want, str) and task.stratum in ("relational_joins", "conjunctive_selection",
                                                           "ordered_repair", "conditional_policy"):
                assert want in text, (task.id, key, want)


def test_cli_check_reproduces_the_frozen_file_and_rejects_unknown_arguments(capsys):
    """``python -m forms_bench --check`` writes nothing and exits 0 while the generator reproduces
    the frozen test set byte for byte; an unknown argument is an error, not a silent rewrite."""
    import pytest

    from forms_bench.__main__ import main

    assert main(["--check"]) == 0 and "reproduced" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["--bogus"])
    assert exc.value.code == 2
