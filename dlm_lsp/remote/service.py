"""The engine as a shared service on Ray Serve: `dlm-lsp serve-remote`.

Ray Serve runs the replicas (one per GPU, or CPU replicas), restarts the ones that
die, routes each HTTP request to a replica, scales the replica count between
configured bounds and spreads the same deployment over a multi-node Ray cluster.
Inside a replica the engine's own batching worker (`dlm_lsp/serving.py`) shares
forward passes between the requests it holds, exactly as in a local server.

Routes (protocol in `wire.py`): `POST /v1/infill` (token required when one is set),
`GET /v1/health` (open: for load balancers and the client's start-up check) and
`GET /v1/metrics` (token required; Prometheus text, or JSON when asked for).  Each
replica publishes its counters to a small named actor every second so any replica
can answer for all of them.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at run
# time, through Ray Serve's wrapper, and needs them as real types.
import asyncio
import contextlib
import hmac
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import ray
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from ray import serve
from ray.serve.exceptions import RayServeException

from dlm_lsp.allocator import arena_environment
from dlm_lsp.backends import take_notices
from dlm_lsp.config import ServerConfig
from dlm_lsp.directories import not_a_directory
from dlm_lsp.engine import Engine, OutOfMemory
from dlm_lsp.models import (
    DeviceUnavailable,
    ModelLoadError,
    command_line_message,
    empty_spec,
    resolve_spec,
)
from dlm_lsp.policy import SpanTooLong
from dlm_lsp.remote import wire
from dlm_lsp.remote.http import token
from dlm_lsp.remote.metrics import create_board, find_board, prometheus
from dlm_lsp.remote.startup import NotAnswering, not_answering, still_starting, watched
from dlm_lsp.results import InfillRequest
from dlm_lsp.sampler import Cancelled

log = logging.getLogger(__name__)

PUBLISH_EVERY_S = 1.0


@dataclass
class ServiceConfig:
    """How the service is deployed; `dlm-lsp serve-remote --help` sets each field."""

    model: str = "default"  # "default" (shipped) or a checkpoint directory on every node
    device: str = "auto"  # auto: cuda in a replica that was given a GPU, else cpu
    precision: str = "auto"
    batch_rows: int = 16  # rows per shared forward pass inside a replica
    replicas: int = 1  # fixed replica count (without autoscaling bounds)
    min_replicas: int | None = None  # with max_replicas: autoscale between the two
    max_replicas: int | None = None
    target_ongoing_requests: float = 8.0  # autoscaling aims at this many fills per replica
    max_ongoing_requests: int = 64  # fills one replica holds at once; more wait in the proxy
    cpus_per_replica: float = 1.0
    gpus_per_replica: float | None = None  # None: 1 when the cluster has GPUs, else 0
    host: str = "127.0.0.1"  # 0.0.0.0 to serve other machines (then set a token)
    port: int = 8000
    token: str = ""  # empty: the service is open (`service_config` reads the variable)
    ssl_certfile: str | None = None  # with ssl_keyfile: serve https (PEM files)
    ssl_keyfile: str | None = None
    address: str | None = None  # a Ray cluster to deploy on ("auto"); None starts one here
    num_cpus: int | None = None  # CPUs of a Ray instance started here (None: all)
    name: str = "dlm-lsp"  # the Ray Serve application name


# No /docs, /redoc or /openapi.json: FastAPI serves them by default, open whatever the
# token, which guards the fills and the metrics; the routes are wire.py's
app = FastAPI(title="dlm-lsp remote engine", docs_url=None, redoc_url=None, openapi_url=None)


def _read_out(future: asyncio.Future) -> None:
    """Take a finished fill's outcome that no answer will carry, so that asyncio does not
    log it as an error nobody saw (`_stream`).  Defined before the replica's class, whose
    methods `serve.ingress` makes with the module's names as they stand then."""
    if not future.cancelled():
        future.exception()


@serve.deployment
@serve.ingress(app)
class EngineReplica:
    """One engine (one model on one device) behind the service's HTTP routes."""

    def __init__(self, service: dict[str, Any]):
        cfg = ServiceConfig(**service)
        self.service = cfg
        self.token = cfg.token  # the command's, variable included (`service_config`)
        self.engine = Engine(ServerConfig(model=cfg.model, device=cfg.device,
                                          precision=cfg.precision, batch_rows=cfg.batch_rows))
        self.ready = self.engine.preload()  # fail here, visibly, not on the first fill
        self.pool = ThreadPoolExecutor(max_workers=cfg.max_ongoing_requests,
                                       thread_name_prefix="dlm-replica")
        context = serve.get_replica_context()
        self.replica = context.replica_id.unique_id
        self.counts = {"fills": 0, "cancelled": 0, "failed": 0, "inFlight": 0}
        self.board: Any = None  # looked up on first use, and again after it failed (_board)
        threading.Thread(target=self._publish_forever, daemon=True,
                         name="dlm-metrics").start()

    # -- routes --------------------------------------------------------------------------

    @app.post(wire.INFILL_PATH)
    async def infill(self, request: Request) -> StreamingResponse:
        self._authorize(request)
        try:
            body = await request.json()
            req, drafts, problems = wire.request_from_json(body, self.engine.config)
        except (ValueError, wire.BadRequest) as exc:  # json errors are ValueErrors
            raise HTTPException(400, f"bad infill request: {exc}") from exc
        notices = [f"the service ignored: {p}" for p in problems]
        return StreamingResponse(self._stream(req, drafts, notices),
                                 media_type="application/x-ndjson")

    @app.get(wire.HEALTH_PATH)
    async def health(self) -> dict[str, Any]:
        live, whole = await self._gathered()
        return {"status": "ok", "model": self.engine.config.model,
                "device": self.engine.status()["device"],
                "replicas": len(live) if whole else None, "replica": self.replica}

    @app.get(wire.METRICS_PATH)
    async def metrics(self, request: Request) -> Any:
        self._authorize(request)
        live, whole = await self._gathered()
        if "json" in request.headers.get("accept", ""):
            return JSONResponse({"model": self.engine.config.model,
                                 "device": self.engine.status()["device"],
                                 "replicas": len(live) if whole else None,
                                 # the fills each holds: its worker's depth is a part
                                 "queueDepth": sum(r["inFlight"] for r in live),
                                 "replicaStats": live})
        return PlainTextResponse(prometheus(live, whole))

    # -- the fill ------------------------------------------------------------------------

    async def _stream(self, req: InfillRequest, drafts: bool, notices: list[str]):
        """The answer lines: drafts while denoising, then the result or an error line.

        Ray Serve cancels this generator when the client disconnects; the fill's
        `should_stop` then turns true and the engine stops within one step."""
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[bytes] = asyncio.Queue()
        stop = threading.Event()
        req.should_stop = stop.is_set
        if drafts:
            def on_draft(step: int, steps: int, text: str) -> None:
                loop.call_soon_threadsafe(lines.put_nowait, wire.line(
                    "draft", {"step": step, "steps": steps, "text": text}))
            req.on_draft = on_draft
        self.counts["inFlight"] += 1
        future = loop.run_in_executor(self.pool, self.engine.infill, req)
        getter: asyncio.Future | None = None
        counted = False  # the outcome's line counts the fill: a close after it is no cancel
        try:
            while True:
                getter = asyncio.ensure_future(lines.get())
                done, _ = await asyncio.wait({future, getter},
                                             return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    break
                yield getter.result()
            while not lines.empty():
                yield lines.get_nowait()
            outcome, counted = self._outcome(future, notices), True
            yield outcome
        except (asyncio.CancelledError, GeneratorExit):  # the client gone; or closed
            stop.set()
            if not counted:
                self.counts["cancelled"] += 1
            raise
        finally:
            stop.set()
            if getter is not None:
                getter.cancel()
            # a fill left here ends on its thread within a step, in Cancelled that nothing
            # read: asyncio logged "Future exception was never retrieved" and a traceback
            # at ERROR for each fill a client dropped (every superseded ghost text)
            future.add_done_callback(_read_out)
            self.counts["inFlight"] -= 1

    def _outcome(self, future: asyncio.Future, notices: list[str]) -> bytes:
        try:
            result = future.result()
        except Cancelled:
            self.counts["cancelled"] += 1
            return wire.line("error", {"kind": wire.CANCELLED, "message": "stopped"})
        except OutOfMemory as exc:
            self.counts["failed"] += 1
            return wire.line("error", {"kind": wire.OUT_OF_MEMORY, "message": str(exc)})
        except ModelLoadError as exc:
            self.counts["failed"] += 1
            return wire.line("error", {"kind": wire.MODEL_UNAVAILABLE, "message": str(exc)})
        except SpanTooLong as exc:  # the client's request, not the replica, is at fault
            return wire.line("error", {"kind": wire.SPAN_TOO_LONG, "message": str(exc)})
        except Exception as exc:  # anything else: say so on the stream, keep serving
            log.exception("fill failed")
            self.counts["failed"] += 1
            return wire.line("error", {"kind": wire.FAILED,
                                       "message": f"{type(exc).__name__}: {exc}"})
        self.counts["fills"] += 1
        # what the engine changed on its own (an out-of-memory fallback) is told to the
        # client of this fill, as a shared TCP engine does (`SharedEngine.infill`)
        return wire.line("result", wire.result_json(
            result, notices + take_notices(self.engine.notices)))

    # -- bookkeeping ---------------------------------------------------------------------

    def _authorize(self, request: Request) -> None:
        if not self.token:
            return
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
            raise HTTPException(401, "a valid bearer token is required",
                                headers={"WWW-Authenticate": "Bearer"})

    def _stats(self) -> dict[str, Any]:
        status = self.engine.status()
        return {"replica": self.replica, "pid": os.getpid(), "device": status["device"],
                "queueDepth": status["queueDepth"], "p50Ms": status["p50Ms"],
                "p95Ms": status["p95Ms"], "tokensPerSecond": status["tokensPerSecond"],
                "batchOccupancy": status["batchOccupancy"],
                "forwardPasses": status["forwardPasses"], "paddedPasses": status["paddedPasses"],
                "paddedFills": status["paddedFills"], "loadFactor": status["loadFactor"],
                **self.counts}

    def _publish_forever(self) -> None:
        while True:
            try:
                # waited for, so that a handle whose calls go nowhere shows (and is replaced)
                ray.get(self._board().publish.remote(self.replica, self._stats()), timeout=5)
            except Exception:  # the board restarts with the cluster; keep trying
                log.debug("could not publish metrics", exc_info=True)
                self.board = None
            time.sleep(PUBLISH_EVERY_S)

    def _board(self) -> Any:
        if self.board is None:
            self.board = find_board(self.service.name)
        return self.board

    async def _gathered(self) -> tuple[list[dict[str, Any]], bool]:
        """Every live replica's counters and True, or this replica's alone and False
        where the metrics board cannot be asked: a detached actor, which Ray does not
        restart when its node goes.  Health and metrics failed (HTTP 500) on every
        replica then, while fills were served: load balancers took the replicas out,
        and `dlm/status` of each client said the service was unreachable."""
        try:
            return await self._live(), True
        except Exception:  # noqa: BLE001 -- whatever became of the board
            log.warning("metrics board unreachable: this replica's counters alone",
                        exc_info=True)
            return [self._stats()], False

    async def _live(self) -> list[dict[str, Any]]:
        """Every live replica's latest counters (this one's fresh)."""
        try:
            others = await asyncio.wait_for(self._board().live.remote(), 5)
        except Exception:
            self.board = None  # looked up afresh next time, in case this handle went bad
            raise
        return [self._stats()] + [r for r in others if r["replica"] != self.replica]


def fewest_replicas(cfg: ServiceConfig) -> int:
    """The autoscaling minimum: `--min-replicas`, else 1."""
    return cfg.min_replicas if cfg.min_replicas is not None else 1


def deployment_options(cfg: ServiceConfig, cluster_gpus: float,
                       environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """Ray Serve options: replica count or autoscaling bounds, each replica's share of
    the cluster (one GPU per replica when there are GPUs), and the variables that cap
    its malloc arenas from its start unless `environ` chose (`allocator.py`)."""
    gpus = cfg.gpus_per_replica if cfg.gpus_per_replica is not None else (
        1.0 if cluster_gpus >= 1 else 0.0)
    actor: dict[str, Any] = {"num_cpus": cfg.cpus_per_replica, "num_gpus": gpus}
    variables = arena_environment(environ)
    if variables:
        actor["runtime_env"] = {"env_vars": variables}
    options: dict[str, Any] = {"ray_actor_options": actor,
                               "max_ongoing_requests": cfg.max_ongoing_requests}
    if cfg.max_replicas is not None:
        low = fewest_replicas(cfg)
        options["autoscaling_config"] = {
            "min_replicas": low, "initial_replicas": max(low, min(cfg.replicas,
                                                                  cfg.max_replicas)),
            "max_replicas": cfg.max_replicas,
            "target_ongoing_requests": cfg.target_ongoing_requests}
    else:
        options["num_replicas"] = cfg.replicas
    return options


def shortfall(options: dict[str, Any], resources: Mapping[str, float]) -> str | None:
    """What the replicas started at once (`deployment_options`) ask of the cluster beyond
    its `resources`, in words; None where they fit.  Ray Serve starts those that fit and
    waits for the cluster to grow for the rest: `--replicas 4` (the README's example) on
    a one-GPU box said only "still starting" every 30 s, for ever."""
    actor = options["ray_actor_options"]
    count = options.get("num_replicas") or options["autoscaling_config"]["initial_replicas"]
    for resource, each, option in (("GPU", actor.get("num_gpus") or 0, "--gpus-per-replica"),
                                   ("CPU", actor.get("num_cpus") or 0, "--cpus-per-replica")):
        have = resources.get(resource, 0)
        if each and count * each > have:
            return (f"{count} replicas ask for {count * each:g} {resource}s ({each:g} each) "
                    f"and the cluster has {have:g}: {int(have // each)} can start, and the "
                    "start waits for the others until the cluster has room (fewer "
                    f"--replicas, or a smaller {option})")
    return None


class _OwnSignals(logging.Filter):
    """Ray's warning that it set no SIGTERM handler, started off the main thread: the
    command's own handles SIGTERM (startup.py), so the warning only puzzled the user."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


logging.getLogger("ray._private.worker").addFilter(_OwnSignals())


# The applications this process deployed on a cluster joined (`deploy`), the only ones
# `let_go` takes down there: a Ctrl-C while a second serve-remote of the same --name
# started took down the first one's.
OURS: set[str] = set()


class NameTaken(Exception):
    """An application of `--name` already runs on the cluster joined: deployed, this
    command's replicas replaced it, and its exit took it down (`let_go`), so a second
    `serve-remote` started by mistake ended the first's service."""


class NoCluster(Exception):
    """`--address auto` (or another) where no Ray cluster runs: Ray's ConnectionError was
    a traceback from `ray.init`."""


class RouteTaken(Exception):
    """Another application serves the route `/` on the cluster joined (a `serve-remote` of
    another `--name`): Ray Serve routes every application of a cluster through its one
    port, so a second service cannot have a port of its own there.  Its deployment failed
    in a Ray traceback, where the first refusal's advice, "another --name", had led."""


# What the command says of a cluster where a service runs already: --name does not help
# (`RouteTaken`)
ONE_SERVICE = ("a cluster serves one dlm-lsp service, as Ray Serve routes every application "
               "through its one port: stop that one first (its serve-remote's Ctrl-C), or "
               "start this one without --address, on a Ray instance of its own")


def deploy(cfg: ServiceConfig) -> str:
    """Start (or join) Ray, deploy the replicas and wait until they serve; the URL."""
    if not ray.is_initialized():
        if cfg.address is None:  # a one-machine instance, on loopback unless told otherwise
            # "local": a new instance even where a Ray cluster runs on this machine
            # (`ray start`, or RAY_ADDRESS set): without it ray.init joined that cluster,
            # refused num_cpus there, and serve-remote ended in a ValueError traceback
            ray.init(address="local", num_cpus=cfg.num_cpus, include_dashboard=False,
                     _node_ip_address="127.0.0.1" if cfg.host in ("127.0.0.1", "localhost")
                     else None, object_store_memory=128 << 20)
        else:
            try:
                ray.init(address=cfg.address)
            except ConnectionError as exc:  # `auto` with no cluster: Ray's traceback
                raise NoCluster(f"--address {cfg.address}: no Ray cluster found ({exc}); "
                                "start one first (`ray start --head`), or leave --address "
                                "out to start a Ray instance here") from None
    http: dict[str, Any] = {"host": cfg.host, "port": cfg.port}
    if cfg.ssl_certfile:
        http.update(ssl_certfile=cfg.ssl_certfile, ssl_keyfile=cfg.ssl_keyfile)
    serve.start(http_options=http)
    if cfg.address is not None and cfg.name in serve.status().applications:
        raise NameTaken(f"an application named {cfg.name} already runs on the cluster at "
                        f"{cfg.address} (another serve-remote?): it is left as it is; "
                        f"{ONE_SERVICE}")
    OURS.add(cfg.name)  # from here on, what `let_go` takes down is this command's
    resources = ray.cluster_resources()
    options = deployment_options(cfg, resources.get("GPU", 0))
    short = shortfall(options, resources)
    if short is not None:
        print(f"warning: {short}", file=sys.stderr, flush=True)
    create_board(cfg.name)  # before the replicas, which only look it up
    try:
        serve.run(EngineReplica.options(**options).bind(asdict(cfg)), name=cfg.name,
                  route_prefix="/")
    except RayServeException as exc:
        if "is being used by application" not in str(exc):
            raise
        raise RouteTaken(f"another application serves on the cluster at {cfg.address} "
                         f"({str(exc).split('. ')[0]}); {ONE_SERVICE}") from None
    url = service_url(cfg)
    why = not_answering(url)
    if why is not None:
        raise NotAnswering(f"the replicas run, but {url} does not answer ({why})" + (
            "; a Serve instance already running on the cluster keeps its own host, port "
            "and TLS, and Ray ignores --host, --port and --ssl-* then: Ray's lines above "
            "say so" if cfg.address is not None else "; Ray's lines above say why"))
    return url


def service_url(cfg: ServiceConfig) -> str:
    """Where the service answers, an IPv6 host in brackets (`http://[::]:8000`): written
    bare, `--host ::` deployed the replicas, then ended in a ValueError traceback (the
    port read from `:::8000`) with Ray left running."""
    host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
    return f"{'https' if cfg.ssl_certfile else 'http'}://{host}:{cfg.port}"


def model_problem(spec: str) -> str | None:
    """Why `--model` cannot be served, when that shows before Ray starts: a local path
    that is not a directory (it must exist on every node; hub ids are left to the
    replicas, which say why they failed).  "default" is the shipped model's directory,
    and "dlm-tiny:DIR" is checked as "dream:DIR" is (`resolve_spec`: it was taken whole
    for a hub id, so a missing DIR started Ray and failed in every replica)."""
    problem = empty_spec(spec)
    if problem:  # it named the replicas' working directory
        return problem
    _, _, target = resolve_spec(spec)
    if target.startswith(("/", ".", "~")) and not Path(target).expanduser().is_dir():
        return f"--model {spec}: {not_a_directory(target)} (it must exist on every node)"
    return None


def device_problem(cfg: ServiceConfig) -> str | None:
    """Why the replicas of a Ray instance started here (no `--address`) could not run where
    they are asked to, on a machine without CUDA: `--device cuda` started Ray and failed in
    every replica, ~20 s later, with a traceback in Ray's log and "check --model and
    --device"; `--gpus-per-replica 1` waited for ever for a GPU Ray had not found.  A
    cluster joined with `--address` is left to its replicas: its GPUs may be on other
    nodes than this one."""
    import torch

    if cfg.address is not None or torch.cuda.is_available():
        return None
    if cfg.device.startswith("cuda"):
        return command_line_message(DeviceUnavailable(cfg.device))
    if cfg.gpus_per_replica:
        return (f"--gpus-per-replica {cfg.gpus_per_replica:g} was given but CUDA is not "
                "available here, where the Ray instance starts: leave it out, or give "
                "--address of a cluster with GPUs")
    return None


def port_problem(cfg: ServiceConfig) -> str | None:
    """Why a Ray instance started here (no `--address`) could not listen on --host and
    --port: a port another program holds started Ray and ended ~10 s later in "the
    replicas could not start ... (check --model and --device)", the bind's error lost in
    Ray's log.  Tried once here, before Ray starts (SO_REUSEADDR, as the HTTP proxy binds,
    so a port left in TIME_WAIT is free); on a cluster joined with `--address` the proxy
    of a running Serve may hold the port already, so that is left to Ray."""
    if cfg.address is not None:
        return None
    family = socket.AF_INET6 if ":" in cfg.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((cfg.host, cfg.port))
        except OSError as exc:  # in use, a host not of this machine, a name not resolved
            return (f"--host {cfg.host} --port {cfg.port} cannot be listened on "
                    f"({exc.strerror or exc}): another program holds the port, or the host "
                    "is not an address of this machine; give another --port or --host")
    return None


def serve_until_stopped(cfg: ServiceConfig) -> int:
    """`dlm-lsp serve-remote`: deploy, say where, and serve until SIGINT or SIGTERM."""
    problem = model_problem(cfg.model) or device_problem(cfg) or port_problem(cfg)
    if problem:
        print(f"dlm-lsp serve-remote: {problem}", file=sys.stderr)
        return 2
    try:
        # on a thread of its own: Ctrl-C is heard while Ray starts (startup.py)
        url = watched(lambda: deploy(cfg), still_starting, lambda: let_go(cfg))
    except NotAnswering as exc:
        print(f"dlm-lsp serve-remote: {exc}", file=sys.stderr)
        let_go(cfg)
        return 1
    except (NameTaken, NoCluster) as exc:  # the application is another command's: not
        print(f"dlm-lsp serve-remote: {exc}", file=sys.stderr)  # taken down
        ray.shutdown()
        return 1
    except RouteTaken as exc:  # ours failed to deploy: its board and failed app go
        print(f"dlm-lsp serve-remote: {exc}", file=sys.stderr)
        let_go(cfg)
        return 1
    except RuntimeError as exc:  # Ray Serve gave up on the replicas; their errors are above
        print(f"dlm-lsp serve-remote: the replicas could not start ({exc}); their own error "
              "is in the log above (check --model and --device)", file=sys.stderr)
        ray.shutdown()
        return 1
    if not cfg.token:
        print(f"warning: no token: anyone who can reach {url} can use the service "
              f"(--token or {wire.TOKEN_VARIABLE})", file=sys.stderr, flush=True)  # as --tcp's
    count = (f"{fewest_replicas(cfg)} to {cfg.max_replicas}" if cfg.max_replicas
             else str(cfg.replicas))
    stopped = threading.Event()
    received: list[signal.Signals] = []

    def stop(signum: int, _frame: Any) -> None:
        received.append(signal.Signals(signum))
        stopped.set()
    # before the line that says how to stop it: a signal sent as soon as the line came
    # (a supervisor's, a test's) found the command's own handler, and exited 143 unsaid
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    # `--host 0.0.0.0` listens on every interface: its URL is no address a client can use
    anywhere = " (every interface: clients use this machine's name or address)" \
        if cfg.host in ("0.0.0.0", "::") else ""
    print(f"dlm-lsp service at {url}{anywhere}: model {cfg.model}, {count} replica(s); "
          "Ctrl-C stops it", flush=True)
    stopped.wait()
    # a stop is a server's normal end (status 0), said as the language server says it,
    # before Ray takes the replicas down, which takes seconds
    print(f"dlm-lsp serve-remote: stopped by {received[0].name}, exiting", file=sys.stderr,
          flush=True)
    let_go(cfg)
    return 0


def let_go(cfg: ServiceConfig) -> None:
    """Take down what the command started: on a shared cluster, which keeps running, only
    our application and its board; a Ray instance started here ends with its replicas."""
    if cfg.address is not None and ray.is_initialized() and cfg.name in OURS:
        serve.delete(cfg.name)
        with contextlib.suppress(ValueError):  # detached: it would outlive the app
            ray.kill(find_board(cfg.name))
    ray.shutdown()


def service_config(args: Any) -> ServiceConfig:
    """The service configuration from `serve-remote` arguments (None: the default).

    The token is `--token`, else DLM_LSP_REMOTE_TOKEN as this command sees it, and goes
    to the replicas in their configuration: each replica read the variable itself, and a
    replica on another node of a joined cluster runs under the environment of that node's
    `ray start`, which lacks it.  Such replicas served fills and metrics to anyone, and
    the command, which saw the variable, warned of nothing."""
    given = {k: v for k, v in vars(args).items()
             if k in ServiceConfig.__dataclass_fields__ and v is not None}
    # as the clients read theirs (the option, else the variable); checked before Ray starts
    given["token"] = token(given.get("token") or "", wire.TOKEN_VARIABLE, "--token")
    return ServiceConfig(**given)
