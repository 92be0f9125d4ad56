"""A safe YAML loader whose mappings refuse a key written twice, or a key that is a list or a
mapping.

PyYAML's ``SafeLoader`` keeps the last of two equal keys silently; a user who writes
``lr:`` twice in a config gets one of them without a word. The check here runs before PyYAML's
own mapping constructor, so it must also refuse what that constructor would refuse — an
unhashable key (``? [a, b]\\n: 1``) — with PyYAML's own error instead of a ``TypeError``. Used for
training configs (``advsim.config``) and page specs (``forms_bench.page_spec``); ``yaml`` is
imported on first use only.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=1)
def unique_key_loader() -> type:
    """A ``yaml.SafeLoader`` subclass for ``yaml.load(text, Loader=unique_key_loader())``.

    Its mapping constructor raises ``yaml.constructor.ConstructorError`` (a ``yaml.YAMLError``,
    with the key's line and column in ``problem_mark``) for a duplicate key — problem
    ``"duplicate key 'lr'"`` — and for an unhashable key — problem ``"found unhashable key"``,
    as PyYAML says it. Linear in the number of keys.
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
