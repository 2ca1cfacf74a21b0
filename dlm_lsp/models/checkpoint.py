"""What a published model directory holds, read without building a model.

A Hugging Face checkpoint is a directory of JSON files (config.json,
generation_config.json, tokenizer_config.json), a tokenizer and safetensors
weights, one file or shards listed by model.safetensors.index.json.  Everything
the registry needs to recognise a family, and everything `dlm-lsp models check`
reports, comes from these files alone: the safetensors headers give every
tensor's name and shape without reading the weights, so a 7B checkpoint is
checked in a second.  Only safetensors are read (no pickle), and nothing here
imports code from the directory.

A model spec that is not a directory but looks like a hub id ("owner/name") is
fetched with `huggingface_hub` when the machine is online, JSON, tokenizer and
safetensors files only; offline (HF_HUB_OFFLINE=1) only the local hub cache is
looked at, and the error says where to put the files instead.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dlm_lsp.directories import not_a_directory
from dlm_lsp.models.interface import ModelLoadError
from dlm_lsp.models.tokenizer import Tokenizer

if TYPE_CHECKING:  # torch takes 1.5 s to import: `dlm-lsp models` lists families without it
    import torch

MODEL_TYPE = "dlm-tiny"  # config.json's model_type of our own models (models/tiny.py)
WEIGHTS_FILE = "model.safetensors"  # a model in one file
INDEX_FILE = "model.safetensors.index.json"  # or shards listed here (Hugging Face's layout)
CONFIG_FILE = "config.json"
GENERATION_CONFIG_FILE = "generation_config.json"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
VOCAB_FILE, MERGES_FILE, ADDED_TOKENS_FILE = "vocab.json", "merges.txt", "added_tokens.json"
# what a hub download fetches: never Python files, never pickled weights.  Not the *.py
# even with DLM_LSP_TRUST_REMOTE_CODE set: the `model` setting may come from a workspace
# (or a --tcp client), which would then choose whose code runs, fetched and run unasked.
DOWNLOAD_PATTERNS = ["*.json", "*.safetensors", MERGES_FILE]
REMOTE_CODE_ENV = "DLM_LSP_TRUST_REMOTE_CODE"
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
MODELS_HOME = Path("~/models")  # where error messages suggest putting a downloaded checkpoint


def not_ours(path: Path, model_type: object) -> str:
    """Why a directory named as one of our own models ("dlm-tiny:DIR", `models check
    --family dlm-tiny`) is not one."""
    return (f"{path / CONFIG_FILE} has model_type {model_type!r}, not {MODEL_TYPE!r}: this "
            "is not a model `dlm-lsp train` wrote; leave the family out to detect it")


def ours_as_published(path: Path, family: str) -> str:
    """Why a model `dlm-lsp train` wrote (the shipped one among them) is not read as the
    published family `family` ("dream:DIR", `models check default --family dream`): read
    as one, it failed on whichever of that family's conventions came first ("no token to
    end a span"), as if the model were broken rather than the family wrong."""
    return (f"{path / CONFIG_FILE} has model_type {MODEL_TYPE!r}: this is a model `dlm-lsp "
            f"train` wrote, not a {family} checkpoint; leave the family out (or name "
            f"{MODEL_TYPE}) to load it as one")


def _read_json(path: Path, required: bool = False) -> dict:
    """A JSON object from `path`; {} when it is absent and not required."""
    if not path.is_file():
        if required:
            raise ModelLoadError(f"{path.parent} has no {path.name}: not a model directory")
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path} is not a JSON object")
    return data


# The first line of a Git LFS pointer: what a repository cloned without Git LFS holds in
# place of each large file (a hub checkpoint's safetensors, often its tokenizer.json)
LFS_POINTER = b"version https://git-lfs.github.com/spec/"
LFS_POINTER_MAX = 1024  # a pointer is ~130 bytes; only files this small are read


def lfs_pointers(path: Path) -> list[str]:
    """The files of model directory `path` that a load reads (`DOWNLOAD_PATTERNS`: JSON,
    safetensors, merges) and that are Git LFS pointers, not the files.  Others are never
    read: a clone that pulled only the safetensors keeps its `pytorch_model.bin` pointer,
    and loads."""
    found = []
    for entry in sorted(path.iterdir()) if path.is_dir() else ():
        if not any(fnmatch.fnmatch(entry.name, pattern) for pattern in DOWNLOAD_PATTERNS):
            continue
        try:
            if entry.is_file() and entry.stat().st_size <= LFS_POINTER_MAX:
                with entry.open("rb") as handle:
                    if handle.read(len(LFS_POINTER)) == LFS_POINTER:
                        found.append(entry.name)
        except OSError:
            continue
    return found


def check_not_lfs_pointers(path: Path) -> None:
    """Refuse a directory cloned without Git LFS, naming its pointer files.  Their bytes
    reached safetensors, whose "header too large" said nothing of the cause, or the
    tokenizer's JSON reader."""
    pointers = lfs_pointers(path)
    if pointers:
        listed = ", ".join(pointers[:4]) + (" ..." if len(pointers) > 4 else "")
        are = "is a Git LFS pointer" if len(pointers) == 1 else "are Git LFS pointers"
        raise ModelLoadError(f"{path}: {listed} {are}, not the files (cloned without Git "
                             f"LFS): run `git lfs pull` in {path}, or download the "
                             "checkpoint with `hf download`")


def read_weight_map(path: Path) -> dict[str, str]:
    """The weight index's map of each tensor's name to its shard file, in the folder
    `path`, checked: `{"weight_map": 5}` was a traceback from `models check` and `fill`,
    and in the server an internal error at every fill, never a failed load."""
    weight_map = _read_json(path / INDEX_FILE).get("weight_map")
    if not isinstance(weight_map, dict) or not all(
            isinstance(name, str) and isinstance(shard, str)
            for name, shard in weight_map.items()):
        raise ModelLoadError(f"{path / INDEX_FILE} is no weight index: its \"weight_map\" "
                             "should map each tensor's name to its shard's file name; "
                             "download it again")
    return weight_map


def _token_text(value: object) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


@dataclass
class Checkpoint:
    """The JSON files of a model directory, and access to its tokenizer and tensors."""

    path: Path
    config: dict
    tokenizer_config: dict = field(default_factory=dict)
    generation_config: dict = field(default_factory=dict)

    @classmethod
    def read(cls, path: str | Path) -> Checkpoint:
        """Read the JSON files of `path` (config.json is required), in a directory that
        holds its files, not Git LFS pointers to them."""
        path = Path(path)
        check_not_lfs_pointers(path)
        return cls(path, _read_json(path / CONFIG_FILE, required=True),
                   _read_json(path / TOKENIZER_CONFIG_FILE),
                   _read_json(path / GENERATION_CONFIG_FILE))

    @property
    def model_type(self) -> str:
        """config.json's model_type ("" when missing)."""
        return str(self.config.get("model_type") or "")

    @property
    def architectures(self) -> list[str]:
        """config.json's architectures (the class names the checkpoint was saved from)."""
        return [str(a) for a in self.config.get("architectures") or []]

    def special_token(self, key: str) -> str | None:
        """The text of a special token named in tokenizer_config.json ("mask_token" ...)."""
        return _token_text(self.tokenizer_config.get(key))

    # --- tokenizer -------------------------------------------------------------------------

    def load_tokenizer(self) -> Tokenizer:
        """tokenizer.json, or a Qwen2-style byte-level BPE from vocab.json and merges.txt.

        Dream's checkpoints ship a slow tokenizer (vocab.json, merges.txt, the
        added tokens in tokenizer_config.json) whose class lives in remote code;
        it is Qwen2's tokenizer plus special tokens, so transformers' own
        Qwen2Tokenizer builds the same `tokenizers` pipeline without running it.
        """
        if (self.path / TOKENIZER_FILE).is_file():
            try:
                return Tokenizer.from_file(self.path / TOKENIZER_FILE)
            except Exception as exc:  # tokenizers raises a bare Exception
                raise ModelLoadError(f"cannot read {self.path / TOKENIZER_FILE}: {exc}") from exc
        if (self.path / VOCAB_FILE).is_file() and (self.path / MERGES_FILE).is_file():
            return self._bpe_tokenizer()
        raise ModelLoadError(f"no tokenizer in {self.path}: expected {TOKENIZER_FILE}, or "
                             f"{VOCAB_FILE} with {MERGES_FILE}")

    def added_tokens(self) -> dict[int, tuple[str, bool]]:
        """id -> (text, special) of the tokens added on top of the BPE vocabulary."""
        added: dict[int, tuple[str, bool]] = {}
        for content, i in _read_json(self.path / ADDED_TOKENS_FILE).items():
            added[int(i)] = (content, True)
        for i, entry in (self.tokenizer_config.get("added_tokens_decoder") or {}).items():
            if _token_text(entry) is not None:
                added[int(i)] = (_token_text(entry), bool(entry.get("special", True)))
        return added

    def _bpe_tokenizer(self) -> Tokenizer:
        try:
            from tokenizers import AddedToken
            from transformers import Qwen2Tokenizer
        except ImportError as exc:
            raise ModelLoadError(f"{self.path} has no {TOKENIZER_FILE}; building its tokenizer "
                                 "from vocab.json needs transformers: pip install -e '.[hf]'"
                                 ) from exc
        vocab = _read_json(self.path / VOCAB_FILE)
        lines = (self.path / MERGES_FILE).read_text(encoding="utf-8").splitlines()
        # only the `#version` header is not a merge: Qwen2's merges include `# #` (`##`)
        # and `# include`, and skipping every `#` line split `#include` in four
        merges = [tuple(line.split(" ")) for line in lines
                  if line and not line.startswith("#version")]
        if any(len(pair) != 2 for pair in merges):
            raise ModelLoadError(f"{self.path / MERGES_FILE} has a line that is not a pair")
        backend = Qwen2Tokenizer(vocab=vocab, merges=merges).backend_tokenizer
        for i, (content, special) in sorted(self.added_tokens().items()):
            if backend.token_to_id(content) is None:
                backend.add_tokens([AddedToken(content, special=special, normalized=False)])
            if backend.token_to_id(content) != i:
                raise ModelLoadError(f"tokenizer of {self.path}: added token {content!r} should "
                                     f"have id {i} but gets {backend.token_to_id(content)}; the "
                                     "added tokens do not follow the vocabulary")
        return Tokenizer(backend)

    # --- weights ---------------------------------------------------------------------------

    def weight_files(self) -> list[Path]:
        """The safetensors files holding the weights, checked to exist."""
        if (self.path / WEIGHTS_FILE).is_file():
            return [self.path / WEIGHTS_FILE]
        if not (self.path / INDEX_FILE).is_file():
            pickled = sorted(p.name for p in self.path.glob("*.bin"))
            hint = (f" (it has {', '.join(pickled)}: pickled weights are never loaded; convert "
                    "them to safetensors)") if pickled else ""
            raise ModelLoadError(f"no weights in {self.path}: expected {WEIGHTS_FILE} or "
                                 f"{INDEX_FILE}{hint}")
        names = sorted(set(read_weight_map(self.path).values()))
        outside = [n for n in names if Path(n).name != n]
        if outside:
            raise ModelLoadError(f"{INDEX_FILE} of {self.path} names files outside it: {outside}")
        missing = [n for n in names if not (self.path / n).is_file()]
        if missing:
            raise ModelLoadError(f"checkpoint {self.path} is incomplete: {len(missing)} of "
                                 f"{len(names)} shards missing ({', '.join(missing[:4])}"
                                 f"{' ...' if len(missing) > 4 else ''}); download it again")
        return [self.path / n for n in names]

    def tensor_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor's name and shape, from the safetensors headers alone."""
        shapes: dict[str, tuple[int, ...]] = {}
        for handle in self._open_all():
            with handle:
                for name in handle.keys():
                    shapes[name] = tuple(handle.get_slice(name).get_shape())
        index = self.path / INDEX_FILE
        if not (self.path / WEIGHTS_FILE).is_file() and index.is_file():
            listed = set(read_weight_map(self.path))
            absent = sorted(listed - set(shapes))
            if absent:
                raise ModelLoadError(f"shards of {self.path} lack tensors that {INDEX_FILE} "
                                     f"lists: {', '.join(absent[:4])}")
        return shapes

    def tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, tensor) of every weight, one shard open at a time."""
        for handle in self._open_all():
            with handle:
                for name in handle.keys():
                    yield name, handle.get_tensor(name)

    def _open_all(self) -> Iterator:
        from safetensors import safe_open

        for path in self.weight_files():
            try:
                handle = safe_open(str(path), framework="pt")
            except Exception as exc:  # safetensors raises its own SafetensorError
                raise ModelLoadError(f"cannot read {path} (truncated or not safetensors?): "
                                     f"{exc}") from exc
            yield handle


# --- where a spec's files are -------------------------------------------------------------


def _offline() -> bool:
    flag = os.environ.get("HF_HUB_OFFLINE", "").strip().upper()
    return flag in {"1", "ON", "YES", "TRUE"}


def is_hub_id(spec: str) -> bool:
    """Whether a model spec that is no directory reads as a hub id ("owner/name")."""
    return bool(HUB_ID.match(spec)) and not spec.startswith((".", "~"))


def suggested_directory(repo_id: str) -> Path:
    """Where to put a checkpoint downloaded elsewhere: ~/models/<name>."""
    return MODELS_HOME / repo_id.rsplit("/", 1)[-1]


def locate(spec: str) -> Path:
    """The directory of a model spec: the directory itself, or a hub id's snapshot."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    if not is_hub_id(spec):
        raise ModelLoadError(f"model '{spec}' not found: {not_a_directory(spec)}. Use "
                             "'default', a model directory, FAMILY:DIR (dream:DIR) or a hub id "
                             "(owner/name).")
    return _download(spec)


def cached_snapshot(spec: str) -> Path | None:
    """The local hub cache's snapshot of hub id `spec` that holds its config.json, read
    from the cache alone (never the network, online or not), or None where there is
    none: no such snapshot, not a hub id, no huggingface_hub.  For telling what a model
    is without fetching or loading it; the snapshot is the one a load takes offline
    (online, a load may fetch a newer one)."""
    if not is_hub_id(spec):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    found = try_to_load_from_cache(spec, CONFIG_FILE)
    return Path(found).parent if isinstance(found, str) else None


def local_directory(spec: str) -> Path | None:
    """The model directory `spec` names on this machine without fetching anything: the
    directory itself, or a hub id's snapshot in the local hub cache; None for neither.
    For telling what a model is before (or without) loading it."""
    path = Path(spec).expanduser()
    return path if path.is_dir() else cached_snapshot(spec)


def remote_code_allowed(path: str | Path | None = None) -> bool:
    """Whether the user turned on the own code of the checkpoint in `path`: every
    checkpoint's (DLM_LSP_TRUST_REMOTE_CODE=1), or that directory's alone where the
    variable names one (`=/home/me/models/LLaDA`).  Set to 1, a `model` setting from a
    workspace or a --tcp client chooses whose code runs; naming the directory, the user
    does, whatever they name."""
    value = os.environ.get(REMOTE_CODE_ENV, "").strip()
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if not value or value.lower() in {"0", "false", "no", "off"} or path is None:
        return False
    try:
        return Path(value).expanduser().resolve() == Path(path).expanduser().resolve()
    except (OSError, RuntimeError):
        return False


def _download(repo_id: str) -> Path:
    """A hub checkpoint's local snapshot (the cache only, when offline); the error of one
    that cannot be had says both readings of the spec, a path and a hub id."""
    target = suggested_directory(repo_id)
    how = (f"If it is a hub id: on a machine with access run `hf download {repo_id} "
           f"--local-dir {target}` (huggingface-cli download before huggingface_hub 1.0), "
           f"copy that directory here and set model to {target}")
    missing = f"model '{repo_id}' not found: {not_a_directory(repo_id)}, and as a hub id"
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise ModelLoadError(f"{missing} fetching it needs huggingface_hub (pip install -e "
                             f"'.[hf]'). {how}") from exc
    offline = _offline()
    try:
        return Path(snapshot_download(repo_id, allow_patterns=DOWNLOAD_PATTERNS,
                                      local_files_only=offline))
    except Exception as exc:  # hub errors: offline, not found, gated, network
        where = "it is not in the local hub cache (offline: HF_HUB_OFFLINE=1)" if offline \
            else f"it could not be downloaded ({type(exc).__name__}: {exc})"
        raise ModelLoadError(f"{missing} {where}. {how}") from exc
