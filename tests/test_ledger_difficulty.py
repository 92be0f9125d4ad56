"""Difficulty levels and curriculum proposals of the evidence-ledger world (worlds.ledger.difficulty)."""

import pytest

from advsim.suites import EvidenceLedgerSuite, check_suite
from worlds.ledger.difficulty import LEVELS, LedgerProposal, instantiate, level_knobs, level_stats, make_case
from worlds.ledger.schema import DOMAINS


def _historic(case) -> int:
    return sum(1 for table in case.database.values() for rec in table.values()
               if "Earlier operation." in rec.values())


def test_the_knobs_change_what_they_say():
    for seed in range(12):
        dom = DOMAINS[seed % len(DOMAINS)]
        l0, l1, l2, l3, l4 = (make_case(dom, lv, seed) for lv in range(5))
        assert [c.protocol for c in (l0, l1, l2, l3, l4)] == ["V1", "V1", "V1", "V2", "V2"]
        assert [len(c.spec.actions) for c in (l0, l3)] == [1, 2] and tuple(l3.spec.actions[1].depends_on) == ("a1",)
        # extra requirement groups: level 0 reads the core only, each level adds a group (capped by the template)
        req = [len(c.spec.actions[0].requires) for c in (l0, l1, l2)]
        assert req[0] < req[1] <= req[2]
        # the borrowed-id trap (historic records of the output kind) only where the level says so
        assert _historic(l3) == 0 and _historic(l4) == 2
        assert l0.twin and l0.twin != l0.primary  # every level keeps the look-alike record


def test_levels_cost_more_reads_and_actions_as_they_rise():
    stats = [level_stats(lv, n=24) for lv in range(6)]
    reads = [s["reads_mean"] for s in stats]
    assert reads == sorted(reads) and reads[0] < reads[-1]
    assert [s["actions_mean"] for s in stats] == [1.0, 1.0, 1.0, 2.0, 2.0, 4.0]
    assert stats[5]["protocols"] == {"V3": 24}


def test_every_generated_case_passes_the_suite_self_check():
    cases = [make_case(DOMAINS[i % len(DOMAINS)], lv, 100 + i) for lv in LEVELS for i in range(6)]
    report = check_suite(EvidenceLedgerSuite(), tasks=cases)
    assert report.ok, report.failures[:3]
    assert report.runs["ground_truth"] == [36, 36] and report.runs["control:premature"][1] > 0


def test_proposals_instantiate_deterministically_and_their_overrides_count():
    p = {"domain": "smart_home", "level": 1, "seed": 4711}
    a, b = instantiate(p), instantiate(LedgerProposal(**p))
    assert a == b and a.id == "gen-L1-home-4711" and a.protocol == "V1"
    v0 = instantiate({**p, "protocol": "V0"})
    assert v0.protocol == "V0" and v0.id == "gen-L1-home-4711-V0-x1-h0"
    assert LedgerProposal(**p).knobs() == level_knobs(1)
    with pytest.raises(ValueError, match="level"):
        instantiate({**p, "level": 9})
    with pytest.raises(ValueError, match="domain"):
        instantiate({**p, "domain": "space_ops"})
    with pytest.raises(ValueError, match="extra_groups"):
        instantiate({**p, "extra_groups": 7})


def test_a_generated_case_plays_in_the_frozen_suites_env():
    import gymnasium as gym

    import advsim  # noqa: F401 (registers the envs)

    case = make_case("customer_ops", 0, 3)
    env = gym.make("advsim/EvidenceLedger-v0")
    obs, info = env.reset(options={"task": case})
    assert info["task_id"] == case.id == "gen-L0-cust-3" and obs["context"].startswith("[customer_ops]")
    with pytest.raises(TypeError, match="must be a worlds.ledger.schema.Case"):
        env.reset(options={"task": "gen-L0-cust-3"})


def test_bench_levels_measures_both_worlds(tmp_path):
    import json

    from typer.testing import CliRunner

    from advsim.cli import app

    out = tmp_path / "levels.json"
    res = CliRunner().invoke(app, ["bench", "levels", "--n", "5", "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    web, ledger = data["web"], data["ledger"]
    assert [r["level"] for r in web] == list(range(6)) and [r["n"] for r in web] == [5] * 6
    # level 0: one value stated in the goal -> fill, press the final control, report
    assert web[0]["actions"] == 3.0 and web[0]["targets"] == 1.0 and web[0]["page_chars"] < web[5]["page_chars"]
    assert [r["actions_mean"] for r in ledger] == [1.0, 1.0, 1.0, 2.0, 2.0, 4.0]
    res = CliRunner().invoke(app, ["bench", "levels", "--world", "moon"])
    assert res.exit_code == 2 and "world must be web, ledger or both" in res.output


def test_ground_truth_demonstrations_in_the_ledger_world():
    """The warm start's demonstrations from any suite: one example per reference step, the prompt
    the rollouts build (context, the transcript of calls and results), the oracle's call as the target."""
    from advsim.warmstart import suite_demonstrations
    from policies.backbone import tiny_tokenizer
    from policies.ledger_roles import ledger_executor_user
    from policies.roles import role_io
    from worlds.ledger.suite import reference_plan

    tok = tiny_tokenizer()
    suite = EvidenceLedgerSuite()
    cases = [make_case(DOMAINS[i], 0, 200 + i) for i in range(3)]
    seen = []
    io = role_io(tok)
    spy = type(io)(**{**io.__dict__, "ledger_executor_prompt":
                      lambda c, t, e: seen.append((c, t, e)) or [7]})
    examples = suite_demonstrations(suite, spy, tok, cases)
    steps = [len(reference_plan(c, suite.suite.tools)) for c in cases]
    assert len(examples) == sum(steps) == len(seen)
    assert seen[0][1] == "" and seen[0][0].startswith("[customer_ops]")
    # the second prompt shows the first call and its result; the third both earlier calls
    assert seen[1][1].startswith("1. get_") and "\n{" in seen[1][1] and "2. get_" in seen[2][1]
    first = suite.ground_truth(cases[0]).act({}, {})
    assert tok.decode(examples[0][1][:-1]) .replace(" ", "") == first.replace(" ", "")
    assert examples[0][1][-1] == tok.eos_token_id and examples[0][0] == [7]
    assert ledger_executor_user(*seen[1]).endswith("Next call:")


def test_sample_cases_cover_templates_independently_of_domains():
    """Consecutive seeds with domains in turn pick one template per domain (seed mod 3 is
    constant along a domain); sample_cases draws seeds, so 60 cases cover all 18 templates."""
    from worlds.ledger.difficulty import sample_cases

    aliased = {make_case(DOMAINS[i % 6], 0, 10_000 + i).spec.actions[0].tool for i in range(60)}
    assert len(aliased) == 6
    cases = sample_cases(0, 60, 10_000)
    assert len({c.spec.actions[0].tool for c in cases}) == 18
    assert [c.id for c in cases] == [c.id for c in sample_cases(0, 60, 10_000)]  # deterministic
    two = sample_cases(0, 4, 1, ["customer_ops", "smart_home"])
    assert [c.domain for c in two] == ["customer_ops", "smart_home"] * 2


def test_the_ledger_eval_pool_is_fixed_and_disjoint_from_training_seeds():
    """The per-level pool (seed POOL_SEED = 1,000,000) draws case seeds from 1,000,000 up; curriculum
    proposals (LedgerProposal.seed ≤ 999,999) and the warm start (sample_cases, base 0) stay below,
    so no pool case can be generated in training; the same cases on every call."""
    from advsim.suites.web import POOL_SEED
    from worlds.ledger.difficulty import sample_cases

    suite = EvidenceLedgerSuite()
    pool = suite.eval_pool(1, 12, POOL_SEED)
    seeds = [int(c.id.rsplit("-", 1)[1]) for c in pool]
    assert len(pool) == 12 and all(1_000_000 <= s < 2_000_000 for s in seeds)
    assert [c.id for c in pool] == [c.id for c in suite.eval_pool(1, 12, POOL_SEED)]
    assert all(int(c.id.rsplit("-", 1)[1]) < 1_000_000 for c in suite.training_tasks(12, POOL_SEED, {1: 1.0}))
    # base shifts the seeds only: the same draws, 1,000,000 higher
    assert seeds == [int(c.id.rsplit("-", 1)[1]) + 1_000_000 for c in sample_cases(1, 12, POOL_SEED, suite.domains)]
    with pytest.raises(ValueError):
        LedgerProposal(domain="customer_ops", level=1, seed=seeds[0])
