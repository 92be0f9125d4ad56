"""Test selection: fast tests by default; ``--full`` adds ``slow`` and ``browser`` tests.

CI (``.ci/run``) and the README's test command run ``python -m pytest --full``.
"""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help="also run tests marked slow and browser")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--full"):
        return
    skip = pytest.mark.skip(reason="needs --full (slow or browser test)")
    for item in items:
        if "slow" in item.keywords or "browser" in item.keywords:
            item.add_marker(skip)
