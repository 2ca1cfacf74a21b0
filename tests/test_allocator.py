"""The server caps glibc's malloc arenas at start, unless the user chose a number."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from dlm_lsp import allocator, cli


class FakeGlibc:
    """Records the mallopt calls a real glibc would get."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


def test_on_glibc_the_arenas_are_capped_when_the_user_has_not_chosen():
    libc = FakeGlibc()
    assert allocator.cap_arenas({}, lambda: libc)
    assert libc.calls == [(-8, allocator.ARENA_MAX)]  # M_ARENA_MAX in glibc's malloc.h


@pytest.mark.parametrize("environ", [{"MALLOC_ARENA_MAX": "8"}, {"MALLOC_ARENA_MAX": ""},
                                     {"GLIBC_TUNABLES": "glibc.malloc.arena_max=8"}])
def test_a_number_of_arenas_the_user_set_is_kept(environ):
    libc = FakeGlibc()
    assert not allocator.cap_arenas(environ, lambda: libc)
    assert libc.calls == []


def test_a_process_started_for_the_server_gets_the_cap_as_a_variable_unless_the_user_chose():
    assert allocator.arena_environment({}) == {"MALLOC_ARENA_MAX": str(allocator.ARENA_MAX)}
    assert allocator.arena_environment({"MALLOC_ARENA_MAX": "8"}) == {}
    assert allocator.arena_environment({"GLIBC_TUNABLES": "glibc.malloc.arena_max=8"}) == {}


@pytest.mark.parametrize("confstr", [None, "musl 1.2"])
def test_other_c_libraries_are_left_alone(monkeypatch, confstr):
    """macOS and musl do not know CS_GNU_LIBC_VERSION (ValueError), nor Windows confstr."""
    def unknown(name: str) -> str | None:
        if confstr is None:
            raise ValueError("unrecognized configuration name")
        return confstr
    loaded = []
    monkeypatch.setattr(allocator.os, "confstr", unknown)
    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda *args: loaded.append(args))
    assert allocator.glibc() is None
    assert not allocator.cap_arenas({})
    monkeypatch.delattr(allocator.os, "confstr")
    assert not allocator.cap_arenas({})
    assert loaded == []


@pytest.mark.parametrize("args", [[], ["--tcp", "127.0.0.1:0"]])
def test_the_server_caps_the_arenas_before_it_serves(monkeypatch, args):
    from dlm_lsp.server import server

    libc = FakeGlibc()
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(allocator, "glibc", lambda: libc)
    capped_when_served = []
    for start in ("start_io", "start_tcp"):
        monkeypatch.setattr(server, start,
                            lambda *a, **k: capped_when_served.append(list(libc.calls)))
    assert cli.main(args) == 0
    assert capped_when_served == [[(-8, allocator.ARENA_MAX)]]


# Threads alive at once, each allocating: glibc gives each an arena while it can.
# malloc_info lists the arenas as <heap nr="N"> elements.
ARENAS_OF_TWELVE_THREADS = textwrap.dedent("""
    import ctypes, os, sys, tempfile, threading
    from dlm_lsp.allocator import cap_arenas
    print(cap_arenas())
    barrier = threading.Barrier(13)
    def work():
        kept = [bytearray(4096) for _ in range(64)]
        barrier.wait()
        barrier.wait()
    threads = [threading.Thread(target=work) for _ in range(12)]
    for t in threads:
        t.start()
    barrier.wait()
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    path = tempfile.mktemp()
    stream = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    barrier.wait()
    print(open(path).read().count("<heap nr="))
    os.unlink(path)
""")


@pytest.mark.skipif(allocator.glibc() is None, reason="glibc only")
@pytest.mark.parametrize("user_setting", [None, "4"])
def test_on_glibc_twelve_busy_threads_share_the_capped_arenas(user_setting):
    env = {name: value for name, value in os.environ.items()
           if name not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    if user_setting:
        env["MALLOC_ARENA_MAX"] = user_setting
    out = subprocess.run([sys.executable, "-c", ARENAS_OF_TWELVE_THREADS], env=env,
                         capture_output=True, text=True, timeout=60, check=True).stdout.split()
    capped, arenas = out[0] == "True", int(out[1])
    if user_setting:
        assert not capped and arenas == int(user_setting)
    else:
        assert capped and arenas == allocator.ARENA_MAX
