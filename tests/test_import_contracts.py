"""The import contracts of pyproject.toml hold (`lint-imports`, import-linter).

advsim -> (policies | judges | worlds) -> forms_bench, the middle three independent of each other.
"""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_lint_imports_keeps_every_contract():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    out = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "Contracts: 1 kept, 0 broken." in out.stdout
