"""A Gymnasium space of arbitrary Unicode strings (as BrowserGym's ``Unicode`` space).

``gymnasium.spaces.Text`` only contains strings over a fixed character set; pages, goals and
model outputs hold any Unicode character, so membership here is "a ``str`` no longer than
``max_length``".
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Text


class Unicode(Text):
    """Any ``str`` of length ``min_length``…``max_length`` (characters)."""

    def __init__(self, max_length: int, min_length: int = 0, seed: int | np.random.Generator | None = None):
        super().__init__(max_length=max_length, min_length=min_length, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"Unicode({self.min_length}, {self.max_length})"
