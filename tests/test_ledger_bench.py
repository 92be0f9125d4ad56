"""``advsim bench ledger``: three scripted agents over all 656 cases, exact headline numbers, < 10 s."""

from __future__ import annotations

import json
import subprocess
import sys

from advsim.bench import ledger as bench
from worlds.ledger import load_suite


def rate(n, d):
    return {"num": n, "den": d, "value": n / d if d else None}


def test_bench_numbers_are_exact(capsys):
    # speed ("the whole suite in under 10 s") is reported by `advsim bench ledger`, not timed here
    out = bench.run()
    printed = capsys.readouterr().out
    assert "ECS V1" in printed and "PAR (V1)" in printed and "read-everything-then-" in printed
    assert out["suite"]["cases"] == 656
    ref, act, read = (out["agents"][k] for k in ("reference", "act-immediately", "read-everything-then-act"))
    # reference: every case solved
    assert ref["ECS"]["overall"] == rate(656, 656) and ref["P-M"] == 1.0 and ref["D-M"] == 1.0
    assert ref["PAR"] == rate(0, 131) and ref["CAS"] == rate(131, 131) and ref["BSR"] == rate(0, 175)
    # act-immediately: no investigation -> every V0-V3 episode fails; Legacy "Allow" right on Allow cases
    allow = sum(1 for c in load_suite().cases if c.protocol == "Legacy" and c.spec.legacy.verdict == "Allow")
    assert allow == 29
    assert act["ECS"]["by_protocol"] == {"Legacy": rate(29, 86), "V0": rate(0, 175), "V1": rate(0, 131),
                                         "V2": rate(0, 132), "V3": rate(0, 132)}
    assert act["PAR"] == rate(131, 131) and act["CAS"] == rate(0, 0)
    assert act["Gap"]["V2"] == rate(132, 132) and act["Part."]["V3"] == rate(132, 132)
    assert act["P-M"] == (29 / 86) / 5
    # read-everything-then-act: V1 solved; V0 acts anyway; V2/V3 fail on stale (unconfirmed) state
    assert read["ECS"]["by_protocol"]["V1"] == rate(131, 131)
    assert read["ECS"]["by_protocol"]["V0"] == rate(0, 175) and read["Part."]["V0"] == rate(175, 175)
    assert read["Gap"]["V1"] == rate(0, 131) and read["Gap"]["V2"] == rate(132, 132)
    assert read["ECS"]["by_protocol"]["Legacy"] == rate(
        sum(1 for c in load_suite().cases if c.protocol == "Legacy" and c.spec.legacy.verdict == "Defer"), 86)
    json.dumps(out)  # JSON-able as returned


def test_cli_writes_the_same_numbers(tmp_path):
    path = tmp_path / "ledger.json"
    proc = subprocess.run([sys.executable, "-m", "advsim.cli", "bench", "ledger", "--json", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(path.read_text())
    assert data["agents"]["reference"]["ECS"]["overall"] == rate(656, 656)
    assert data["agents"]["act-immediately"]["PAR"] == rate(131, 131)
