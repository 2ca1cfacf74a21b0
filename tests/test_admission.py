"""Who a TCP server serves: clients with its token, up to --max-clients at once."""

from __future__ import annotations

import socket
import time

import pytest
from rpc import ServerProcess, error_code, free_port, hang_up, tcp_connection

from dlm_lsp.admission import Gate, reaches_beyond_this_machine
from dlm_lsp.errors import SERVER_BUSY, UNAUTHORIZED

TOKEN = "team-secret-0123"
TEXT = "def f(x):\n    return x\n"


def test_a_gate_without_token_serves_everyone_up_to_its_number_of_clients():
    gate = Gate(None, max_clients=2)
    assert gate.refusal(None, 0) is None and gate.refusal({}, 1) is None
    code, text = gate.refusal({}, 2)
    assert code == SERVER_BUSY and "2 clients" in text


def test_a_server_of_one_client_says_client_not_clients():
    """`--max-clients 1` printed "at most 1 clients at once" and refused the next one with
    "serving 1 clients"."""
    gate = Gate(None, max_clients=1)
    assert gate.describe() == "no token asked; at most 1 client at once"
    assert "is serving 1 client, its most (--max-clients)" in gate.refusal({}, 1)[1]
    assert Gate(TOKEN, max_clients=2).describe() == ("clients must send its token; at most "
                                                     "2 clients at once")


def test_a_gate_with_token_asks_for_exactly_that_token():
    gate = Gate(TOKEN)
    assert gate.refusal({"token": TOKEN, "model": "default"}, 0) is None
    for options in (None, {}, {"token": ""}, {"token": 1}, {"token": TOKEN + "x"},
                    {"token": TOKEN[:-1]}, {"dlm": {"token": TOKEN}},
                    {"token": TOKEN + "\ud800"}):  # JSON may spell a lone surrogate
        refusal = gate.refusal(options, 0)
        assert refusal is not None and refusal[0] == UNAUTHORIZED, options


def test_a_token_read_from_the_environment_with_undecodable_bytes_is_asked_for_as_it_is():
    """os.environ reads bytes that are not UTF-8 as lone surrogates (surrogateescape)."""
    token = "s\udcffcret"
    assert Gate(token).refusal({"token": token}, 0) is None
    assert Gate(token).refusal({"token": "s\udcfecret"}, 0)[0] == UNAUTHORIZED


def test_only_loopback_addresses_stay_on_this_machine():
    assert not any(map(reaches_beyond_this_machine, ["127.0.0.1", "::1", "[::1]", "localhost",
                                                     "127.0.0.2"]))
    assert all(map(reaches_beyond_this_machine, ["0.0.0.0", "::", "192.168.1.4", "gpu-box"]))


@pytest.fixture
def gated(model_dir):
    """A TCP server asking for TOKEN, serving two clients at most."""
    port = free_port()
    server = ServerProcess("--tcp", f"127.0.0.1:{port}", "--max-clients", "2",
                           env={"DLM_LSP_TCP_TOKEN": TOKEN})
    yield port, server
    server.close()


def _refused_and_closed(client, msg_id, code):
    reply = client.response(msg_id)
    assert error_code(reply) == code
    client.wait(lambda ms: client.closed, timeout=10)  # the server closed the connection
    return reply["error"]["message"]


def test_a_client_is_served_only_after_an_initialize_with_the_token(gated, model_dir):
    port, server = gated
    early, _ = tcp_connection(port)  # no initialize first: one answer, then closed
    assert "after its initialize" in _refused_and_closed(early, early.request("dlm/status", {}),
                                                         -32002)
    for options in ({"model": str(model_dir)}, {"model": str(model_dir), "token": "guess"}):
        stranger, _ = tcp_connection(port)
        request = stranger.request("initialize", {"processId": None, "capabilities": {},
                                                  "initializationOptions": options})
        assert "token" in _refused_and_closed(stranger, request, UNAUTHORIZED)

    member, _ = tcp_connection(port)
    reply = member.initialize({"model": str(model_dir), "token": TOKEN, "repairRounds": 0})
    assert "result" in reply
    member.open("file:///a.py", TEXT)
    fill = member.call("dlm/infill", {"textDocument": {"uri": "file:///a.py"}, "range": {
        "start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 11}},
        "options": {"length": 3, "steps": 2}}, timeout=60)
    assert "result" in fill
    assert not [m for m in member.shown() if "token" in m]  # not taken for an unknown setting
    assert TOKEN not in server.log()
    assert "(clients must send its token; at most 2 clients at once)" in server.log()


def test_past_max_clients_the_next_client_is_turned_away_until_one_leaves(gated, model_dir,
                                                                           monkeypatch, capsys):
    port, _ = gated
    options = {"model": str(model_dir), "token": TOKEN}
    first, first_socket = tcp_connection(port)
    second, _ = tcp_connection(port)
    assert "result" in first.initialize(options) and "result" in second.initialize(options)
    third, _ = tcp_connection(port)
    request = third.request("initialize", {"processId": None, "capabilities": {},
                                           "initializationOptions": options})
    assert "serving 2 clients" in _refused_and_closed(third, request, SERVER_BUSY)

    hang_up(first_socket)
    from dlm_lsp.status import query_server

    monkeypatch.setenv("DLM_LSP_TCP_TOKEN", TOKEN)  # `dlm-lsp status --server` sends it too
    for _ in range(100):  # the first client's slot frees once its connection is let go
        try:
            status = query_server("127.0.0.1", port)
            break
        except Exception:  # noqa: BLE001 -- refused while the slot is still taken
            time.sleep(0.05)
    assert status["clients"] == 2  # the second client and this one
    monkeypatch.delenv("DLM_LSP_TCP_TOKEN")
    with pytest.raises(Exception, match="token"):
        query_server("127.0.0.1", port)
    from dlm_lsp.cli import main

    assert main(["status", "--server", f"127.0.0.1:{port}", "--token", "guess"]) == 1
    assert "wrong token" in capsys.readouterr().err


def test_listening_beyond_this_machine_without_a_token_is_logged(model_dir):
    port = free_port()
    server = ServerProcess("--tcp", f"0.0.0.0:{port}", env={"DLM_LSP_TCP_TOKEN": ""})
    try:
        client, _ = tcp_connection(port)
        assert "result" in client.initialize({"model": str(model_dir)})
        assert "without a token" in server.log() and "DLM_LSP_TCP_TOKEN" in server.log()
        assert f"serving LSP over TCP on 0.0.0.0:{port} (no token asked; at most 64" in (
            server.log())
    finally:
        server.close()


def test_a_refused_client_gets_one_answer_for_all_it_sent_at_once(gated):
    port, server = gated
    client, _ = tcp_connection(port)
    burst = [client.request("dlm/status", {}) for _ in range(5)]  # all before any answer
    client.wait(lambda ms: client.closed, timeout=10)
    answers = [m for m in client.messages if m.get("id") in burst]
    assert len(answers) == 1 and error_code(answers[0]) == -32002
    assert server.log().count("refused a TCP client") == 1


def _closed_by_server(sock, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except (TimeoutError, OSError):
        return False


def test_a_first_message_larger_than_any_initialize_is_refused_before_it_is_read(
        gated, model_dir):
    """An 8 MiB `[[[...` from a stranger without the token was read whole and parsed on
    the event loop (+210 MiB, 1.2 s of every client's loop) before the token was looked
    at.  The header alone now says enough; an admitted client still sends large bodies."""
    port, _ = gated
    stranger, sock = tcp_connection(port)
    sock.sendall(b"Content-Length: 1048576\r\n\r\n")  # the body would follow
    stranger.wait(lambda ms: stranger.closed, timeout=10)
    said = [m["error"]["message"] for m in stranger.messages if "error" in m]
    assert said == ["a first message of 1048576 bytes: before its initialize is admitted, "
                    "a connection sends at most 256 KiB"]
    member, _ = tcp_connection(port)
    assert "result" in member.initialize({"model": str(model_dir), "token": TOKEN})
    member.open("file:///big.py", "x = 1\n" * 100_000)  # 600 KB, once admitted
    assert member.call("dlm/status", {})["result"]["openDocuments"] == 1


def test_a_connection_that_never_sends_initialize_is_closed_after_the_admission_time(
        model_dir):
    port = free_port()
    server = ServerProcess("--tcp", f"127.0.0.1:{port}", "--admission-seconds", "1")
    try:
        _, silent = tcp_connection(port)
        _, half = tcp_connection(port)
        half.sendall(b"Content-Length: 100\r\n\r\n{")  # a message begun, never finished
        began = time.monotonic()
        assert _closed_by_server(silent, 10) and _closed_by_server(half, 10)
        assert 0.8 < time.monotonic() - began < 5
        assert "sent no initialize in 1 s" in server.log()
        client, _ = tcp_connection(port)  # one that does initialize stays, past the time
        assert "result" in client.initialize({"model": str(model_dir)})
        time.sleep(1.5)
        assert "result" in client.call("dlm/status", {})
    finally:
        server.close()


def test_a_flood_of_idle_connections_cannot_keep_an_editor_out(gated, model_dir):
    """At most --max-clients connections wait for admission; past that the oldest waiting
    one is closed, so the connection that sends initialize at once always gets in."""
    port, server = gated
    idle = [tcp_connection(port)[1] for _ in range(6)]
    client, _ = tcp_connection(port)
    assert "result" in client.initialize({"model": str(model_dir), "token": TOKEN})
    closed = [_closed_by_server(sock, 5) for sock in idle]
    assert closed[:4] == [True] * 4, closed  # the six waited two at a time, oldest out first
    assert "have not sent initialize" in server.log()


def test_a_connection_not_yet_admitted_is_no_client_and_keeps_no_setting_from_applying(
        gated, model_dir):
    """The first connection made the engine; had it counted, the editor that initialized
    next would share it, and its model would stay the default with a warning."""
    port, _ = gated
    _, idle = tcp_connection(port)  # connected first, sends nothing
    client, _ = tcp_connection(port)
    assert "result" in client.initialize({"model": str(model_dir), "token": TOKEN})
    status = client.call("dlm/status", {})["result"]
    assert status["clients"] == 1 and status["model"] == str(model_dir), status
    hang_up(idle)


def test_status_without_the_token_says_how_to_give_it_on_the_command_line(gated, monkeypatch,
                                                                           capsys):
    """Not the editor's initializationOptions.token: `status` has --token for it."""
    from dlm_lsp.cli import main

    port, _ = gated
    hang_up(tcp_connection(port)[1])  # once it listens
    monkeypatch.delenv("DLM_LSP_TCP_TOKEN", raising=False)
    assert main(["status", "--server", f"127.0.0.1:{port}"]) == 1
    said = capsys.readouterr().err
    assert "--token" in said and "DLM_LSP_TCP_TOKEN" in said
    assert "initializationOptions" not in said


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 here")
def test_an_ipv6_address_is_said_as_the_status_command_takes_it(model_dir):
    """`serving LSP over TCP on ::1:8765` could not be pasted into `--server`."""
    port = free_port()
    server = ServerProcess("--tcp", f"[::1]:{port}")
    try:
        deadline = time.monotonic() + 30
        while "serving LSP over TCP" not in server.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        if "cannot listen" in server.log():
            pytest.skip(f"no IPv6 loopback here: {server.log()}")
        assert f"serving LSP over TCP on [::1]:{port} (" in server.log()
    finally:
        server.close()
