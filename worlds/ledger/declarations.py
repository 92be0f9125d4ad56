"""Tool and entity-type declarations of the evidence-ledger tool world (SafeActBench).

Each tool a case may offer is declared once (:class:`ToolDecl`, with its parameters,
:class:`Param`, and the record a consequential tool creates, :class:`OutputDecl`); each table
of a case database is an :class:`EntityTypeDecl`. The prompt text, the JSON tool schema and the parser's
:class:`~forms_bench.actions.CallSpec` derive from a :class:`ToolDecl`; the world
(:mod:`worlds.ledger.tools`) executes its ``mode``. Each model checks itself on validation; the
case schema that refers to these declarations is :mod:`worlds.ledger.schema`, the checks of a
case against them :mod:`worlds.ledger.validation`.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from forms_bench.actions import CallSpec

ParamType = Literal["string", "number", "integer", "boolean"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def template_names(template: str) -> list[str]:
    """Placeholder names of a template (``"{key_id}-r"`` → ``["key_id"]``).

    A template is literal text with ``{name}`` placeholders; no other ``{`` or ``}`` is allowed.

    Raises:
        ValueError: a brace that is not part of a ``{name}`` placeholder.
    """
    rest = _PLACEHOLDER.sub("", template)
    if "{" in rest or "}" in rest:
        raise ValueError(f"template {template[:80]!r}: braces only around a placeholder name, e.g. {{celsius}}")
    return _PLACEHOLDER.findall(template)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Param(_Strict):
    """One tool parameter: name, JSON type and description (shown to the agent).

    ``minimum``: for ``number``/``integer`` parameters, the smallest accepted value (the
    shipped suite declares 0 for amounts and other quantities; the world rejects a smaller
    value with an error and changes nothing); None: any value. The prompt text and the JSON
    schema do not show it.
    """

    name: str
    type: ParamType = "string"
    description: str = ""
    required: bool = True
    minimum: Optional[float] = Field(default=None, allow_inf_nan=False)

    @model_validator(mode="after")
    def _check(self) -> "Param":
        if self.minimum is not None and self.type not in ("number", "integer"):
            raise ValueError(f"parameter {self.name}: minimum needs type number or integer, not {self.type}")
        return self


class OutputDecl(_Strict):
    """What a consequential tool returns and creates.

    The created record holds its new id, a link to the acted-on record (``link_field``, default
    the tool's id parameter; left out when it would be the new record's own id field), every
    other argument of the call, and ``status``.

    Attributes:
        entity_type: table the created record goes to (e.g. ``refund``), readable afterwards.
        field: name of the returned id in the result (e.g. ``refund_id``).
        prefix: id prefix (``RF`` gives ``RF-4821``, a number derived from the case, call and step).
        id_template: instead of ``prefix``, the new id computed from the call's arguments
            (``"{key_id}-r1"`` gives ``K-100-r1`` for ``key_id='K-100'``); a call whose id already
            exists is rejected and changes nothing. Exactly one of ``prefix`` and ``id_template``.
        status: ``status`` field of the created record.
        link_field: field of the created record holding the acted-on record's id.
        copy_target: the created record starts as a copy of the acted-on record's fields (as
            they were before the call; its id field left out) — e.g. a rotated key that
            becomes a new key with the same scope.
    """

    entity_type: str
    field: str
    prefix: Optional[str] = None
    id_template: Optional[str] = None
    status: str = "created"
    link_field: Optional[str] = None
    copy_target: bool = False

    @model_validator(mode="after")
    def _check(self) -> "OutputDecl":
        if (self.prefix is None) == (self.id_template is None):
            raise ValueError("give exactly one of prefix and id_template")
        if self.id_template is not None:
            if not template_names(self.id_template):
                raise ValueError("id_template: needs at least one {parameter} placeholder")
        return self


class ToolDecl(_Strict):
    """One tool, declared once; the prompt text and the JSON tool schema derive from it.

    ``mode`` fixes the semantics the world executes:

    - ``get`` (information): returns the record of ``entity_type`` whose id is ``id_param``
      (or, for a tool with a fixed ``entity_id`` and no id parameter, that one record — e.g.
      ``get_time()``); establishes every non-free-text field of that entity.
    - ``list`` (information): returns every record whose ``filter_field`` equals ``id_param``'s
      value (every record of the table when the tool has neither); establishes the same facts
      for each listed entity.
    - ``act`` (consequential): changes the target entity (``id_param``, or the fixed
      ``entity_id`` — e.g. ``set_thermostat(celsius)``) by ``effects`` (literal values) and
      ``computed_effects`` (values computed from the call); creates and returns an ``output``
      record id. With ``confirm`` the result only says the change was submitted, so the new
      state must be observed by a later read; without it the result reports (and establishes)
      the new field values.
    - ``decide`` (Legacy structured decision) and ``final`` (final message): end the episode.

    ``computed_effects`` maps a field to a template: ``"{celsius}"`` (exactly one placeholder)
    sets the argument's value with its type (a number stays a number); any other template
    (``"{key_id}-old"``, ``"{output}"``) sets the text with each ``{param}`` replaced by the
    argument and ``{output}`` by the id the call returns. Placeholders name required
    parameters (or ``output`` when the tool declares one).
    """

    name: str
    kind: Literal["information", "consequential", "decision", "final"]
    mode: Literal["get", "list", "act", "decide", "final"]
    description: str
    params: tuple[Param, ...] = ()
    entity_type: Optional[str] = None
    id_param: Optional[str] = None
    filter_field: Optional[str] = None
    entity_id: Optional[str] = None
    effects: dict[str, Any] = Field(default_factory=dict)
    computed_effects: dict[str, str] = Field(default_factory=dict)
    confirm: bool = False
    output: Optional[OutputDecl] = None

    @model_validator(mode="after")
    def _check(self) -> "ToolDecl":
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"tool {self.name}: duplicate parameter names")
        seen_optional = False
        for p in self.params:
            if p.required and seen_optional:
                raise ValueError(f"tool {self.name}: required parameter {p.name} after an optional one "
                                 "(required parameters come first)")
            seen_optional = seen_optional or not p.required
        if self.mode in ("get", "list", "act"):
            fixed = self.entity_id is not None and self.mode != "list"
            unfiltered = self.mode == "list" and self.id_param is None and self.filter_field is None
            if not self.entity_type or not (fixed or unfiltered or (self.id_param and self.id_param in names)):
                raise ValueError(f"tool {self.name}: {self.mode} needs entity_type and an id_param among its params"
                                 + ("" if self.mode == "list" else " (or a fixed entity_id)"))
            if fixed and self.id_param is not None:
                raise ValueError(f"tool {self.name}: give either id_param or a fixed entity_id, not both")
            if self.id_param is not None and not next(p for p in self.params if p.name == self.id_param).required:
                raise ValueError(f"tool {self.name}: id_param {self.id_param} must be a required parameter")
            if fixed and self.mode == "get" and any(p.required for p in self.params):
                raise ValueError(f"tool {self.name}: get with a fixed entity_id takes no required parameter")
        if self.entity_id is not None and self.mode not in ("get", "act"):
            raise ValueError(f"tool {self.name}: entity_id (a fixed record) is only for get and act tools")
        if self.mode == "list" and self.id_param is not None and not self.filter_field:
            raise ValueError(f"tool {self.name}: list needs filter_field")
        if self.mode == "list" and self.filter_field and self.id_param is None:
            raise ValueError(f"tool {self.name}: list with filter_field needs an id_param among its params")
        expected_kind = {"get": "information", "list": "information", "act": "consequential",
                         "decide": "decision", "final": "final"}[self.mode]
        if self.kind != expected_kind:
            raise ValueError(f"tool {self.name}: mode {self.mode} must have kind {expected_kind}")
        if (self.computed_effects or self.output is not None) and self.mode != "act":
            raise ValueError(f"tool {self.name}: computed_effects and output are only for act tools")
        required = {p.name for p in self.params if p.required}
        for fld, tpl in self.computed_effects.items():
            if fld in self.effects:
                raise ValueError(f"tool {self.name}: computed_effects.{fld}: also set by effects")
            for ph in template_names(tpl):
                if ph == "output" and self.output is not None:
                    continue
                if ph not in required:
                    raise ValueError(f"tool {self.name}: computed_effects.{fld}: placeholder {{{ph}}} must name a "
                                     "required parameter" + (" or {output}" if self.output is not None else ""))
        if self.output is not None and self.output.id_template is not None:
            for ph in template_names(self.output.id_template):
                if ph not in required:
                    raise ValueError(f"tool {self.name}: output.id_template: placeholder {{{ph}}} must name a "
                                     "required parameter")
        return self

    def call_spec(self) -> CallSpec:
        """The parser's :class:`~forms_bench.actions.CallSpec` (leading required parameters)."""
        required = 0
        for p in self.params:
            if not p.required:
                break
            required += 1
        return CallSpec(self.name, tuple(p.name for p in self.params), required,
                        self.description, {p.name: p.type for p in self.params})

    def signature(self) -> str:
        """``refund_charge(charge_id: string, amount: number)``."""
        return f"{self.name}(" + ", ".join(f"{p.name}: {p.type}" for p in self.params) + ")"

    def prompt_text(self) -> str:
        """Prompt lines: signature, ``[information]``/``[consequential]`` tag, description, parameters."""
        lines = [f"{self.signature()}  [{self.kind}]", f"    {self.description}"]
        lines += [f"    - {p.name}: {p.description}" for p in self.params if p.description]
        return "\n".join(lines)

    def compact_text(self) -> str:
        """One prompt line: ``name(param, ...) [kind]: first clause of the description``
        (about a third of :meth:`prompt_text`'s tokens; for small models and short contexts)."""
        first = self.description.split(";")[0].split(". ")[0].rstrip(".")
        return f"{self.name}({', '.join(p.name for p in self.params)}) [{self.kind}]: {first}"

    def json_schema(self) -> dict:
        """OpenAI-style tool schema, with parameter descriptions and an ``x-kind`` tag."""
        schema = self.call_spec().json_schema()
        props = schema["function"]["parameters"]["properties"]
        for p in self.params:
            if p.description:
                props[p.name]["description"] = p.description
        schema["function"]["x-kind"] = self.kind
        return schema


class EntityTypeDecl(_Strict):
    """A table of the case database: its id field and its designated free-text fields.

    Free-text fields (notes, comments, descriptions) are shown in tool results but never
    establish facts; they are where an adversary's text can be rendered.
    """

    name: str
    id_field: str
    text_fields: tuple[str, ...] = ()
