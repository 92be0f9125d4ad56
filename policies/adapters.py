"""Role adapters: ``executor``, ``curriculum``, ``adversary`` as named peft LoRA adapters on one
frozen backbone (one ``PeftModel``), saved and loaded by role and version (``executor@3``).

* The backbone with every adapter disabled (:func:`reference_policy`) is the reference policy
  π_0 of the KL term (AdvSim2Real's update; DESIGN.md "Rewards").
* Only the active adapter is trainable at a time (:func:`activate`); peft's own
  ``set_adapter`` is used, which marks the other adapters' weights ``requires_grad=False``.
* An adapter version on disk is a peft adapter folder (``adapter_config.json`` +
  ``adapter_model.safetensors``) that vLLM's ``LoRARequest`` loads as is, plus
  ``advsim-manifest.json`` (role, version, SHA-256 per file). Folders are written to a
  temporary sibling and renamed into place (atomic); the layout is ``<root>/<role>@<version>/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from forms_bench.unique_keys import loads

ROLES: tuple[str, ...] = ("executor", "curriculum", "adversary")
"""The three role adapters, in this order on the PeftModel."""

DEFAULT_TARGET_MODULES: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj",
                                           "gate_proj", "up_proj", "down_proj")
"""Llama projection layers given LoRA weights (all supported by vLLM's LoRA layers)."""

_REF = re.compile(r"^(executor|curriculum|adversary)@(\d+)$")


@dataclass(frozen=True, order=True)
class AdapterRef:
    """One version of one role adapter, written ``"executor@3"``.

    Attributes:
        role: one of :data:`ROLES`.
        version: integer ≥ 0; version 0 is the freshly initialised adapter.
    """

    role: str
    version: int = 0

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r}; expected one of {', '.join(ROLES)}")
        if not isinstance(self.version, int) or isinstance(self.version, bool) or self.version < 0:
            raise ValueError(f"adapter version must be an int >= 0, got {self.version!r}")

    @classmethod
    def parse(cls, text: "str | AdapterRef") -> "AdapterRef":
        """Parse ``"executor@3"`` (a bare role means version 0).

        Raises:
            ValueError: unknown role or malformed version.
        """
        if isinstance(text, AdapterRef):
            return text
        if text in ROLES:
            return cls(text, 0)
        m = _REF.match(str(text))
        if not m:
            raise ValueError(f"adapter reference {text!r} is not `<role>@<version>` with role in "
                             f"{', '.join(ROLES)} and an integer version")
        return cls(m.group(1), int(m.group(2)))

    def __str__(self) -> str:
        return f"{self.role}@{self.version}"


def lora_config(r: int = 8, alpha: int = 16, target_modules: Sequence[str] = DEFAULT_TARGET_MODULES,
                init_lora_weights: bool = True):
    """The LoRA configuration every role uses (peft ``LoraConfig``, causal LM, no dropout, no bias).

    ``init_lora_weights=True`` (peft's default) makes B = 0, so a fresh adapter equals the
    backbone; ``False`` initialises both A and B randomly (tests and benchmarks that need
    adapters that change the outputs).
    """
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0, bias="none",
                      target_modules=list(target_modules), task_type="CAUSAL_LM",
                      init_lora_weights=init_lora_weights)


def attach_role_adapters(base, roles: Sequence[str] = ROLES, config=None, seed: int = 0):
    """Wrap a (frozen) backbone into one ``PeftModel`` holding one LoRA adapter per role.

    Args:
        base: a transformers causal LM (from :func:`policies.backbone.load_backbone`).
        roles: adapter names to create, each in :data:`ROLES`.
        config: a peft ``LoraConfig`` (default :func:`lora_config`); the same for every role.
        seed: ``torch.manual_seed`` before each adapter's initialisation is ``seed + index``.

    Returns:
        The ``PeftModel``; the first role is active (peft: only its weights require grad).
    """
    import torch
    from peft import get_peft_model

    cfg = config if config is not None else lora_config()
    for r in roles:
        AdapterRef(r)  # validates the name
    torch.manual_seed(seed)
    model = get_peft_model(base, cfg, adapter_name=roles[0])
    for i, r in enumerate(roles[1:], start=1):
        torch.manual_seed(seed + i)
        model.add_adapter(r, cfg)
    model.set_adapter(roles[0])
    return model


def activate(model, role: str) -> None:
    """Make ``role`` the active (and only trainable) adapter of ``model``."""
    AdapterRef(role)
    model.set_adapter(role)


@contextlib.contextmanager
def reference_policy(model) -> Iterator[None]:
    """Context in which ``model`` computes the backbone alone (every adapter disabled): π_0."""
    with model.disable_adapter():
        yield


def randomize_adapter(model, role: str, seed: int, scale: float = 0.02) -> None:
    """Fill ``role``'s LoRA A and B matrices with seeded N(0, scale²) values (tests, benchmarks).

    A fresh peft adapter has B = 0 and so no effect; this makes the three adapters differ from
    each other and from the backbone by a controlled amount.
    """
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if f".{role}." in name and ("lora_A" in name or "lora_B" in name):
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32).to(p.dtype) * scale)


def adapter_state(model, role: str) -> dict:
    """A detached copy of ``role``'s LoRA weights, keyed as in peft's saved files."""
    from peft import get_peft_model_state_dict

    return {k: v.detach().clone() for k, v in get_peft_model_state_dict(model, adapter_name=role).items()}


def adapter_dir(root: str | os.PathLike, ref: "AdapterRef | str") -> Path:
    """Folder of one adapter version: ``<root>/<role>@<version>``."""
    return Path(root) / str(AdapterRef.parse(ref))


def save_adapter(model, ref: "AdapterRef | str", root: str | os.PathLike) -> Path:
    """Save the current weights of adapter ``ref.role`` as version ``ref.version``, atomically.

    The folder holds what ``peft`` writes (``adapter_config.json``,
    ``adapter_model.safetensors``; loadable by vLLM's ``LoRARequest``) plus
    ``advsim-manifest.json``. An existing folder of the same version is replaced. Byte-identical
    for the same weights in any process (``target_modules`` is written sorted).

    Returns:
        The adapter folder.
    """
    from policies.backbone import atomic_save_dir, sha256_file
    from forms_bench.atomic import atomic_write_json

    ref = AdapterRef.parse(ref)
    target = adapter_dir(root, ref)

    def write(tmp: Path) -> None:
        model.save_pretrained(str(tmp), selected_adapters=[ref.role], safe_serialization=True)
        # peft writes a non-"default" adapter into a sub-folder named after it: flatten it.
        sub = tmp / ref.role
        if sub.is_dir():
            for p in sub.iterdir():
                os.replace(p, tmp / p.name)
            sub.rmdir()
        for stray in ("README.md",):
            if (tmp / stray).exists():
                (tmp / stray).unlink()
        # peft keeps target_modules as a set and writes it in hash-seed order: sort it, so the
        # same adapter gives the same bytes in every process
        cfg_file = tmp / "adapter_config.json"
        cfg = json.loads(cfg_file.read_text())
        if isinstance(cfg.get("target_modules"), list):
            cfg["target_modules"] = sorted(cfg["target_modules"])
            atomic_write_json(cfg_file, cfg)
        files = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        atomic_write_json(tmp / "advsim-manifest.json",
                          {"role": ref.role, "version": ref.version, "files": files})

    return atomic_save_dir(target, write)


def load_adapter(model, ref: "AdapterRef | str", root: str | os.PathLike, verify: bool = True) -> Path:
    """Load version ``ref`` from ``root`` into the adapter slot named ``ref.role`` of ``model``.

    The weights are copied into the existing slot with peft's ``set_peft_model_state_dict``
    (the slot's LoRA configuration must match); if the model has no such slot it is added with
    ``load_adapter``. Values are copied bit for bit.

    Raises:
        FileNotFoundError: no such adapter version.
        ValueError: ``verify`` and a file does not match the manifest's SHA-256.
    """
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    from policies.backbone import sha256_file

    ref = AdapterRef.parse(ref)
    folder = adapter_dir(root, ref)
    weights = folder / "adapter_model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(f"adapter {ref} not found: {weights} does not exist")
    if verify:
        man = loads((folder / "advsim-manifest.json").read_text())
        for name, digest in man["files"].items():
            if sha256_file(folder / name) != digest:
                raise ValueError(f"adapter {ref}: {name} does not match its manifest SHA-256")
    if ref.role in getattr(model, "peft_config", {}):
        res = set_peft_model_state_dict(model, load_file(str(weights)), adapter_name=ref.role)
        unexpected = getattr(res, "unexpected_keys", None)
        if unexpected:
            raise ValueError(f"adapter {ref}: unexpected keys {unexpected[:3]}")
    else:
        model.load_adapter(str(folder), adapter_name=ref.role, is_trainable=True)
    return folder


def latest_version(root: str | os.PathLike, role: str) -> int | None:
    """Highest saved version of ``role`` under ``root`` (folders with a manifest), or None."""
    AdapterRef(role)
    best = None
    root = Path(root)
    if not root.is_dir():
        return None
    for p in root.iterdir():
        m = _REF.match(p.name)
        if m and m.group(1) == role and (p / "advsim-manifest.json").is_file():
            v = int(m.group(2))
            best = v if best is None or v > best else best
    return best
