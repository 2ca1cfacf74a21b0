"""The engine as a shared service: a real Ray Serve deployment of two CPU replicas on
loopback (`dlm-lsp serve-remote`, over https with a token), real language servers
pointed at it with `backend: remote`, and one language server with the local engine
to compare against."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from certificates import self_signed
from rpc import ServerProcess, free_port

from dlm_lsp.backends import BackendError
from dlm_lsp.config import ServerConfig
from dlm_lsp.remote.client import RemoteEngine
from dlm_lsp.remote.launch import LocalService
from dlm_lsp.results import InfillRequest

TOKEN = "test-token-1234"
CANCELLED, BACKEND_FAILED = -32800, -32005

DOC = '''def total(values):
    result = 0
    for v in values:
        result += v
    return result


def mean(values):
    return total(values) / len(values)
'''
SPANS = [DOC.index("result += v") + 7, DOC.index("return total") + 7, DOC.index("len(values)")]


@pytest.fixture(scope="module")
def service(model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("service")
    cert, key = self_signed(tmp)
    with open(tmp / "service.log", "w+b") as log:
        svc = LocalService(["--model", str(model_dir), "--replicas", "2", "--num-cpus", "2",
                            "--cpus-per-replica", "1", "--ssl-certfile", str(cert),
                            "--ssl-keyfile", str(key)], free_port(), log, TOKEN, str(cert))
        svc.cert = cert
        try:
            svc.wait_for(2)
            yield svc
        finally:
            svc.stop()


def language_server(model_dir: Path, **settings: Any) -> ServerProcess:
    server = ServerProcess()
    # reuseFills off: the replicas would answer a repeated fill from their recent fills
    server.client.initialize({"model": str(model_dir), "maxSpanTokens": 512,
                              "reuseFills": False, **settings})
    return server


def remote(service: LocalService, model_dir: Path, **settings: Any) -> ServerProcess:
    return language_server(model_dir, backend="remote", remoteUrl=service.url,
                           remoteToken=TOKEN, remoteCaFile=str(service.cert), **settings)


@pytest.fixture(scope="module")
def local(model_dir: Path):
    server = language_server(model_dir)
    yield server
    server.close()


def open_doc(server: ServerProcess, uri: str, copies: int = 8) -> None:
    """The document under `copies` uris (`uri#0`, ...): the newest fill per document wins,
    so fills that run together are each on their own copy."""
    for n in range(copies):
        server.client.open(f"{uri}#{n}", DOC)


def position(offset: int) -> dict:
    line = DOC.count("\n", 0, offset)
    return {"line": line, "character": offset - (DOC.rfind("\n", 0, offset) + 1)}


def infill_params(uri: str, offset: int, **options: Any) -> dict:
    here = position(offset)
    return {"textDocument": {"uri": uri}, "range": {"start": here, "end": here},
            "options": options}


def fills(server: ServerProcess, uri: str, offsets: list[int], timeout: float = 120,
          **options: Any) -> list[dict]:
    """Send one dlm/infill per offset at once; their responses, in order."""
    return [server.client.response(i, timeout) for i in send(server, uri, offsets, **options)]


def send(server: ServerProcess, uri: str, offsets: list[int], stagger: float = 0.0,
         **options: Any) -> list[int]:
    """One dlm/infill per offset, each on its own copy of the document, `stagger` seconds
    apart (as typing spreads them); their ids."""
    ids = []
    for n, o in enumerate(offsets):
        ids.append(server.client.request("dlm/infill", infill_params(f"{uri}#{n}", o,
                                                                     **options)))
        time.sleep(stagger)
    return ids


def same_fill(a: dict, b: dict) -> bool:
    """Two dlm/infill results agree on the edit, every candidate and what it cost."""
    keep = ("steps", "tokens", "path", "kind", "repairRounds", "syntax")
    return (a["edits"] == b["edits"]
            and [(c["text"], c["valid"]) for c in a["candidates"]]
            == [(c["text"], c["valid"]) for c in b["candidates"]]
            and all(abs(x["score"] - y["score"]) < 1e-3
                    for x, y in zip(a["candidates"], b["candidates"], strict=True))
            and {k: a["stats"][k] for k in keep} == {k: b["stats"][k] for k in keep})


def test_two_language_servers_get_the_fills_the_local_engine_makes(service, local, model_dir):
    servers = [remote(service, model_dir), remote(service, model_dir)]
    try:
        open_doc(local, "file:///same.py")
        expected = [r["result"] for r in fills(local, "file:///same.py", SPANS, seed=7)]
        for n, server in enumerate(servers):
            open_doc(server, "file:///same.py")
            answers = fills(server, "file:///same.py", SPANS, seed=7)
            assert all("result" in a for a in answers), answers
            assert all(same_fill(a["result"], e) for a, e in zip(answers, expected,
                                                                   strict=True)), n
        status = servers[0].client.call("dlm/status")["result"]
        assert (status["backend"], status["loaded"], status["replicas"]) == ("remote", True, 2)
        assert status["fills"] == len(SPANS) and status["model"] == str(model_dir)
    finally:
        for server in servers:
            server.close()
    # every fill was the service's (the other replica's counters arrive within a second)
    _wait(lambda: sum(r["fills"] for r in service.replicas()) >= 2 * len(SPANS),
          "the replicas to count the fills", timeout=5)


def test_cancelling_in_the_editor_stops_the_fill_on_the_replica(service, model_dir):
    server = remote(service, model_dir)
    try:
        open_doc(server, "file:///long.py")
        before = {r["replica"]: r["cancelled"] for r in service.replicas()}
        [msg_id] = send(server, "file:///long.py", SPANS[:1], length=400, steps=400,
                        kind="multi-line")
        holder = _wait(lambda: next((r for r in service.replicas() if r["inFlight"]), None),
                       "the fill to reach a replica")
        server.client.notify("$/cancelRequest", {"id": msg_id})
        answer = server.client.response(msg_id, 30)
        assert answer["error"]["code"] == CANCELLED
        after = _wait(lambda: next((r for r in service.replicas()
                                    if r["replica"] == holder["replica"]
                                    and r["cancelled"] > before.get(r["replica"], 0)
                                    and r["inFlight"] == 0), None),
                      "the replica to count the fill as cancelled")
        # the pass running when the cancel came may still end and be counted (13 == 12
        # once on a loaded CI machine), but none starts after it
        passes = after["forwardPasses"]
        time.sleep(1.5)
        now = next(r for r in service.replicas() if r["replica"] == holder["replica"])
        assert now["forwardPasses"] <= passes + 1
        time.sleep(1.5)
        later = next(r for r in service.replicas() if r["replica"] == holder["replica"])
        assert later["forwardPasses"] == now["forwardPasses"]  # nothing more was denoised
        assert passes < 400
    finally:
        server.close()


def _wait(find, what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = find()
        if found:
            return found
        time.sleep(0.1)
    raise TimeoutError(f"waited {timeout} s for {what}")


def _kill_a_busy_replica(service: LocalService) -> int:
    """SIGKILL one replica once both hold fills; its pid."""
    busy = _wait(lambda: (lambda live: live if len(live) == 2 and all(
        r["inFlight"] for r in live) else None)(service.replicas()), "both replicas to be busy")
    victim = busy[0]["pid"]
    os.kill(victim, signal.SIGKILL)
    return victim


LOAD = {"length": 256, "steps": 256, "kind": "multi-line"}  # seconds per fill here
# Ray Serve routes a request by the queue lengths it knows; a burst sent before it has
# heard from the second replica all goes to the first, so fills arrive a little apart.
STAGGER = 0.3


def test_a_killed_replica_loses_no_fill_the_other_can_serve(service, local, model_dir):
    # eight fills of seconds each queue on the one replica left: on a loaded 2-core VM
    # the last ones passed the default 60 s timeoutMs (-32003), which this test is not of
    servers = [remote(service, model_dir, timeoutMs=170000) for _ in range(2)]
    try:
        offsets = SPANS + [DOC.index("for v") + 4]
        open_doc(local, "file:///load.py")
        expected = [r["result"] for r in fills(local, "file:///load.py", offsets, **LOAD)]
        ids = []
        for server in servers:
            open_doc(server, "file:///load.py")
            ids.append(send(server, "file:///load.py", offsets, STAGGER, **LOAD))
        victim = _kill_a_busy_replica(service)
        for server, sent in zip(servers, ids, strict=True):
            answers = [server.client.response(i, 180) for i in sent]
            assert all("result" in a for a in answers), answers
            assert all(same_fill(a["result"], e) for a, e in zip(answers, expected,
                                                                   strict=True))
        retried = sum(s.client.call("dlm/status")["result"]["retries"] for s in servers)
        assert retried >= 1  # the killed replica's fills were sent again
    finally:
        for server in servers:
            server.close()
    service.wait_for(2, exclude={victim})  # Ray Serve replaced it


def test_without_retries_a_lost_replica_is_a_clear_error(service, local, model_dir):
    server = remote(service, model_dir, remoteRetries=0)
    try:
        offsets = SPANS * 2
        open_doc(local, "file:///lost.py")
        expected = [r["result"] for r in fills(local, "file:///lost.py", offsets, **LOAD)]
        open_doc(server, "file:///lost.py")
        sent = send(server, "file:///lost.py", offsets, STAGGER, **LOAD)
        victim = _kill_a_busy_replica(service)
        answers = [server.client.response(i, 180) for i in sent]
        errors = [a["error"] for a in answers if "error" in a]
        assert errors, "the killed replica held fills"
        assert all(e["code"] == BACKEND_FAILED and "lost before it finished" in e["message"]
                   and "remoteRetries" in e["message"] for e in errors), errors
        assert all(same_fill(a["result"], e) for a, e in zip(answers, expected, strict=True)
                   if "result" in a)
    finally:
        server.close()
    service.wait_for(2, exclude={victim})


def test_a_wrong_token_is_refused(service, model_dir):
    server = language_server(model_dir, backend="remote", remoteUrl=service.url,
                             remoteToken="not-the-token", remoteCaFile=str(service.cert))
    try:
        # said at the start: it was a log line naming the service's model, as for a
        # token it takes (the health it asked takes none), and the first fill failed
        shown = server.client.wait(lambda _: server.client.shown(), timeout=60)
        assert "refused the token" in shown[0] and "remoteToken" in shown[0]
        open_doc(server, "file:///t.py")
        answer = fills(server, "file:///t.py", SPANS[:1])[0]
        assert answer["error"]["code"] == BACKEND_FAILED
        assert "refused the token" in answer["error"]["message"]
    finally:
        server.close()
    for token in ("", "not-the-token"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            service.get("/v1/metrics", token=token)
        assert refused.value.code == 401
    assert service.get("/v1/health", token="")["status"] == "ok"  # open, for balancers


def test_dlm_lsp_status_shows_the_service_and_each_replica(service):
    done = subprocess.run([sys.executable, "-m", "dlm_lsp", "status", "--remote", service.url,
                           "--token", TOKEN, "--ca-file", str(service.cert)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "replicas    2 live" in lines
    header = next(i for i, line in enumerate(lines) if line.startswith("replica "))
    rows = lines[header + 1:lines.index("", header)]
    assert {int(line.split()[1]) for line in rows} == {r["pid"] for r in service.replicas()}


def test_https_without_the_services_ca_is_a_clear_error(service):
    engine = RemoteEngine(ServerConfig(backend="remote", remote_url=service.url,
                                       remote_token=TOKEN, remote_retries=0))
    with pytest.raises(BackendError, match="TLS with https://127.0.0.1.*remoteCaFile"):
        engine.infill(InfillRequest(DOC, SPANS[0], SPANS[0], "python"))


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/openapi.json"])
def test_the_service_serves_no_api_pages_past_its_token(service, path):
    """FastAPI serves its API pages by default, whatever the token."""
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(service.url + path, timeout=5, context=service.context)
    assert missing.value.code == 404


def test_the_metrics_are_prometheus_text_for_every_replica(service):
    request = urllib.request.Request(service.url + "/v1/metrics",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=5, context=service.context) as reply:
        text = reply.read().decode()
    assert "# TYPE dlm_lsp_fills_total counter" in text
    for metric in ("forward_passes_total", "padded_passes_total", "padded_fills_total",
                   "load_factor"):  # per replica
        assert len([line for line in text.splitlines()
                    if line.startswith(f"dlm_lsp_{metric}{{")]) == 2, metric
    assert "dlm_lsp_replicas 2" in text
    assert len({line.split('replica="')[1].split('"')[0] for line in text.splitlines()
                if line.startswith("dlm_lsp_in_flight{")}) == 2


def test_replicas_take_one_gpu_each_and_autoscale_between_the_configured_bounds():
    from dlm_lsp.remote.service import ServiceConfig, deployment_options

    fixed = deployment_options(ServiceConfig(replicas=3), cluster_gpus=0,
                               environ={"MALLOC_ARENA_MAX": "4"})
    assert fixed["num_replicas"] == 3 and "autoscaling_config" not in fixed
    assert fixed["ray_actor_options"] == {"num_cpus": 1.0, "num_gpus": 0.0}
    on_gpus = deployment_options(ServiceConfig(min_replicas=2, max_replicas=8), cluster_gpus=8)
    assert on_gpus["ray_actor_options"]["num_gpus"] == 1.0 and "num_replicas" not in on_gpus
    assert on_gpus["autoscaling_config"] == {"min_replicas": 2, "initial_replicas": 2,
                                             "max_replicas": 8, "target_ongoing_requests": 8.0}
    shared = deployment_options(ServiceConfig(gpus_per_replica=0.5), cluster_gpus=1)
    assert shared["ray_actor_options"]["num_gpus"] == 0.5


def test_replicas_the_cluster_has_no_room_for_are_said_before_the_start_waits_for_them():
    """`--replicas 4` on a one-GPU box started one and said "still starting" every 30 s,
    without a word of why."""
    from dlm_lsp.remote.service import ServiceConfig, deployment_options, shortfall

    on_one_gpu = deployment_options(ServiceConfig(replicas=4), cluster_gpus=1)
    assert shortfall(on_one_gpu, {"GPU": 1.0, "CPU": 16.0}) == (
        "4 replicas ask for 4 GPUs (1 each) and the cluster has 1: 1 can start, and the "
        "start waits for the others until the cluster has room (fewer --replicas, or a "
        "smaller --gpus-per-replica)")
    on_cpus = deployment_options(ServiceConfig(replicas=3, cpus_per_replica=1.0),
                                 cluster_gpus=0)
    assert "3 replicas ask for 3 CPUs (1 each) and the cluster has 2: 2 can start" in (
        shortfall(on_cpus, {"CPU": 2.0}))
    assert shortfall(on_one_gpu, {"GPU": 4.0, "CPU": 16.0}) is None
    scaling = deployment_options(ServiceConfig(min_replicas=2, max_replicas=8), cluster_gpus=2)
    assert shortfall(scaling, {"GPU": 2.0, "CPU": 16.0}) is None  # only the first 2 start


@pytest.mark.parametrize(("environ", "variables"), [
    ({}, {"MALLOC_ARENA_MAX": "2"}),
    ({"MALLOC_ARENA_MAX": "8"}, None),
    ({"GLIBC_TUNABLES": "glibc.malloc.arena_max=8"}, None),
])
def test_replicas_start_with_their_malloc_arenas_capped_unless_the_user_chose(environ,
                                                                              variables):
    """Capped from inside the replica it came too late (Ray's threads had made 16 arenas):
    the cap is a variable of the replica's process from its start."""
    from dlm_lsp.remote.service import ServiceConfig, deployment_options

    actor = deployment_options(ServiceConfig(), cluster_gpus=0, environ=environ)[
        "ray_actor_options"]
    assert actor.get("runtime_env", {}).get("env_vars") == variables


def test_each_replica_process_runs_with_the_arena_cap(service):
    for replica in service.replicas():
        environ = Path(f"/proc/{replica['pid']}/environ").read_bytes().split(b"\0")
        chosen = os.environ.get("MALLOC_ARENA_MAX", "2")  # a user's choice reaches it
        assert f"MALLOC_ARENA_MAX={chosen}".encode() in environ


def _serve_remote(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlm_lsp", "serve-remote", "--port",
                           str(free_port()), "--num-cpus", "1", *args], capture_output=True,
                          text=True, timeout=300, start_new_session=True)


def test_a_model_directory_that_is_not_there_is_refused_before_ray_starts():
    done = _serve_remote("--model", "/no/such/model")
    assert done.returncode == 2
    assert "/no/such/model does not exist" in done.stderr


@pytest.mark.parametrize("spec", ["", "dream:"])
def test_a_model_with_no_directory_is_refused_before_ray_starts(spec):
    """It named the replicas' working directory, loaded on every node (or not)."""
    done = _serve_remote("--model", spec)
    assert done.returncode == 2
    assert done.stderr.startswith(f"dlm-lsp serve-remote: model '{spec}' ")


@pytest.mark.parametrize(("args", "told"), [
    ({"device": "cuda"}, "--device cuda was given but CUDA is not available here; use "
     "--device auto or --device cpu"),
    ({"gpus_per_replica": 1.0}, "--gpus-per-replica 1 was given but CUDA is not available "
     "here, where the Ray instance starts: leave it out, or give --address of a cluster "
     "with GPUs")])
def test_a_gpu_asked_of_a_ray_started_on_a_machine_without_one_is_refused_before_ray_starts(
        monkeypatch, capsys, args, told):
    """`--device cuda` started Ray and failed in every replica ~20 s later, its
    DeviceUnavailable a traceback in Ray's log; `--gpus-per-replica 1` waited for ever for
    a GPU.  Joining a cluster (`--address`), whose GPUs may be on other nodes, is not
    refused here: its replicas say what they find."""
    import torch

    from dlm_lsp.remote import service

    deployed = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(service, "deploy", lambda cfg: deployed.append(cfg) or _stop())
    assert service.serve_until_stopped(service.ServiceConfig(**args)) == 2
    assert capsys.readouterr().err == f"dlm-lsp serve-remote: {told}\n"
    assert deployed == []
    with pytest.raises(_Deployed):
        service.serve_until_stopped(service.ServiceConfig(**args, address="auto"))
    assert len(deployed) == 1


class _Deployed(Exception):
    """The service went on to deploy (a test stops it there)."""


def _stop() -> str:
    raise _Deployed


def test_a_port_another_program_holds_is_refused_before_ray_starts(monkeypatch, capsys):
    """It started Ray and ended ~10 s later in "the replicas could not start ... (check
    --model and --device)", the port's bind failure lost in Ray's log.  A cluster joined
    with --address, whose own proxy may hold the port, is left to Ray."""
    import socket

    from dlm_lsp.remote import service

    deployed = []
    monkeypatch.setattr(service, "deploy", lambda cfg: deployed.append(cfg) or _stop())
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert service.serve_until_stopped(service.ServiceConfig(port=port)) == 2
        said = capsys.readouterr().err
        assert said.startswith(f"dlm-lsp serve-remote: --host 127.0.0.1 --port {port} cannot "
                               "be listened on (Address already in use)")
        assert deployed == []
        with pytest.raises(_Deployed):
            service.serve_until_stopped(service.ServiceConfig(port=port, address="auto"))
    assert len(deployed) == 1


@pytest.mark.parametrize(("option", "value", "told"), [
    ("--port", "70000", "a whole number from 1 to 65535"), ("--port", "0", "from 1 to 65535"),
    ("--port", "x", "a whole number from 1 to 65535"), ("--replicas", "0", "1 or more"),
    ("--min-replicas", "-1", "0 or more"), ("--max-replicas", "0", "1 or more"),
    ("--max-ongoing-requests", "0", "1 or more"), ("--num-cpus", "0", "1 or more"),
    ("--batch-rows", "257", "from 0 to 256")])
def test_a_count_or_port_out_of_its_range_is_a_usage_error(option, value, told, capsys):
    """`--port 70000` started Ray and ended in Ray's OverflowError traceback, `--replicas
    0` in Ray Serve's ValueError."""
    from dlm_lsp.remote.command import parser

    with pytest.raises(SystemExit) as refused:
        parser().parse_args([option, value])
    assert refused.value.code == 2
    said = capsys.readouterr().err
    assert f"argument {option}: a whole number" in said and told in said
    assert said.rstrip().endswith(f"got '{value}'")


@pytest.mark.parametrize(("option", "value", "told"), [
    ("--cpus-per-replica", "-1", "a number, 0 or more"),
    ("--gpus-per-replica", "nan", "a number, 0 or more"),
    ("--gpus-per-replica", "inf", "a number, 0 or more"),
    ("--target-ongoing-requests", "0", "a number above 0"),
    ("--cpus-per-replica", "one", "a number, 0 or more")])
def test_a_share_or_target_out_of_its_range_is_a_usage_error(option, value, told, capsys):
    """Taken as floats as given, they were left to Ray, which had started first."""
    from dlm_lsp.remote.command import parser

    with pytest.raises(SystemExit) as refused:
        parser().parse_args([option, value])
    assert refused.value.code == 2
    assert capsys.readouterr().err.rstrip().endswith(f"argument {option}: {told}, got '{value}'")


@pytest.mark.parametrize(("given", "told"), [
    (["--min-replicas", "2"], "--min-replicas goes with --max-replicas"),
    (["--min-replicas", "3", "--max-replicas", "2"], "--min-replicas 3 is above --max-replicas 2")])
def test_autoscaling_bounds_that_cannot_be_meant_are_a_usage_error(given, told, capsys):
    """A lower bound alone was dropped without a word (the service ran one fixed replica);
    one above the upper bound ended in Ray Serve's traceback once Ray had started."""
    from dlm_lsp.remote.command import main

    with pytest.raises(SystemExit) as refused:
        main(given)
    assert refused.value.code == 2 and told in capsys.readouterr().err


@pytest.mark.parametrize("value", ["--5", "-5-5", "-"])
def test_a_value_of_minus_signs_and_digits_is_refused_in_the_same_words(value, capsys):
    """`--port=--5` passed the digits check once its minus signs were stripped, and int()
    then raised: argparse said "invalid parse value", the name of our type function."""
    from dlm_lsp.remote.command import parser

    with pytest.raises(SystemExit) as refused:
        parser().parse_args([f"--port={value}"])
    assert refused.value.code == 2
    said = capsys.readouterr().err
    assert said.rstrip().endswith(f"argument --port: a whole number from 1 to 65535, got "
                                  f"'{value}'"), said


def test_device_cuda_without_a_gpu_fails_at_once_with_the_flag_s_words():
    """The command itself, on a machine without CUDA (as the CPU machines are)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    began = time.monotonic()
    done = _serve_remote("--device", "cuda")
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("dlm-lsp serve-remote: --device cuda was given but CUDA is not "
                           "available here; use --device auto or --device cpu\n")
    assert time.monotonic() - began < 60  # before Ray: no replica was started


def test_our_family_s_prefix_before_a_missing_directory_is_refused_as_any_family_s():
    """"dlm-tiny:/no/such/model" was taken whole for a hub id: Ray started, and every
    replica failed to load it; "dream:/no/such/model" was refused at once."""
    from dlm_lsp.remote.service import model_problem

    for spec in ("dream:/no/such/model", "dlm-tiny:/no/such/model"):
        assert model_problem(spec) == (f"--model {spec}: /no/such/model does not exist "
                                       "(it must exist on every node)")


def test_replicas_that_cannot_load_the_model_end_the_service_with_their_error(tmp_path):
    done = _serve_remote("--model", str(tmp_path))  # a directory without a model in it
    assert done.returncode == 1
    assert "the replicas could not start" in done.stderr
    assert f"cannot read {tmp_path}/config.json" in done.stdout + done.stderr


def test_without_address_the_service_starts_its_own_ray_even_beside_a_running_cluster(
        monkeypatch):
    """A Ray cluster on the same machine (`ray start`, or RAY_ADDRESS) was joined by
    `serve-remote` without --address, which then failed there with a ValueError traceback
    (num_cpus may not be given to a cluster joined): that flag alone joins one."""
    from dlm_lsp.remote import service

    asked = []

    def init(**kwargs: Any) -> None:
        asked.append(kwargs.get("address"))
        raise RuntimeError("stop here")
    monkeypatch.setattr(service.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(service.ray, "init", init)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6391")
    for address in (None, "auto"):
        with pytest.raises(RuntimeError, match="stop here"):
            service.deploy(service.ServiceConfig(address=address))
    assert asked == ["local", "auto"]


def test_a_second_service_of_a_name_the_cluster_runs_leaves_the_first_one_alone(
        monkeypatch, capsys):
    """On a cluster joined with --address, a second `serve-remote` of the same --name
    replaced the first one's application with its own replicas, and its exit deleted it:
    the first service was gone.  It is refused, and nothing of the first is touched."""
    from types import SimpleNamespace

    from dlm_lsp.remote import service

    done: list[str] = []
    monkeypatch.setattr(service.ray, "is_initialized", lambda: True)
    monkeypatch.setattr(service.ray, "shutdown", lambda: done.append("shutdown"))
    monkeypatch.setattr(service.serve, "start", lambda **kwargs: None)
    monkeypatch.setattr(service.serve, "status", lambda: SimpleNamespace(
        applications={"dlm-lsp": object()}))
    for name in ("run", "delete"):
        monkeypatch.setattr(service.serve, name,
                            lambda *args, name=name, **kwargs: done.append(name))
    monkeypatch.setattr(service, "create_board", lambda name: done.append("board"))
    assert service.serve_until_stopped(service.ServiceConfig(address="auto")) == 1
    assert done == ["shutdown"]  # neither deployed over it nor deleted
    assert capsys.readouterr().err == (
        "dlm-lsp serve-remote: an application named dlm-lsp already runs on the cluster at "
        f"auto (another serve-remote?): it is left as it is; {service.ONE_SERVICE}\n")
    service.let_go(service.ServiceConfig(address="auto"))  # as a Ctrl-C in the start does
    assert "delete" not in done


def test_a_second_service_of_another_name_says_the_cluster_serves_one(monkeypatch, capsys):
    """The first refusal said "give this service another --name"; with one, the deploy
    failed in a Ray traceback (`Prefix / is being used by application "dlm-lsp"`): every
    application of a cluster is served through its one port.  Said in one line, and
    what this command made (its metrics board) is taken down, the first service not."""
    from types import SimpleNamespace

    from ray.serve.exceptions import RayServeException

    from dlm_lsp.remote import service

    done: list[str] = []

    def run(*args, **kwargs):
        raise RayServeException('Prefix / is being used by application "dlm-lsp". Failed to '
                                'deploy application "second".')
    monkeypatch.setattr(service.ray, "is_initialized", lambda: True)
    monkeypatch.setattr(service.ray, "shutdown", lambda: done.append("shutdown"))
    monkeypatch.setattr(service.ray, "cluster_resources", lambda: {"CPU": 2.0})
    monkeypatch.setattr(service.ray, "kill", lambda actor: done.append(f"kill {actor}"))
    monkeypatch.setattr(service, "find_board", lambda name: f"board of {name}")
    monkeypatch.setattr(service.serve, "start", lambda **kwargs: None)
    monkeypatch.setattr(service.serve, "status", lambda: SimpleNamespace(
        applications={"dlm-lsp": object()}))
    monkeypatch.setattr(service.serve, "run", run)
    monkeypatch.setattr(service.serve, "delete", lambda name: done.append(f"delete {name}"))
    monkeypatch.setattr(service, "create_board", lambda name: done.append("board"))
    assert service.serve_until_stopped(service.ServiceConfig(address="auto",
                                                             name="second")) == 1
    assert done == ["board", "delete second", "kill board of second", "shutdown"]
    assert capsys.readouterr().err == (
        "dlm-lsp serve-remote: another application serves on the cluster at auto (Prefix / "
        f'is being used by application "dlm-lsp"); {service.ONE_SERVICE}\n')


def test_an_address_where_no_cluster_runs_is_one_line(monkeypatch, capsys):
    """`--address auto` with no cluster started was Ray's ConnectionError traceback."""
    from dlm_lsp.remote import service

    def init(**kwargs: Any) -> None:
        raise ConnectionError("Could not find any running Ray instance.")
    monkeypatch.setattr(service.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(service.ray, "init", init)
    monkeypatch.setattr(service.ray, "shutdown", lambda: None)
    assert service.serve_until_stopped(service.ServiceConfig(address="auto")) == 1
    assert capsys.readouterr().err == (
        "dlm-lsp serve-remote: --address auto: no Ray cluster found (Could not find any "
        "running Ray instance.); start one first (`ray start --head`), or leave --address "
        "out to start a Ray instance here\n")


# `dlm-lsp serve-remote` that deploys nothing (no Ray): the command's own lines, its wait
# and its stop
NO_RAY = ("import sys\n"
          "from dlm_lsp.remote import service\n"
          "service.deploy = lambda cfg: 'http://127.0.0.1:9'\n"
          "service.ray.shutdown = lambda: None\n"
          "from dlm_lsp.cli import main\n"
          "raise SystemExit(main(sys.argv[1:]))\n")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_the_serving_service_is_said_in_one_line_and_ends_it_with_status_0(sig):
    """Ctrl-C stopped a serving service with no word while Ray took its replicas down
    (seconds), as if the key had been missed, and the README promised the commands' 130.
    A stop is a server's normal end: the language server says `dlm-lsp: stopped by
    SIGINT, exiting` and exits 0, and the service now does the same."""
    with subprocess.Popen([sys.executable, "-c", NO_RAY, "serve-remote", "--token", "t",
                           "--port", str(free_port())],  # 8000 may be held by another program
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert "Ctrl-C stops it" in proc.stdout.readline()
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert (proc.returncode, err) == (0, f"dlm-lsp serve-remote: stopped by {sig.name}, "
                                         "exiting\n")
    assert out == ""


def _start_line(*argv: str) -> str:
    """The line `serve-remote ARGV` (with a token, on a free port, Ray left out) says
    where it serves, before a Ctrl-C ends it."""
    with subprocess.Popen([sys.executable, "-c", NO_RAY, "serve-remote", "--token", "t",
                           "--port", str(free_port()), *argv],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            line = proc.stdout.readline()
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
        finally:
            proc.kill()
    return line


@pytest.mark.parametrize(("bounds", "said"), [
    (["--min-replicas", "0", "--max-replicas", "4"], "0 to 4 replica(s)"),
    (["--max-replicas", "4"], "1 to 4 replica(s)"),
    (["--replicas", "3"], "3 replica(s)"),
])
def test_the_start_line_says_the_replica_bounds_deployed(bounds, said):
    """`--min-replicas 0` deployed a minimum of 0 and said `1 to 4 replica(s)`."""
    assert f", {said}; Ctrl-C stops it" in _start_line(*bounds)


@pytest.mark.parametrize(("host", "url"), [
    ("::", "http://[::]:8000"), ("::1", "http://[::1]:8000"),
    ("127.0.0.1", "http://127.0.0.1:8000"), ("example.org", "http://example.org:8000"),
])
def test_an_ipv6_host_is_written_in_brackets_in_the_service_s_url(host, url):
    """Written bare, `--host ::` deployed the replicas and then ended in a ValueError
    traceback, its health asked at `http://:::8000`, Ray left running."""
    from dlm_lsp.remote.service import ServiceConfig, service_url
    from dlm_lsp.remote.startup import not_answering

    assert service_url(ServiceConfig(host=host, port=8000)) == url
    # a port nothing listens on: the connection's failure said, not the URL's parse
    free = service_url(ServiceConfig(host="::1" if ":" in host else "127.0.0.1",
                                     port=free_port()))
    why = not_answering(free, wait_s=0.2)
    assert isinstance(why, str) and "Port could not be cast" not in why


def test_a_service_on_every_interface_says_its_url_is_none_to_use():
    """`--host 0.0.0.0` printed `dlm-lsp service at http://0.0.0.0:8000`, no address a
    client elsewhere can use."""
    line = _start_line("--host", "0.0.0.0")
    assert "(every interface: clients use this machine's name or address): model" in line


def test_the_warning_that_a_service_takes_no_token_goes_to_stderr(monkeypatch):
    """It went to stdout, where the service says where it serves (a supervisor's log of
    stdout read it as output), and the language server's `--tcp` warns on stderr."""
    monkeypatch.delenv("DLM_LSP_REMOTE_TOKEN", raising=False)
    with subprocess.Popen([sys.executable, "-c", NO_RAY, "serve-remote", "--port",
                           str(free_port())], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        try:
            assert proc.stdout.readline().startswith("dlm-lsp service at http://127.0.0.1:9")
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert err.splitlines()[0] == ("warning: no token: anyone who can reach "
                                   "http://127.0.0.1:9 can use the service (--token or "
                                   "DLM_LSP_REMOTE_TOKEN)")
    assert out == ""


@pytest.mark.parametrize(("argv", "variable", "token"), [
    ([], "from-the-variable", "from-the-variable"),
    (["--token", "given"], "from-the-variable", "given"),
    ([], None, ""),
])
def test_the_replicas_get_the_token_the_command_sees(argv, variable, token, monkeypatch):
    """Each replica read DLM_LSP_REMOTE_TOKEN itself; on a joined cluster a replica on
    another node runs under that node's `ray start` environment, without the variable, and
    served anyone while the command, which saw it, warned of nothing."""
    from dlm_lsp.remote.command import parser
    from dlm_lsp.remote.service import service_config

    if variable is None:
        monkeypatch.delenv("DLM_LSP_REMOTE_TOKEN", raising=False)
    else:
        monkeypatch.setenv("DLM_LSP_REMOTE_TOKEN", variable)
    # what `deploy` binds the replicas with, which read no variable of their own
    assert service_config(parser().parse_args(argv)).token == token


# `dlm-lsp serve-remote` whose start never ends (replicas Ray cannot place, a cluster that
# is not there), saying so every 0.2 s; taking Ray down is said on stdout
STUCK = ("import sys, time\n"
         "from dlm_lsp.remote import service, startup\n"
         "startup.NOTE_EVERY_S = 0.2\n"
         "service.deploy = lambda cfg: time.sleep(600)\n"
         "service.ray.shutdown = lambda: print('ray shut down', flush=True)\n"
         "from dlm_lsp.cli import main\n"
         "raise SystemExit(main(sys.argv[1:]))\n")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_replicas_start_stops_the_start_in_one_line(sig):
    """Ray's start ran on the main thread, where Ctrl-C went unheard: the service came up
    30 s later all the same, or waited for ever for replicas it could not place, and
    SIGTERM ended it in Ray's native stack dump.  The start says it goes on, and a signal
    ends it as any command's: Ray taken down, one line, 130 (143)."""
    with subprocess.Popen([sys.executable, "-c", STUCK, "serve-remote", "--token", "t",
                           "--port", str(free_port())],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            # a start that never says it goes on fails here, not in a wait for ever
            assert select.select([proc.stderr], [], [], 30)[0], "no line while it started"
            assert proc.stderr.readline().startswith(
                "dlm-lsp serve-remote: still starting after 0s (Ray's lines above say what "
                "it waits for; Ctrl-C stops it)")
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == 128 + sig
    assert err.splitlines()[-1].startswith(f"dlm-lsp serve-remote: stopped by {sig.name} after ")
    assert out == "ray shut down\n"


def test_replicas_that_run_where_nothing_answers_end_the_service_with_why(monkeypatch,
                                                                           capsys):
    """Ray said the replicas ran, and the command said where it served, where nothing
    answered (a second service on a cluster whose Serve listens on another port)."""
    from dlm_lsp.remote import service
    from dlm_lsp.remote.startup import NotAnswering

    def deployed(cfg):
        raise NotAnswering(f"the replicas run, but http://127.0.0.1:{cfg.port} does not "
                           "answer (Connection refused)")
    let_go = []
    monkeypatch.setattr(service, "deploy", deployed)
    monkeypatch.setattr(service, "let_go", let_go.append)
    port = free_port()
    assert service.serve_until_stopped(service.ServiceConfig(port=port, token="t")) == 1
    assert capsys.readouterr().err == (f"dlm-lsp serve-remote: the replicas run, but "
                                       f"http://127.0.0.1:{port} does not answer (Connection "
                                       "refused)\n")
    assert [cfg.port for cfg in let_go] == [port]


def test_a_url_answers_once_its_health_route_does(tmp_path):
    import http.server
    import threading

    from dlm_lsp.remote.startup import not_answering

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200 if self.path == "/v1/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            assert not_answering(url, wait_s=5) is None
            assert not_answering(url.replace("http:", "https:"), wait_s=0) is not None
            assert not_answering(f"{url}/elsewhere", wait_s=0) is None  # the route is the root's
        finally:
            server.shutdown()
    assert not_answering(f"http://127.0.0.1:{free_port()}", wait_s=0) == "Connection refused"


@pytest.mark.parametrize(("argv", "env", "told"), [
    (["--token", "a b"], {}, "--token holds characters an HTTP header cannot carry"),
    ([], {"DLM_LSP_REMOTE_TOKEN": "€uro"},
     "DLM_LSP_REMOTE_TOKEN holds characters an HTTP header cannot carry"),
])
def test_a_token_no_client_could_send_is_a_usage_error(argv, env, told, monkeypatch, capsys):
    """`--token "a b"` started a service no client could use: their remoteToken setting
    refuses such a value."""
    from dlm_lsp.remote import service
    from dlm_lsp.remote.command import main

    monkeypatch.setattr(service, "serve_until_stopped", _no_start)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    assert told in capsys.readouterr().err


def _no_start(cfg):
    raise AssertionError("the service was started")


def test_a_certificate_and_key_that_cannot_serve_https_are_a_usage_error(tmp_path, capsys,
                                                                         monkeypatch):
    """A missing certificate, or the two swapped, started a service that said where it
    served https while nothing listened there."""
    from dlm_lsp.remote import service
    from dlm_lsp.remote.command import main

    monkeypatch.setattr(service, "serve_until_stopped", _no_start)

    cert, key = self_signed(tmp_path)
    for given, why in [((tmp_path / "none.pem", key), "No such file or directory"),
                       ((key, cert), "PEM lib")]:
        with pytest.raises(SystemExit) as refused:
            main(["--ssl-certfile", str(given[0]), "--ssl-keyfile", str(given[1])])
        assert refused.value.code == 2
        said = capsys.readouterr().err
        assert f"--ssl-certfile {given[0]} --ssl-keyfile {given[1]} cannot serve https (" in said
        assert why in said


def bare_replica() -> Any:
    """A replica's object, not started (no Ray Serve, no model, no metrics published):
    each test sets the attributes the code it calls reads."""
    from dlm_lsp.remote.service import EngineReplica

    class Replica(EngineReplica.func_or_class):
        def __del__(self) -> None:  # Ray Serve's wrapper makes this a coroutine
            pass
    return object.__new__(Replica)


def test_what_a_replica_s_engine_changed_on_its_own_is_told_in_one_result_not_in_each(
        model_dir):
    """An out-of-memory fallback is said once, in the next fill's result: the replica sent
    its engine's notices without taking them, so every later fill of every client carried
    them again, and each editor showed the warning at every fill."""
    from concurrent.futures import Future

    from dlm_lsp.engine import Engine
    replica = bare_replica()
    replica.engine = Engine(ServerConfig(model=str(model_dir), device="cpu"))
    replica.counts = {"fills": 0, "cancelled": 0, "failed": 0, "inFlight": 0}
    replica.engine.notices.append("out of memory: now at most 8 rows per forward pass")
    request = InfillRequest("x = ", 4, 4, "python", "file:///a.py")
    told = []
    for _ in range(2):
        future: Future = Future()
        future.set_result(replica.engine.infill(request))
        told.append(json.loads(replica._outcome(future, []))["result"]["notices"])
    assert told == [["out of memory: now at most 8 rows per forward pass"], []]


def test_the_service_s_queue_depth_counts_each_fill_a_replica_holds_once():
    """A replica holds one fill, in its batching worker: the depth is 1.  The replica's
    fills in flight and its worker's depth (a part of them) were added up: 2."""
    import asyncio
    from types import SimpleNamespace

    replica = bare_replica()
    replica.token = ""
    replica.engine = SimpleNamespace(config=ServerConfig(), status=lambda: {"device": "cpu"})
    one_fill = {"replica": "a", "pid": 1, "queueDepth": 1, "inFlight": 1}

    async def live() -> list[dict]:
        return [one_fill]
    replica._live = live
    request = SimpleNamespace(headers={"accept": "application/json"})
    answer = asyncio.run(replica.metrics(request))
    assert json.loads(answer.body)["queueDepth"] == 1


def test_while_the_metrics_board_is_gone_a_replica_is_healthy_and_tells_its_own_metrics():
    """The board (a detached actor) is not restarted when its node goes: health and
    metrics asked it and answered HTTP 500 on every replica, which still served fills
    (load balancers took them out; each client's dlm/status said the service was
    unreachable)."""
    import asyncio
    from types import SimpleNamespace

    replica = bare_replica()
    replica.replica, replica.token = "a", ""
    replica.engine = SimpleNamespace(config=ServerConfig(), status=lambda: {"device": "cpu"})
    own = {"replica": "a", "pid": 1, "queueDepth": 0, "inFlight": 1}
    replica._stats = lambda: own

    async def board_gone() -> list[dict]:
        raise ValueError("Failed to look up actor with name 'dlm-lsp-metrics-dlm-lsp'")
    replica._live = board_gone
    health = asyncio.run(replica.health())
    assert health["status"] == "ok" and health["replicas"] is None
    as_json = SimpleNamespace(headers={"accept": "application/json"})
    metrics = json.loads(asyncio.run(replica.metrics(as_json)).body)
    assert (metrics["replicas"], metrics["replicaStats"]) == (None, [own])
    text = asyncio.run(replica.metrics(SimpleNamespace(headers={}))).body.decode()
    assert 'dlm_lsp_in_flight{replica="a",pid="1"} 1' in text
    assert "dlm_lsp_replicas" not in text  # unknown, not 1


@pytest.mark.parametrize("how", ["cancelled", "closed", "closed after its result"])
def test_a_fill_its_client_dropped_is_counted_and_leaves_no_error_unread(how):
    """Each fill a client dropped (every superseded ghost text) logged "Future exception
    was never retrieved" with a traceback at ERROR on the replica: its Cancelled, on the
    fill's thread, was read by nothing.  A stream closed rather than cancelled was not
    counted as cancelled, and one closed after its outcome's line was counted twice."""
    import asyncio
    import gc
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from dlm_lsp.remote import wire
    from dlm_lsp.sampler import Cancelled

    def infill(req: InfillRequest) -> None:
        while not req.should_stop():
            time.sleep(0.01)
        raise Cancelled()
    replica = bare_replica()
    replica.engine = SimpleNamespace(config=ServerConfig(), notices=deque(), infill=infill)
    replica.pool = ThreadPoolExecutor(2)
    replica.counts = {"fills": 0, "cancelled": 0, "failed": 0, "inFlight": 0}
    unread: list[dict] = []

    async def drop() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: unread.append(
            context))
        req, drafts, _ = wire.request_from_json(
            {"protocol": wire.PROTOCOL, "text": "x = \n", "start": 4, "end": 4,
             "drafts": True}, ServerConfig())
        stream = replica._stream(req, drafts, [])
        first = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.1)
        if how == "cancelled":
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
        elif how == "closed after its result":  # its error line counted it: not again
            req.should_stop = lambda: True  # the fill ends (Cancelled) of itself
            assert b'"cancelled"' in await first
            await stream.aclose()
        else:
            req.on_draft(1, 2, "a")
            await first
            await stream.aclose()
        await asyncio.sleep(0.3)  # the fill's thread sees the stop and ends
        gc.collect()
    asyncio.run(drop())
    replica.pool.shutdown()
    assert [c.get("message") for c in unread] == []
    assert replica.counts == {"fills": 0, "cancelled": 1, "failed": 0, "inFlight": 0}
