"""JSON objects and YAML mappings that refuse a key written twice, nesting past a fixed depth and
(YAML) aliases and merge keys.

``json.loads`` and PyYAML's ``SafeLoader`` keep the last of two equal keys silently: a user who
writes ``lr:`` twice in a config, or a model that writes ``"seed"`` twice in a proposal, gets one
of them without a word. Every reader of such input in the project uses these two hooks: configs
(``advsim.config``), page specs (``forms_bench.page_spec``), a user's ledger cases
(``worlds.ledger.own``), a ledger suite file (``worlds.ledger.suite``), role outputs
(``policies.roles``), reactive adversaries' replies (``advsim.envs.adversaries``), the run
directory's files (``advsim.run``: ``events.jsonl`` rows, checkpoint ``state.json``,
``tokenizer.json``, the saved ``config.yaml``; ``advsim.evaluate``: ``eval.json``), checkpoint and
adapter manifests (``policies.backbone``, ``policies.adapters``) and the task server's event
bodies (``forms_bench.server``). ``yaml`` is imported on first use only.

The same readers bound nesting at :data:`MAX_JSON_DEPTH` arrays/objects (sequences/mappings):
JSON before decoding (:func:`check_json_depth`), YAML while composing (:func:`unique_key_loader`).
``json``'s C decoder and PyYAML's composer recurse once per level and stopped only at the
interpreter's recursion limit, which any imported library may raise (``torch._inductor`` sets
2,000): "too deep" then depended on what was imported before, and with a limit raised far enough a
100,000-bracket YAML file took minutes and JSON could overflow the C stack. A fixed limit gives one
error, at one position, in linear time.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

MAX_JSON_DEPTH = 200
"""Deepest nesting of arrays/objects (JSON) or sequences/mappings (YAML) any reader accepts; our
files and model outputs nest 5 levels at most."""

# a JSON string (closed or running to the end of the text) or one bracket: strings are skipped whole
_JSON_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, not Python's (no NBSP, no U+2028)
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice; ``key`` is that key. Each reader turns it into its own
    error type (with the file or role it reads)."""

    def __init__(self, key: Any):
        super().__init__(f"duplicate key {key!r}")
        self.key = key


class JsonDepthError(json.JSONDecodeError):
    """JSON nested deeper than :data:`MAX_JSON_DEPTH`: a ``json.JSONDecodeError`` (so each reader's
    own handler words it) whose ``pos`` is the first bracket past the limit."""


def check_json_depth(text: str, start: int = 0, limit: int = MAX_JSON_DEPTH) -> None:
    """Check that the JSON value beginning at ``text[start:]`` (after whitespace) nests at most
    ``limit`` arrays/objects deep. Brackets inside strings do not count; the scan ends where that
    value's brackets close, so text after it is not looked at; nothing is checked when the value is
    not an array or object. Linear in the length scanned; it does not validate the JSON.

    Raises:
        JsonDepthError: msg ``"nested deeper than {limit} levels"``, at the offending bracket.
    """
    m = _JSON_SPACE.match(text, start)
    if m.end() >= len(text) or text[m.end()] not in "[{":
        return
    depth = 0
    for tok in _JSON_TOKEN.finditer(text, m.end()):
        c = text[tok.start()]
        if c in "[{":
            depth += 1
            if depth > limit:
                raise JsonDepthError(f"nested deeper than {limit} levels", text, tok.start())
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return


def loads(text: str) -> Any:
    """``json.loads(text)`` with :func:`unique_object` and :func:`check_json_depth`.

    Raises:
        json.JSONDecodeError: invalid JSON, :class:`JsonDepthError` included.
        DuplicateKeyError: an object names a key twice.
    """
    check_json_depth(text)
    return json.loads(text, object_pairs_hook=unique_object)


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

    It refuses nesting deeper than :data:`MAX_JSON_DEPTH` sequences/mappings while composing:
    ``yaml.composer.ComposerError`` (a ``yaml.YAMLError``), problem ``"nested deeper than 200
    levels"``, marked at the collection that goes past it; and aliases (``*name``): each would
    add its anchor's depth again and share its size (a 400-byte file of nested aliases stands for
    gigabytes once printed), so problem ``"aliases (*name) are not supported: write the value
    out"``. Merge keys (``<<``) are refused too (``ConstructorError``, ``"merge keys (<<) are not
    supported: write the keys out"``; PyYAML's merge is exponential in nested merges), and so are
    ``!!set``, ``!!omap`` and ``!!pairs`` (``"!!omap is not supported: write a list or a mapping"``:
    PyYAML builds them past the duplicate-key check). Its mapping
    constructor raises ``yaml.constructor.ConstructorError`` (a ``yaml.YAMLError``,
    with the key's line and column in ``problem_mark``) for a duplicate key — problem
    ``"duplicate key 'lr'"`` — and for an unhashable key (``? [a, b]``): the check runs before
    PyYAML's own mapping constructor, so it gives that constructor's error, problem ``"found
    unhashable key"``, not a ``TypeError``. Linear in the number of keys. Mappings are built as
    PyYAML builds them, from its queue rather than by recursion: a 200-level document needs what the
    composer needs (~625 interpreter frames in all; 825 with a recursive constructor).
    """
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        _depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise yaml.composer.ComposerError(None, None, "aliases (*name) are not supported: write the value out",
                                                  self.peek_event().start_mark)
            nested = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
            if nested:
                self._depth += 1
                if self._depth > MAX_JSON_DEPTH:
                    raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_JSON_DEPTH} levels",
                                                      self.peek_event().start_mark)
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= nested

    def mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        # a generator, as PyYAML's own mapping constructor is: the mapping is handed out first and
        # filled later from the loader's queue, so construction does not recurse once per level
        data: dict = {}
        yield data
        seen: set = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise yaml.constructor.ConstructorError(None, None, "merge keys (<<) are not supported: write the keys out",
                                                        key_node.start_mark)
            key = loader.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # a list or mapping as a key
                raise yaml.constructor.ConstructorError("while constructing a mapping", node.start_mark,
                                                        "found unhashable key", key_node.start_mark) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        data.update(yaml.SafeLoader.construct_mapping(loader, node, deep))

    def unsupported(loader: Any, node: Any) -> None:
        name = node.tag.rsplit(":", 1)[-1]
        raise yaml.constructor.ConstructorError(None, None, f"!!{name} is not supported: write a list or a mapping",
                                                node.start_mark)

    UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    for tag in ("set", "omap", "pairs"):  # PyYAML builds them without the duplicate-key check above
        UniqueKeyLoader.add_constructor(f"tag:yaml.org,2002:{tag}", unsupported)
    return UniqueKeyLoader
