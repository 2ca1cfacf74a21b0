"""The sandbox's child process: runs one untrusted program behind an audit hook.

`sandbox.py` starts this file's source as `python -I -B -c SOURCE PROGRAM FD`
in a fresh temporary directory.  Everything here runs before the untrusted
code: it reads the program, installs an audit hook (`sys.addaudithook`; hooks
cannot be removed once added) and only then executes the program.

The hook refuses what a benchmark program never needs and an escaped one
would: sockets, starting or signalling processes, `ctypes` (which could call
libc around every other check), raising resource limits, and writing or
deleting files outside the working directory.  A refusal ends the process at
once with exit code BLOCKED, so code under test cannot catch it and carry on.
Audit hooks are not a security boundary on their own (CPython documents
them as monitoring), which is why the parent adds resource limits and, where
the kernel allows, an empty network namespace.

The outcome travels on a pipe (file descriptor FD), not on stdout, so that a
program printing anything cannot forge it; a pass carries a token the parent
put in the environment, which this process removes before the program runs,
so a program that exits early (`sys.exit(0)`, `os._exit(0)`) never counts as
having passed its tests.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import types

PASSED, FAILED, ERROR, BLOCKED = 0, 1, 2, 3
TOKEN_VARIABLE = "DLM_SANDBOX_TOKEN"
DETAIL_CHARS = 300

# Refused outright: processes, signals to other processes, resource limits, raw memory.
REFUSED_EVENTS = frozenset({
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
    "subprocess.Popen", "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill",
    "resource.setrlimit", "resource.prlimit", "sys.remote_exec",
})
REFUSED_PREFIXES = ("socket.", "ctypes.")
# Events that change the file system: event -> (position of a path, of its dir_fd or None).
PATH_EVENTS = {
    "os.remove": ((0, 1),),
    "os.rename": ((0, 2), (1, 3)),
    "os.rmdir": ((0, 1),),
    "os.mkdir": ((0, 2),),
    "os.symlink": ((1, 2),),
    "os.link": ((0, 2), (1, 3)),
    "os.chmod": ((0, 2),),
    "os.chown": ((0, 3),),
    "os.truncate": ((0, None),),
    "os.utime": ((0, 3),),
    "os.setxattr": ((0, None),),
    "os.removexattr": ((0, None),),
    "shutil.rmtree": ((0, 1),),
}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

_write, _exit = os.write, os._exit  # bound now: the program may replace module attributes


def _inside(root: str, path: object, dir_fd: object = None) -> bool:
    """Whether a path argument names something under `root` (an open fd counts as inside)."""
    if isinstance(path, int):
        return True  # already open; opening it was checked
    text = os.fsdecode(os.fspath(path))
    if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(text):
        text = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), text)
    real = os.path.realpath(text)
    return real == root or real.startswith(root + os.sep) or real == os.devnull


def _refusal(root: str, event: str, args: tuple) -> str | None:
    """Why an audited event is refused, or None when it may go ahead."""
    if event in REFUSED_EVENTS or event.startswith(REFUSED_PREFIXES):
        return event
    if event == "open":
        path, mode, flags = args
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")
                  or bool((flags or 0) & WRITE_FLAGS))
        if not writes or path is None:
            return None
        if mode is None and isinstance(path, (str, bytes)) and not os.path.isabs(path):
            # os.open: the event does not say which dir_fd a relative path is under
            return f"os.open for writing of the relative path {path!r}"
        return None if _inside(root, path) else f"open for writing {path!r}"
    for at, dir_at in PATH_EVENTS.get(event, ()):
        path = args[at] if at < len(args) else None
        dir_fd = args[dir_at] if dir_at is not None and dir_at < len(args) else None
        if path is not None and not _inside(root, path, dir_fd):
            return f"{event} {path!r}"
    return None


def _finish(fd: int, code: int, reason: str, detail: str = "", token: str = "") -> None:
    """Flush the program's output, write the outcome line to the parent's pipe, exit."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:  # a full disk, a closed or replaced stream: the outcome matters more
            pass
    line = json.dumps({"reason": reason, "detail": detail[:DETAIL_CHARS], "token": token})
    try:
        _write(fd, (line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass
    _exit(code)


def _audit_hook(root: str, fd: int):
    """The hook: end the process on any refused event, before the event happens."""
    def hook(event: str, args: tuple) -> None:
        reason = _refusal(root, event, args)
        if reason is not None:
            _finish(fd, BLOCKED, "blocked", f"refused: {reason}")
    return hook


def _describe(exc: BaseException, path: str) -> str:
    """`Type: message (line N: code)`, the line being the program's last in the traceback."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    if frames:
        text += f" (line {frames[-1].lineno}: {(frames[-1].line or '').strip()})"
    return text


def main() -> None:
    """Run the program named on the command line; exit with its outcome."""
    path, fd = sys.argv[1], int(sys.argv[2])
    token = os.environ.pop(TOKEN_VARIABLE, "")
    root = os.path.realpath(os.getcwd())
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    try:
        code = compile(source, path, "exec")
    except (SyntaxError, ValueError) as exc:
        _finish(fd, ERROR, "error", _describe(exc, path))
    sys.dont_write_bytecode = True
    sys.addaudithook(_audit_hook(root, fd))
    runner = sys.modules["__main__"]  # noqa: F841 - keeps this module alive while it runs
    program = types.ModuleType("__main__")  # `import __main__` finds the program, not us
    sys.modules["__main__"] = program
    try:
        exec(code, program.__dict__)
    except AssertionError as exc:
        _finish(fd, FAILED, "failed", _describe(exc, path))
    except BaseException as exc:  # SystemExit too: a program that exits skipped its tests
        _finish(fd, ERROR, "error", _describe(exc, path))
    _finish(fd, PASSED, "passed", "", token)


if __name__ == "__main__":
    main()
