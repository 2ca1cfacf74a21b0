"""`dlm-lsp serve-remote`: the engine as a shared service (see service.py)."""

from __future__ import annotations

import argparse
import importlib.util
import ssl
import sys
from collections.abc import Callable

from dlm_lsp.arguments import parse_arguments
from dlm_lsp.backends import BackendError
from dlm_lsp.config import DEVICES, PRECISIONS
from dlm_lsp.held_signals import import_torch
from dlm_lsp.remote.http import token
from dlm_lsp.remote.wire import TOKEN_VARIABLE

# What the service imports from outside the project, looked for before torch's import, a
# second or more: without them the command only says so.  ray.serve comes with ray, and
# importing it (its HTTP proxy among its modules) fails without the packages of Ray's
# `serve` extra listed after fastapi (grpc: grpcio), which the extra of every Ray from
# 2.40 (pyproject's `remote`) brings.  Ray 2.60's ray.serve also needs grpcio-reflection
# and opentelemetry, which 2.40's extra does not bring: they are left to the import's own
# failure, after torch's, which says the same, rather than refuse a service that runs
# without them.
SERVICE_PACKAGES = ("ray", "fastapi", "starlette", "uvicorn", "pydantic", "grpc")


def _whole_from(least: int, most: int | None = None) -> Callable[[str], int]:
    """A whole number from `least` (to `most`), else a usage error before Ray starts:
    `--replicas 0` started Ray and ended in Ray Serve's ValueError traceback
    ("num_replicas is expected to larger than 0"), `--port 70000` in Ray's OverflowError
    ("bind(): port must be 0-65535"); the other counts are held to what they mean."""
    wanted = (f"a whole number from {least} to {most}" if most is not None
              else f"a whole number, {least} or more")

    def parse(text: str) -> int:
        # digits after at most one minus sign: "--5" passed a check of the digits left
        # once every minus sign was stripped, and int() then raised
        digits = text[1:] if text.startswith("-") else text
        value = int(text) if digits.isdecimal() else least - 1
        if value < least or (most is not None and value > most):
            raise argparse.ArgumentTypeError(f"{wanted}, got {text!r}")
        return value
    return parse


def _number_from(least: float, strict: bool) -> Callable[[str], float]:
    """A finite number above `least` (or from it, unless `strict`), else a usage error
    before Ray starts: `--cpus-per-replica -1`, `--target-ongoing-requests 0` or `nan`
    were taken as given and left to Ray, which started first."""
    from dlm_lsp.cli import _finite  # the other commands' reading of such numbers

    wanted = f"a number above {least:g}" if strict else f"a number, {least:g} or more"
    return lambda text: _finite(text, least, strict, wanted)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dlm-lsp serve-remote",
        description="Serve the infill engine to many language servers with Ray Serve: one "
        "replica per GPU (or CPU replicas), requests batched inside each replica. Language "
        "servers reach it with the settings backend: remote, remoteUrl, remoteToken.")
    p.add_argument("--model", help="'default' (shipped) or a checkpoint directory present on "
                   "every node (default: default)")
    p.add_argument("--device", choices=DEVICES, help="default: auto (cuda where a replica has "
                   "a GPU)")
    p.add_argument("--precision", choices=PRECISIONS, help="default: auto (bf16 on CUDA and "
                   "on CPUs with native bf16, else fp32)")
    p.add_argument("--replicas", type=_whole_from(1), help="fixed number of replicas (default 1)")
    p.add_argument("--min-replicas", type=_whole_from(0), help="autoscaling lower bound")
    p.add_argument("--max-replicas", type=_whole_from(1), help="autoscaling upper bound (turns "
                   "autoscaling on)")
    p.add_argument("--target-ongoing-requests", type=_number_from(0, strict=True),
                   help="autoscaling aims at this many fills per replica (default 8)")
    p.add_argument("--max-ongoing-requests", type=_whole_from(1),
                   help="fills one replica holds at once (default 64)")
    p.add_argument("--batch-rows", type=_whole_from(0, 256),
                   help="rows per shared forward pass (default 16)")
    p.add_argument("--cpus-per-replica", type=_number_from(0, strict=False), help="default 1")
    p.add_argument("--gpus-per-replica", type=_number_from(0, strict=False),
                   help="default: 1 when the cluster has GPUs, else 0")
    p.add_argument("--host", help="address to listen on (default 127.0.0.1; 0.0.0.0 for other "
                   "machines, with a token)")
    p.add_argument("--port", type=_whole_from(1, 65535), help="default 8000")
    p.add_argument("--token", help="bearer token clients must send (default: the "
                   "DLM_LSP_REMOTE_TOKEN variable; none: open)")
    p.add_argument("--ssl-certfile", help="serve https with this certificate (PEM)")
    p.add_argument("--ssl-keyfile", help="the certificate's private key (PEM)")
    p.add_argument("--address", help="join a running Ray cluster ('auto' or HOST:PORT) instead "
                   "of starting one here")
    p.add_argument("--num-cpus", type=_whole_from(1), help="CPUs of the Ray instance started here")
    p.add_argument("--name", help="Ray Serve application name (default dlm-lsp)")
    return p


def main(argv: list[str]) -> int:
    p = parser()
    args = parse_arguments(p, argv)
    if bool(args.ssl_certfile) != bool(args.ssl_keyfile):
        p.error("--ssl-certfile and --ssl-keyfile go together")
    problem = token_problem(args.token) or tls_problem(args)
    if problem:
        p.error(problem)
    # the bounds of autoscaling: a lower bound alone was dropped without a word, and one
    # above the upper bound left to Ray Serve's traceback once Ray had started
    if args.min_replicas is not None and args.max_replicas is None:
        p.error("--min-replicas goes with --max-replicas (autoscaling between the two)")
    if args.min_replicas is not None and args.min_replicas > args.max_replicas:
        p.error(f"--min-replicas {args.min_replicas} is above --max-replicas "
                f"{args.max_replicas}")
    missing = next((name for name in SERVICE_PACKAGES if importlib.util.find_spec(name) is None),
                   None)
    if missing:  # found without importing it: the answer is immediate
        return _needs_ray_serve(missing)
    # The service's modules import torch (the engine's), after Ray Serve has imported
    # numpy today; first, and held, a Ctrl-C cannot fall into torch's numpy import,
    # whatever Ray imports (held_signals)
    import_torch()
    try:
        from dlm_lsp.remote.service import serve_until_stopped, service_config
    except ImportError as exc:  # a package Ray Serve needs in its turn
        return _needs_ray_serve(exc.name)
    return serve_until_stopped(service_config(args))


def token_problem(given: str | None) -> str | None:
    """Why the token (`--token`, else the variable, as the service reads them) cannot be
    a client's, in the clients' own words (`http.token`): an HTTP header carries visible
    ASCII only.  `--token "a b"` started a service no client could use, whose setting
    `remoteToken` refuses such a value."""
    try:
        token(given or "", TOKEN_VARIABLE, "--token")
    except BackendError as exc:
        return str(exc)
    return None


def tls_problem(args: argparse.Namespace) -> str | None:
    """Why the certificate and key cannot serve https, read here as the HTTP proxy will:
    a missing file, or a certificate and key swapped, started a service that said where it
    served while nothing listened, the proxy's error in Ray's log alone.  A cluster joined
    with `--address` is left alone: the files are the proxy's node's."""
    if not args.ssl_certfile or args.address is not None:
        return None
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(args.ssl_certfile,
                                                                 args.ssl_keyfile)
    except (OSError, ssl.SSLError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else (
            getattr(exc, "reason", None) or str(exc))
        return (f"--ssl-certfile {args.ssl_certfile} --ssl-keyfile {args.ssl_keyfile} cannot "
                f"serve https ({why}): give a PEM certificate and its private key")
    return None


def _needs_ray_serve(missing: str | None) -> int:
    print(f"dlm-lsp serve-remote needs Ray Serve ({missing} is missing): "
          "pip install 'dlm-lsp[remote]'", file=sys.stderr)
    return 2
