"""A Gymnasium space of arbitrary Unicode strings (as BrowserGym's ``Unicode`` space).

``gymnasium.spaces.Text`` only contains strings over a fixed character set; pages, goals and
model outputs hold any Unicode character, so membership here is "a ``str`` no longer than
``max_length``" (optionally: over a given ``charset``). Both environments use this one space
for every text observation and action.

**Flat and shared-memory form.** Gymnasium's ``Text`` utilities encode a string as indices into
the space's character set, which cannot represent a character outside it (``KeyError: ' '``
from ``AsyncVectorEnv``), and Gymnasium 1.4 reads a ``Text`` space from shared memory only
once, when ``AsyncVectorEnv`` starts (every later observation comes back as the first one —
for the ledger env, runs of ``'0'``). This module registers, for :class:`Unicode` only:

- ``flatten`` / ``unflatten`` / ``flatten_space`` / ``flatdim``: a string is its Unicode code
  points as ``int32`` (lone surrogates kept), padded with :data:`PAD` to ``max_length``;
- ``create_shared_memory`` / ``write_to_shared_memory`` / ``read_from_shared_memory``: per
  environment one row of ``max_length + 1`` ``int32`` — the length, then the code points; the
  read returns a :class:`SharedTexts` view that decodes the current contents whenever it is
  read or copied.

So ``gymnasium.vector.AsyncVectorEnv([...])`` with its default ``shared_memory=True`` and
``copy=True`` returns exactly what ``SyncVectorEnv`` returns (a tuple of ``str`` per text
field). With ``copy=False`` the observation holds :class:`SharedTexts` views (like the numpy
views Gymnasium returns for array spaces) that show the latest step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Iterator

import numpy as np
from gymnasium.spaces import Box, Text
from gymnasium.spaces.text import alphanumeric
from gymnasium.spaces.utils import flatdim, flatten, flatten_space, unflatten
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

PAD = 0x110000
"""Padding value of the flat form: one above the largest Unicode code point."""


class Unicode(Text):
    """Any ``str`` of length ``min_length``…``max_length`` (characters).

    Args:
        max_length: longest member (characters).
        min_length: shortest member (default 0: the empty string is a member).
        charset: None (default) for any character; or the characters members may use (then
            ``contains`` checks them too, and ``sample`` draws from them).
        seed: seeds ``sample``, which draws alphanumeric strings unless ``charset`` is given.
    """

    def __init__(self, max_length: int, min_length: int = 0, seed: int | np.random.Generator | None = None,
                 charset: frozenset[str] | str | None = None):
        super().__init__(max_length=max_length, min_length=min_length,
                         charset=alphanumeric if charset is None else charset, seed=seed)
        self.restricted = charset is not None
        """Whether members are limited to :attr:`character_set`."""

    def contains(self, x: Any) -> bool:
        """True for a ``str`` of allowed length (and, if restricted, over the charset)."""
        if not (isinstance(x, str) and self.min_length <= len(x) <= self.max_length):
            return False
        return not self.restricted or all(c in self.character_set for c in x)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Unicode) and self.min_length == other.min_length
                and self.max_length == other.max_length and self.restricted == other.restricted
                and (not self.restricted or self.character_set == other.character_set))

    def __repr__(self) -> str:
        if self.restricted:
            return f"Unicode({self.min_length}, {self.max_length}, charset={self.characters!r})"
        return f"Unicode({self.min_length}, {self.max_length})"


def encode(space: Unicode, text: str) -> np.ndarray:
    """Code points of ``text`` as an ``int32`` array (no padding).

    Raises:
        TypeError: ``text`` is not a ``str``.
        ValueError: ``text`` is longer than ``space.max_length``.
    """
    if not isinstance(text, str):
        raise TypeError(f"{space!r} holds str, got {type(text).__name__}")
    if len(text) > space.max_length:
        raise ValueError(f"a text of {len(text)} characters does not fit {space!r}")
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.int32)


def decode(codes: np.ndarray) -> str:
    """The string whose code points are ``codes`` (values >= :data:`PAD` are skipped)."""
    codes = np.asarray(codes)
    return codes[codes < PAD].astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")


@flatdim.register(Unicode)
def _flatdim_unicode(space: Unicode) -> int:
    return space.max_length


@flatten.register(Unicode)
def _flatten_unicode(space: Unicode, x: str) -> np.ndarray:
    out = np.full((space.max_length,), PAD, dtype=np.int32)
    codes = encode(space, x)
    out[: len(codes)] = codes
    return out


@unflatten.register(Unicode)
def _unflatten_unicode(space: Unicode, x: np.ndarray) -> str:
    return decode(x)


@flatten_space.register(Unicode)
def _flatten_space_unicode(space: Unicode) -> Box:
    return Box(low=0, high=PAD, shape=(space.max_length,), dtype=np.int32)


class SharedTexts(Sequence):
    """The ``n`` strings of one :class:`Unicode` field in an ``AsyncVectorEnv`` shared-memory block.

    A live, read-only view: indexing, iterating, comparing and printing decode the current
    contents; ``copy.copy``/``copy.deepcopy`` (what ``AsyncVectorEnv`` does with ``copy=True``)
    give a plain ``tuple`` of ``str``, the same value ``SyncVectorEnv`` returns.
    """

    def __init__(self, space: Unicode, shared_memory: Any, n: int):
        self._space = space
        self._data = np.frombuffer(shared_memory.get_obj(), dtype=np.int32).reshape((n, space.max_length + 1))

    def __len__(self) -> int:
        return self._data.shape[0]

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return tuple(self)[i]
        row = self._data[i]
        return decode(row[1: 1 + int(row[0])])

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __copy__(self) -> tuple[str, ...]:
        return tuple(self)

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return repr(tuple(self))


@create_shared_memory.register(Unicode)
def _create_unicode_shared_memory(space: Unicode, n: int = 1, ctx: Any = None):
    import multiprocessing as mp

    return (ctx or mp).Array(np.dtype(np.int32).char, n * (space.max_length + 1))


@write_to_shared_memory.register(Unicode)
def _write_unicode_to_shared_memory(space: Unicode, index: int, value: str, shared_memory: Any) -> None:
    codes = encode(space, value)
    row = np.frombuffer(shared_memory.get_obj(), dtype=np.int32)[
        index * (space.max_length + 1): (index + 1) * (space.max_length + 1)]
    row[0] = len(codes)
    row[1: 1 + len(codes)] = codes


@read_from_shared_memory.register(Unicode)
def _read_unicode_from_shared_memory(space: Unicode, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(space, shared_memory, n)
