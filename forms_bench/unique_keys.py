"""JSON objects and YAML mappings that refuse a key written twice.

``json.loads`` and PyYAML's ``SafeLoader`` keep the last of two equal keys silently: a user who
writes ``lr:`` twice in a config, or a model that writes ``"seed"`` twice in a proposal, gets one
of them without a word. Every reader of such input in the project uses these two hooks: configs
(``advsim.config``), page specs (``forms_bench.page_spec``), a user's ledger cases
(``worlds.ledger.own``), role outputs (``policies.roles``) and reactive adversaries' replies
(``advsim.envs.adversaries``). ``yaml`` is imported on first use only.
"""

from __future__ import annotations

import functools
from typing import Any


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice; ``key`` is that key. Each reader turns it into its own
    error type (with the file or role it reads)."""

    def __init__(self, key: Any):
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for ``json.loads`` / ``json.JSONDecoder``: the object as a dict.

    Raises:
        DuplicateKeyError: a key occurs twice (linear in the number of keys).
    """
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKeyError(k)
        out[k] = v
    return out


@functools.lru_cache(maxsize=1)
def unique_key_loader() -> type:
    """A ``yaml.SafeLoader`` subclass for ``yaml.load(text, Loader=unique_key_loader())``.

    Its mapping constructor raises ``yaml.constructor.ConstructorError`` (a ``yaml.YAMLError``,
    with the key's line and column in ``problem_mark``) for a duplicate key — problem
    ``"duplicate key 'lr'"`` — and for an unhashable key (``? [a, b]``): the check runs before
    PyYAML's own mapping constructor, so it gives that constructor's error, problem ``"found
    unhashable key"``, not a ``TypeError``. Linear in the number of keys.
    """
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # a list or mapping as a key
                raise yaml.constructor.ConstructorError("while constructing a mapping", node.start_mark,
                                                        "found unhashable key", key_node.start_mark) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return UniqueKeyLoader
