"""`dlm-lsp fill FILE`: fill a file's holes from the command line and print it.

The quickest way to see the engine work (the README's first command) and a
handy tool for scripts: the same engine and length policy as the server.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from dlm_lsp.atomic_write import PartWritten, unwritable, write_atomically
from dlm_lsp.config import (
    SERVER_ONLY,
    InfillOptions,
    ServerConfig,
    SettingsRefused,
    camel,
    settings_option,
    snake,
)
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.holes import HoleFilling, find_holes
from dlm_lsp.models import ModelLoadError, command_line_message
from dlm_lsp.results import InfillResult
from dlm_lsp.validation import LANGUAGE_IDS, LANGUAGES, language_for

# The settings `--settings` may not name: options of `fill` itself (what to give instead),
# and those only the language server reads (config.SERVER_ONLY), which a fill here ignores.
OWN_OPTIONS = {"model": "--model", "device": "--device", "hole_marker": "--marker"}


def fill_config(model: str, device: str, marker: str,
                settings: str | None) -> tuple[ServerConfig | None, str]:
    """The engine's settings: the options, then `settings` (camelCase server settings as
    JSON: every denoising control of the README's Configuration table, which `fill`
    offered only three options of); None and why where `settings` cannot be used.  Strict,
    as a benchmark's --settings: a misspelt setting would be a fill made without it."""
    config = ServerConfig(model=model, device=device, hole_marker=marker)
    if settings is None:
        return config, ""
    try:
        data, config = settings_option(settings, base=config)
    except SettingsRefused as exc:
        return None, str(exc)
    named = [snake(key) for key in data]
    for name in named:
        if name in OWN_OPTIONS:
            return None, f"--settings names {camel(name)}: give {OWN_OPTIONS[name]} instead"
    ignored = [camel(name) for name in named if name in SERVER_ONLY]
    if ignored:
        return None, (f"--settings names {', '.join(ignored)}, which only the language "
                      "server reads, not a fill made here")
    return config, ""


def fill_file(path: str, model: str = "default", device: str = "auto", steps: int | None = None,
              strategy: str | None = None, seed: int | None = None, marker: str = "<FILL>",
              write: bool = False, language: str | None = None,
              settings: str | None = None) -> int:
    """Fill every `marker` in the file (`-`: standard input, for editors' filter commands
    and pipes); print the result (or write it back).  The language is `language` (an LSP
    language id such as `python` or `typescriptreact`), else the file's extension; the
    engine's settings are `settings` (JSON, `fill_config`) over the options."""
    config, why = fill_config(model, device, marker, settings)
    if config is None:
        print(f"dlm-lsp fill: {why}", file=sys.stderr)
        return 2
    if language is not None and language_for(language) is None:
        print(f"dlm-lsp fill: unknown language {language!r}; one of: "
              f"{', '.join(sorted(LANGUAGES))}; or the LSP ids and aliases "
              f"{', '.join(LANGUAGE_IDS)}", file=sys.stderr)
        return 2
    source = None if path == "-" else Path(path)  # None: standard input
    if source is None and write:
        print("dlm-lsp fill: --write needs a file, not standard input", file=sys.stderr)
        return 2
    if source is None and getattr(sys.stdin, "isatty", bool)():
        # `dlm-lsp fill -` typed in a terminal sat silent, waiting: it looked like a hang
        print("dlm-lsp fill: reading the text to fill from the terminal; Ctrl-D ends it",
              file=sys.stderr, flush=True)
    try:
        # bytes, decoded: Python's text mode reads `\r\n` as `\n`, and the file went back
        # (or out) with every line ending changed; the engine fills `\r\n` text as it is
        data = sys.stdin.buffer.read() if source is None else source.read_bytes()
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        print(f"dlm-lsp fill: cannot read {path}: {not_utf8(data, exc)}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"dlm-lsp fill: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    holes = find_holes(text, marker)
    if not holes:
        print(f"dlm-lsp fill: no {marker} holes in {path if source else 'standard input'}",
              file=sys.stderr)
        return 1
    why = unwritable(source) if write else None
    if why:  # before the model loads and fills
        print(f"dlm-lsp fill: cannot write {path} (--write): {why}", file=sys.stderr)
        return 2
    unchecked = _why_unchecked(source, language)
    if unchecked:
        print(f"# syntax not checked: {unchecked}; --language names the language "
              "(python, typescript, go, ...)", file=sys.stderr)
    engine = Engine(config)
    try:
        engine.preload()  # the model, and the timing of its steps a latency target needs
        model_obj = engine.model
    except ModelLoadError as exc:
        print(f"dlm-lsp fill: {command_line_message(exc)}", file=sys.stderr)
        return 2
    options = InfillOptions(steps=steps, strategy=strategy, seed=seed)
    state = HoleFilling(text)
    began = time.perf_counter()
    blank = 0  # holes whose best fill was whitespace (a model that knows not the language)
    for hole in holes:
        start, end = state.current(hole)
        result = engine.infill(InfillRequest(state.text, start, end, language_id=language,
                                             uri=None if source is None else str(source),
                                             options=options, is_hole=True))
        best = result.candidates[0]
        state.accept(hole, best.text)
        valid = {True: "valid", False: "INVALID", None: "unchecked"}[best.valid]
        wrote = bool(best.text.strip())
        blank += not wrote
        print(f"# hole at offset {hole[0]}: {result.plan.kind}, {result.tokens} tokens, "
              f"{describe_steps(result)}, {result.ms:.0f} ms, syntax {valid} ({result.path}"
              f"{f', {result.repair_rounds} repair round(s)' if result.repair_rounds else ''})"
              f"{'' if wrote else BLANK}", file=sys.stderr)
    # a blank fill said "syntax valid" and "1 hole(s) filled" like any other: the user of
    # `fill fixtures/hello.js` was not told the model had written nothing
    print(f"# {len(holes)} hole(s) filled{f' ({blank} blank)' if blank else ''} by "
          f"{model_obj.name} on {model_obj.device} in {time.perf_counter() - began:.2f} s",
          file=sys.stderr)
    if source is not None and write:
        try:
            write_atomically(source, state.text)  # the old text or the new, never a part
        except OSError as exc:  # a full disk, a file made read-only meanwhile: a traceback
            # that lost the fills; they go to stdout instead, as without --write
            kept = "" if isinstance(exc, PartWritten) else "; it is as it was"
            print(f"dlm-lsp fill: cannot write {path}: {exc}{kept}; the filled file is on "
                  "standard output", file=sys.stderr)
            _print(state.text)
            return 1
        # stdout stays empty: a filter's caller reads only the text, and a user at a
        # terminal saw no word of the file having been written
        print(f"# written to {path}", file=sys.stderr)
    else:
        _print(state.text)
    return 0


BLANK = "; blank: the model wrote no code there"


def not_utf8(data: bytes, exc: UnicodeDecodeError) -> str:
    """Why `data` is no text `fill` reads, in a user's words: Python's "'utf-8' codec can't
    decode byte 0xff in position 0: invalid start byte" named neither the encoding the
    file is in nor the one wanted, and its position is a byte's."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "it is UTF-16 (its byte-order mark says so); fill reads UTF-8: convert it " \
               "first (iconv -f UTF-16 -t UTF-8)"
    if b"\0" in data[:8192]:
        return "it looks binary (it holds NUL bytes), not text"
    line = data.count(b"\n", 0, exc.start) + 1
    return (f"it is not UTF-8 (byte {data[exc.start]:#04x} on line {line}); fill reads "
            "UTF-8: convert it first (iconv -f ENCODING -t UTF-8)")


def describe_steps(result: InfillResult) -> str:
    """A fill's forward passes, those of repair and of the hints apart: `--steps 1` said
    "3 steps", which read as the option ignored; "3 steps (1 + 2 in repair)" says where
    they went, and "8 steps (4 + 4 in hints)" where a hint pass ran, not repair (only
    "3 steps" where that is not known: an older remote service does not say).  A first
    run that stopped early (its fill stable and the quality check passed) says so:
    `--steps 16` printed "5 steps", which read as the option ignored too."""
    steps = f"{result.steps} step{'s' * (result.steps != 1)}"
    early = "stopped early" if result.early_stopped else ""
    later = [f"{n} in {what}" for n, what in ((result.repair_steps, "repair"),
                                              (result.hint_steps, "hints")) if n]
    if not later:
        return f"{steps} ({early})" if early else steps
    first = result.steps - (result.repair_steps or 0) - (result.hint_steps or 0)
    return f"{steps} ({first}{f', {early},' if early else ''} + {' + '.join(later)})"


def _why_unchecked(source: Path | None, language: str | None) -> str:
    """Why no fill of this file will be syntax-checked, or "" where it will be: with no
    language named, the file's extension tells it, and standard input has none.  The
    fill lines said only "syntax unchecked", which left a user of `fill -` guessing."""
    if language is not None or (source is not None and language_for(None, str(source))):
        return ""
    if source is None or not source.suffix:
        name = "standard input" if source is None else source.name
        return f"{name} has no file extension to tell its language by"
    return f"{source.suffix} ({source.name}) is not the extension of a language with a grammar here"


def _print(text: str) -> None:
    """Write the filled text to standard output as it is: its line endings unchanged
    (text mode would write `\n` as the platform's)."""
    out = getattr(sys.stdout, "buffer", None)
    if out is None:  # a text-only stream put in its place
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    out.write(text.encode("utf-8"))
    out.flush()
