"""Model loading: a name, directory or hub id -> an adapter behind `DiffusionModel`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from dlm_lsp.models.checkpoint import (
    MODEL_TYPE,
    local_directory,
    locate,
    not_ours,
    ours_as_published,
)
from dlm_lsp.models.interface import (
    DeviceUnavailable,
    DiffusionModel,
    ModelLoadError,
    command_line_message,
)
from dlm_lsp.models.registry import FAMILIES, Family, split_spec

if TYPE_CHECKING:
    import torch

# torch (1.5 s) is imported by the functions that load a model, not with the package:
# `dlm-lsp models` reads the registry, a submodule, and prints a static list.

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent.parent / "weights" / "default"
DEFAULT_SPEC = "default"  # the spec that names the shipped model

__all__ = ["DEFAULT_MODEL_DIR", "DEFAULT_SPEC", "DeviceUnavailable", "DiffusionModel",
           "ModelLoadError", "command_line_message", "device_name", "empty_spec", "load_model",
           "pick_device", "precision_name", "resolve_spec", "shipped_directory", "uses_graphs"]


def device_name(device: str) -> str:
    """The device a model set to `device` loads on, "auto" resolved as `pick_device` does,
    without failing (a "cuda" that is absent stays "cuda": the load says what is wrong).
    For what dlm/status shows before the model is loaded: "auto" says nothing."""
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def precision_name(precision: str, device: str) -> str:
    """The precision a model set to `precision` runs in on `device` (as `device_name`
    says it), "auto" resolved as the loader resolves it (tiny.resolve_precision), without
    failing (an unknown precision stays as written: the load says what is wrong)."""
    import torch

    from dlm_lsp.models.tiny import resolve_precision

    try:
        return resolve_precision(precision, torch.device(device))
    except (ModelLoadError, RuntimeError):  # RuntimeError: torch knows no such device
        return precision


def pick_device(device: str) -> torch.device:
    """Resolve auto/cpu/cuda, failing clearly when CUDA is asked for but absent."""
    import torch

    if device == "auto":
        return torch.device(device_name(device))
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DeviceUnavailable(device)
    return torch.device(device)


def load_model(spec: str, device: str = "auto", precision: str = "auto",
               graphs: bool = True) -> DiffusionModel:
    """Load the shipped default ("default"), a model directory or a hub id (`resolve_spec`),
    running in `precision` (auto, fp32, bf16; see tiny.resolve_precision).  Our own
    models replay their steps as CUDA graphs on a GPU unless `graphs` is False
    (models/graphs.py); published checkpoints run eagerly.

    A directory written by `dlm-lsp train` loads as our own model; any other is a
    published checkpoint whose family the registry detects from config.json, or
    that a prefix names ("dream:/models/dream-coder", see registry.split_spec).
    """
    from dlm_lsp.models.tiny import TinyModel

    head, sep, _ = spec.partition(":")
    ours, family, target = resolve_spec(spec)
    problem = empty_spec(spec)
    if problem:
        raise ModelLoadError(problem)
    try:
        path = locate(target)
    except ModelLoadError as exc:
        if sep and len(head) > 1 and family is None and not ours:  # a drive letter is not one
            raise ModelLoadError(f"{exc} ('{head}:' names no model family: "
                                 f"{', '.join([MODEL_TYPE, *FAMILIES])})") from exc
        raise
    model_type = _model_type(spec, path)
    if ours and model_type != MODEL_TYPE:
        raise ModelLoadError(f"model '{spec}': {not_ours(path, model_type)}")
    if model_type == MODEL_TYPE and family is None:
        return TinyModel.load(path, pick_device(device), name=spec, precision=precision,
                              graphs=graphs)
    if model_type == MODEL_TYPE:
        raise ModelLoadError(f"model '{spec}': {ours_as_published(path, family.name)}")
    from dlm_lsp.models.hf import load_checkpoint  # imports transformers: only when needed

    return load_checkpoint(path, pick_device(device), precision, family=family, name=spec)


def uses_graphs(spec: str) -> bool:
    """Whether model `spec` replays its steps as CUDA graphs on a GPU where `cudaGraphs`
    lets it: whether `load_model` loads it as one of our own models, told from the spec
    and its directory's config.json without loading it (a hub id's: its snapshot in the
    local hub cache, `checkpoint.local_directory`).  Published checkpoints run eagerly,
    so the switch changes nothing of them.  A model this cannot tell of, a hub id not in
    the cache (only a load fetches it) or a directory without a readable config.json
    (whose load fails), counts as one that does."""
    ours, family, target = resolve_spec(spec)
    if ours or family is not None:
        return ours
    if not target:  # "" names no model (the load says so), not the current directory
        return True
    path = local_directory(target)
    if path is None:
        return True
    try:
        return _model_type(spec, path) == MODEL_TYPE
    except ModelLoadError:
        return True


def shipped_directory(spec: str) -> Path | None:
    """The shipped model's directory where `spec` names it, else None.  Only the whole
    spec "default" does: "./default", or "dlm-tiny:default" (FAMILY:DIR), name a
    directory called default, as any other path does."""
    return DEFAULT_MODEL_DIR if spec == DEFAULT_SPEC else None


def resolve_spec(spec: str) -> tuple[bool, Family | None, str]:
    """What a model spec names, the one reading of a spec that the loader, `uses_graphs`,
    `models check` and `serve-remote` share: (ours, family, target), `target` being the
    directory or hub id to load.  (ours, None, rest) for our own family named by its
    prefix ("dlm-tiny:DIR"; `dlm-lsp models` lists it with the others), (False, family,
    rest) for a published one, (False, None, the shipped model's directory) for
    "default", whose family is detected as any directory's is, and (False, None, spec)
    where no prefix names a family."""
    shipped = shipped_directory(spec)
    if shipped is not None:
        return False, None, str(shipped)
    head, sep, rest = spec.partition(":")
    if sep and head.lower() == MODEL_TYPE:
        return True, None, rest
    family, target = split_spec(spec)
    return False, family, target


def empty_spec(spec: str) -> str | None:
    """Why a spec names no model at all, or None: "" or "dream:" read as the path "",
    which is the current directory, and loaded whatever was there (a model directory
    by chance, else an error about its config.json)."""
    ours, family, target = resolve_spec(spec)
    if target:
        return None
    if ours or family is not None:
        head = spec.partition(":")[0]
        return (f"model '{spec}' names no directory after '{head}:' (FAMILY:DIR, e.g. "
                f"'{head}:~/models/x')")
    return ("model '' is empty: use 'default', a model directory, FAMILY:DIR or a hub id "
            "(owner/name)")


def _model_type(spec: str, path: Path) -> object:
    """config.json's model_type in model directory `path` (None where it has none)."""
    config_file = path / "config.json"
    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"model '{spec}': cannot read {config_file}: {exc}") from exc
    if not isinstance(config, dict):  # said "'list' object has no attribute 'get'"
        raise ModelLoadError(f"model '{spec}': {config_file} is not a JSON object")
    return config.get("model_type")
