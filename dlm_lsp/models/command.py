"""`dlm-lsp models`: the supported families, and a check of a checkpoint directory.

`dlm-lsp models` lists what the registry knows.  `dlm-lsp models check DIR`
answers "will the server load this directory, and as what?" before a user
points the server at it: the family (detected or named with --family), the
mask and end-of-span tokens, whether logits are shifted, vocabulary sizes and
the parameter count, all from config.json, the tokenizer and the safetensors
headers (seconds, even for 7B), with every problem a partial or broken download
has (a missing shard, no tokenizer, vocabularies that disagree).  `--load` also
loads the model on a device and times one forward pass.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field

from dlm_lsp.arguments import parse_arguments
from dlm_lsp.config import DEVICES, PRECISIONS
from dlm_lsp.directories import not_a_directory
from dlm_lsp.held_signals import import_torch
from dlm_lsp.models import empty_spec, pick_device, resolve_spec
from dlm_lsp.models.checkpoint import (
    MODEL_TYPE,
    Checkpoint,
    is_hub_id,
    local_directory,
    not_ours,
    ours_as_published,
    suggested_directory,
)
from dlm_lsp.models.interface import DeviceUnavailable, ModelLoadError, command_line_message
from dlm_lsp.models.registry import FAMILIES, conventions, detect, family_named


@dataclass
class Report:
    """What `models check` found in a directory; `problems` empty means it loads."""

    directory: str
    family: str = ""
    detected: bool = True  # False when --family named it
    model_type: str = ""
    shifted: bool | None = None
    mask: str = ""  # "id (text)"
    end: str = ""
    framing: str = ""
    tokenizer_vocab: int | None = None
    model_vocab: int | None = None
    parameters: int | None = None
    weight_files: int | None = None
    context: int | None = None
    forward_ms: float | None = None  # with --load
    loaded_on: str = ""  # the device its weights were loaded on; "" when read, not loaded
    # the device the server would load it on, its device setting (--device, default auto)
    # resolved here: our own model is checked by a load on the CPU, which it need not be
    serves_on: str = ""
    # DLM_LSP_TRUST_REMOTE_CODE is set: the load runs the checkpoint's own code, which
    # this check only finds (`hf.own_code_problems`), never runs
    own_code: bool = False
    problems: list[str] = field(default_factory=list)


def _token(tokenizer, i: int | None) -> str:
    if i is None:
        return "-"
    text = tokenizer.backend.id_to_token(i) if tokenizer is not None else None
    return f"{i} ({text})" if text else str(i)


def _local(spec: str) -> tuple[str | None, str]:
    """The directory `models check` reads for `spec`, or None and why there is none.

    A hub id, which the `model` setting takes, is its snapshot in the local hub cache
    (never fetched): it was read as a directory name, "owner/name has no config.json",
    as was a mistyped path, which is no directory at all.  `spec` is resolved already
    (`resolve_spec`): "default" came as the shipped model's directory."""
    local = local_directory(spec)
    if local is not None:
        return str(local), ""
    if not is_hub_id(spec):
        return None, not_a_directory(spec)
    return None, (f"{not_a_directory(spec)}, and {spec} is not a hub id in the local hub "
                  f"cache; `models check` reads local files only: if it is a hub id, run "
                  f"`hf download {spec} --local-dir {suggested_directory(spec)}` and check "
                  "that directory")


def _names_ours(family_name: str) -> bool:
    """Whether --family names our own family (as "dlm-tiny:DIR" does for the loader)."""
    return family_name.lower() == MODEL_TYPE


def _spec_family(spec: str, family_name: str | None) -> tuple[str | None, str]:
    """The family and directory of `spec` (`resolve_spec`: "default" is the shipped
    model's directory, "dlm-tiny:default" one called default, as the loader reads
    them), which may name its family as the `model` setting does ("dream:DIR",
    "dlm-tiny:DIR"; it was read as a directory name, "not a directory"), or with
    --family (`family_name`), or both if they agree."""
    problem = empty_spec(spec)
    if problem:  # "" was the current directory
        raise ModelLoadError(problem)
    ours, family, directory = resolve_spec(spec)
    if not ours and family is None:
        return family_name, directory
    named = MODEL_TYPE if ours else family.name
    if family_name is not None and named != (
            MODEL_TYPE if _names_ours(family_name) else family_named(family_name).name):
        raise ModelLoadError(f"'{spec}' names family {named}, --family {family_name}: give one")
    return named, directory


def inspect(directory: str, family_name: str | None = None) -> Report:
    """Check a checkpoint directory (or a hub id's cached snapshot) without loading its
    weights."""
    report = Report(directory)
    try:
        family_name, directory = _spec_family(directory, family_name)
    except ModelLoadError as exc:
        report.problems.append(str(exc))
        return report
    local, problem = _local(directory)
    if local is None:
        report.problems.append(problem)
        return report
    report.directory = directory = local
    try:
        checkpoint = Checkpoint.read(directory)
    except ModelLoadError as exc:
        report.problems.append(str(exc))
        return report
    report.model_type = checkpoint.model_type
    # our own family may be named too, as the loader's "dlm-tiny:DIR" names it (it was
    # "unknown model family 'dlm-tiny'", though `dlm-lsp models` lists it)
    ours = family_name is not None and _names_ours(family_name)
    if checkpoint.model_type == MODEL_TYPE and (family_name is None or ours):
        report.family, report.detected = MODEL_TYPE, not ours
        _load_our_own(report)
        return report
    if ours:
        report.problems.append(not_ours(checkpoint.path, checkpoint.model_type))
        return report
    if checkpoint.model_type == MODEL_TYPE:  # and a published family is named
        try:
            family = family_named(family_name)
        except ModelLoadError as exc:  # an unknown name is the first thing to say
            report.problems.append(str(exc))
        else:
            report.problems.append(ours_as_published(checkpoint.path, family.name))
        return report
    try:
        tokenizer = checkpoint.load_tokenizer()
        report.tokenizer_vocab = tokenizer.vocab_size
        family = family_named(family_name) if family_name else detect(checkpoint, tokenizer)
        report.family, report.detected, report.shifted = family.name, not family_name, \
            family.shifted
        conv = conventions(family, checkpoint, tokenizer)
    except ModelLoadError as exc:
        report.problems.append(str(exc))
        return report
    report.mask, report.end = _token(tokenizer, conv.mask_id), _token(tokenizer, conv.end_id)
    report.framing = " ".join([*(_token(tokenizer, i) for i in conv.before), "<sequence>",
                               *(_token(tokenizer, i) for i in conv.after)])
    from dlm_lsp.models.hf import (
        arch_config,
        context_length,
        own_code_problems,
        remote_code_allowed,
        weight_problems,
    )

    # the load builds the checkpoint's own class, unchecked here but for its code's files
    report.own_code = remote_code_allowed(checkpoint.path)
    try:
        config = None if report.own_code else arch_config(family, checkpoint)
        report.weight_files = len(checkpoint.weight_files())
        shapes = checkpoint.tensor_shapes()
        if report.own_code:
            report.problems += own_code_problems(checkpoint)
    except ModelLoadError as exc:
        report.problems.append(str(exc))
        return report
    report.parameters = sum(math.prod(s) for s in shapes.values())
    report.context = context_length(checkpoint, family) - len(conv.before) - len(conv.after)
    if config is None:
        return report
    report.model_vocab = config.vocab_size
    report.problems += weight_problems(family, config, shapes)
    if tokenizer.vocab_size > config.vocab_size:
        report.problems.append(f"the tokenizer has {tokenizer.vocab_size} ids but the model only "
                               f"{config.vocab_size} rows (vocabulary sizes disagree)")
    if conv.mask_id >= config.vocab_size:
        report.problems.append(f"mask id {conv.mask_id} is outside the model's vocabulary")
    return report


def _load_our_own(report: Report) -> None:
    """Check one of our own models by loading it on the CPU, which every machine has: it
    is small (tens of MB at most), and only a load finds what a partial copy lacks (its
    tokenizer, its weights or a shard), which a check that read config.json alone passed.
    The server loads it where its device setting says (cuda where available): the
    verdict names both (`Report.serves_on`)."""
    torch = import_torch()  # a Ctrl-C meanwhile is not lost (held_signals)

    from dlm_lsp.models.tiny import TinyModel

    try:
        model = TinyModel.load(report.directory, torch.device("cpu"), graphs=False)
    except ModelLoadError as exc:
        report.problems.append(str(exc))
        return
    report.tokenizer_vocab = model.tokenizer.vocab_size
    report.parameters = sum(p.numel() for p in model.module.parameters())
    report.loaded_on = "cpu"


def time_forward(report: Report, device: str, precision: str) -> None:
    """Load the model for real and time one forward pass of 256 tokens."""
    torch = import_torch()

    from dlm_lsp.models import load_model

    spec = f"{report.family}:{report.directory}"
    try:
        model = load_model(spec, device, precision)
        ids = torch.full((1, 256), model.mask_id, dtype=torch.long)
        model.logits(ids)  # warm up
        start = time.perf_counter()
        model.logits(ids)
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        report.forward_ms = round((time.perf_counter() - start) * 1000, 1)
        report.loaded_on = str(model.device)
    except (ModelLoadError, RuntimeError) as exc:
        report.problems.append(f"loading failed: {command_line_message(exc)}")


def print_report(report: Report) -> None:
    rows = {"directory": report.directory,  # a family only where one was found
            "family": report.family and f"{report.family} "
                      f"({'detected' if report.detected else 'named'})",
            "model_type": report.model_type, "logits shifted": report.shifted,
            "mask": report.mask, "span end": report.end, "framing": report.framing,
            "tokenizer vocabulary": report.tokenizer_vocab, "model vocabulary": report.model_vocab,
            "parameters": f"{report.parameters:,}" if report.parameters else None,
            "weight files": report.weight_files, "context tokens": report.context,
            "model code": "its own (DLM_LSP_TRUST_REMOTE_CODE is set)" if report.own_code
            else None,
            "forward ms (256 tokens)": report.forward_ms}
    width = max(map(len, rows))
    for key, value in rows.items():
        if value not in (None, ""):
            print(f"{key:<{width}}  {value}")
    for problem in report.problems:
        print(f"problem: {problem}", file=sys.stderr)
    print(verdict(report), file=sys.stderr)


def verdict(report: Report) -> str:
    """The closing line, saying what was checked.  A published checkpoint is checked from
    config.json, the tokenizer and the safetensors headers without loading its weights
    (seconds, even for 7B), and that check was called "ok: the server can load it": a
    truncated shard, or one the device cannot hold, fails only in a real load."""
    if report.problems:
        return f"{len(report.problems)} problem(s)"
    if report.loaded_on and report.serves_on and (
            report.serves_on.split(":")[0] != report.loaded_on.split(":")[0]):
        # "loaded on cpu" read as where the server runs it, on a machine with CUDA
        return (f"ok: the server can load it (this check loaded it on {report.loaded_on}; "
                f"the server would load it on {report.serves_on})")
    if report.loaded_on:
        return f"ok: the server can load it (loaded on {report.loaded_on})"
    if report.own_code:
        return ("ok: the tokenizer, the safetensors headers and the code config.json names "
                "are there; the code was not run (--load runs it, loads the weights and "
                "times a forward pass)")
    return ("ok: config.json, the tokenizer and the safetensors headers agree; the weights "
            "were not loaded (--load loads them and times a forward pass)")


def print_families() -> None:
    print(f"{MODEL_TYPE}: our own bidirectional transformer ('default', or a directory "
          "written by dlm-lsp train)\n")
    for family in FAMILIES.values():
        print(f"{family.name}: {family.summary}")
        print(f"  architecture {family.architecture}, logits "
              f"{'shifted' if family.shifted else 'aligned'}, mask {family.mask_token}, "
              f"span end {family.end_token}"
              + (f", aliases {', '.join(family.aliases)}" if family.aliases else ""))
        print(f"  checkpoints: {', '.join(family.checkpoints)}")
        print(f"  layout: {family.layout}")
        print(f"  verified: {family.verified}")
        print(f"  assumed: {family.assumed}\n")


def parser() -> argparse.ArgumentParser:
    """The options of `dlm-lsp models`; a device or precision the server would refuse is a
    usage error here too, not a problem found in the checkpoint."""
    p = argparse.ArgumentParser(prog="dlm-lsp models", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action")
    about_list = "the supported families (the default)"
    sub.add_parser("list", help=about_list, description=about_list)
    about_check = ("check a checkpoint directory: its family, tokens, vocabularies and "
                   "files, and with --load that the server can load it")
    check = sub.add_parser("check", help="check a checkpoint directory", description=about_check)
    check.add_argument("directory", help="'default' (the model shipped in the package), a "
                       "directory written by dlm-lsp train, or a published "
                       "checkpoint's (config.json, tokenizer, *.safetensors); FAMILY:DIR "
                       "names its family, as --family does; a hub id checks its cached "
                       "snapshot")
    check.add_argument("--family", help="skip detection: treat it as this family")
    check.add_argument("--load", action="store_true", help="also load it and time a forward pass")
    check.add_argument("--device", default="auto", choices=DEVICES,
                       help="the server's device setting: with --load, where it loads "
                       "(default: auto, cuda when available)")
    check.add_argument("--precision", default="auto", choices=PRECISIONS,
                       help="with --load: the server's precision setting (default: auto)")
    return p


def main(argv: list[str]) -> int:
    """Entry point of `dlm-lsp models`."""
    args = parse_arguments(parser(), argv)
    if args.action != "check":
        print_families()
        return 0
    report = inspect(args.directory, args.family)
    if args.load and not report.problems:
        time_forward(report, args.device, args.precision)
    if not report.problems:  # auto resolved as the server resolves it
        # a --device cuda where there is none fails the server's load, as it fails --load:
        # a published checkpoint read without --load passed it (exit 0), ours did not
        try:
            report.serves_on = str(pick_device(args.device))
        except DeviceUnavailable as exc:
            report.problems.append(f"the server could not load it: {command_line_message(exc)}")
    print_report(report)
    return 0 if not report.problems else 1
