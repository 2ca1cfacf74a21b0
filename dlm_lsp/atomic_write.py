"""Replace a user's file with new text so that it is either the old text or the new.

`dlm-lsp fill --write` wrote the filled text over the file in place: the file was
truncated first, so a write that failed part-way (a full disk, a file-size limit)
left it cut short, the user's code lost with the fills.  The new text goes to a
temporary file in the same directory (the same file system, so the rename is
atomic), flushed to disk, with the old file's permission bits (and its owner, where
this process may set it), then renamed over the old one.  A symbolic link is
written through: its target is replaced and the link stays a link.

A rename makes a new file, though, and some files are more than their text: one
with other hard links (`ln`) would be split from them, the other names keeping the
old text, and one with extended attributes (an ACL, an SELinux label, a tag) would
lose them.  A file's extended attributes are copied onto the temporary file before
the rename; where one cannot be (a label this process may not set, a file system
without them), or the file has other links, or its folder is not writable, it is
written in place instead, its inode kept: the new text, encoded in full before the
file is touched, is written over the old from the first byte that differs, the file
cut to its length and flushed to disk.  (Writing every labelled file in place would
have made the write non-atomic for every file on an SELinux system, where all files
carry one.)  That write can fail part way (a full disk, an I/O error), which left the
file part-written, neither text; the old bytes, read before it, are then written
back, so a failed write in place too leaves the file as it was.  Only where putting
them back fails as well is the file left part-written, and `PartWritten` says so.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from dlm_lsp.held_signals import held_signals


class PartWritten(OSError):
    """A write in place that failed part way and whose old text could not be written
    back either: the file holds neither text (its path is in the message)."""

    def __init__(self, path: Path, error: OSError, again: OSError) -> None:
        super().__init__(error.errno, error.strerror)
        self.path, self.error, self.again = path, error, again

    def __str__(self) -> str:
        return (f"{self.error}; writing its old text back failed too ({self.again}): "
                f"{self.path} is left part-written")


def target_of(path: Path) -> Path:
    """The file a write to `path` replaces: `path` itself, or a symbolic link's target."""
    return Path(os.path.realpath(path))


def _attributes(target: Path) -> dict[str, bytes]:
    """The file's extended attributes by name ({} where the platform or file system has
    none; ACLs are kept as extended attributes)."""
    if not hasattr(os, "listxattr"):  # not on macOS' Python
        return {}
    try:
        return {name: os.getxattr(target, name) for name in os.listxattr(target)}
    except OSError:  # a file system without extended attributes
        return {}


def _folder_writable(target: Path) -> bool:
    return os.access(target.parent, os.W_OK | os.X_OK)


def _in_place(target: Path) -> bool:
    """Whether the file `target` must be written in place before any rename is tried:
    another hard link to it would be split from it, or its folder cannot take a
    temporary file.  A writable file in a folder this user may not write to (another's
    project, a shared checkout) was refused, `--write` saying the folder is not
    writable, where an editor writes it; in place, a failed write still puts the old
    text back."""
    return os.stat(target).st_nlink > 1 or not _folder_writable(target)


def unwritable(path: Path) -> str | None:
    """Why `write_atomically(path, ...)` would fail, or None: the file must be writable
    (its folder need not be: the file is written in place then, `_in_place`)."""
    target = target_of(path)
    if not os.access(target, os.W_OK):
        return "the file is not writable"
    return None


def write_atomically(path: Path, text: str, encoding: str = "utf-8") -> None:
    """Write `text` to `path` (its target, if a link) through a temporary file renamed over
    it, with the old file's mode, owner and extended attributes, or in place where a
    rename would split a hard link or lose an attribute the new file cannot take, or
    no temporary file can be made beside it.
    On an OSError the file is as it was and no temporary file is left behind, except
    on `PartWritten` (an OSError too), where a write in place could not be undone."""
    if not stat.S_ISREG(os.stat(path).st_mode):  # a device or a pipe (`/dev/null`): no
        # file to rename over; as root the rename replaced /dev/null with a regular file
        with open(path, "w", encoding=encoding, newline="") as out:
            out.write(text)
        return
    target = target_of(path)
    if _in_place(target):
        _write_in_place(target, text.encode(encoding))
        return
    attributes = _attributes(target)
    mode = os.stat(target)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                         suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding=encoding, newline="") as out:  # endings as given
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
            if (mode.st_uid, mode.st_gid) != (os.geteuid(), os.getegid()):
                with contextlib.suppress(OSError):  # only root may give a file away
                    os.chown(temporary, mode.st_uid, mode.st_gid)
            os.chmod(temporary, stat.S_IMODE(mode.st_mode))  # after chown, which clears setuid
            copied = _copy_attributes(attributes, out.fileno())  # after chmod: an ACL wins
        if not copied:
            os.unlink(temporary)
            _write_in_place(target, text.encode(encoding))
            return
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _copy_attributes(attributes: dict[str, bytes], fd: int) -> bool:
    """Give the file `fd` each of `attributes`; False at the first one it cannot take."""
    try:
        for name, value in attributes.items():
            os.setxattr(fd, name, value)
    except OSError:
        return False
    return True


def _write_in_place(target: Path, data: bytes) -> None:
    """Overwrite the file's bytes from the first that differs, then cut it to `data`'s
    length: not truncated first, so a new text no longer than the old needs no new disk
    space.  A write that fails part way writes the old bytes back (`_write_back`).
    Ctrl-C and SIGTERM wait for the end (`held_signals`): between the write and the cut,
    a shorter new text was followed by the old text's tail."""
    with held_signals():
        fd = os.open(target, os.O_RDWR)  # read too: the old bytes, to put back on a failure
        try:
            old = _read_all(fd)
            start = reached = _common_prefix(old, data)
            cut = False
            try:
                os.lseek(fd, start, os.SEEK_SET)
                view = memoryview(data)[start:]
                while view:  # os.write may write fewer bytes than asked
                    written = os.write(fd, view)
                    reached += written
                    view = view[written:]
                os.ftruncate(fd, len(data))
                cut = True
                os.fsync(fd)
            except OSError as error:
                end = len(old) if cut else min(reached, len(old))  # what was overwritten
                try:
                    _write_back(fd, old, start, end, resize=cut or reached > len(old))
                except OSError as again:
                    raise PartWritten(target, error, again) from error
                raise
        finally:
            os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _common_prefix(a: bytes, b: bytes) -> int:
    """How many leading bytes `a` and `b` share: a write from there on leaves the file's
    head untouched (and a fill near the end rewrites little)."""
    low, high = 0, min(len(a), len(b))
    while low < high:  # bisect on slices: each comparison runs at memcmp's speed
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _write_back(fd: int, old: bytes, start: int, end: int, resize: bool) -> None:
    """Put the old bytes `start`..`end` back (those a failed write replaced), the file
    back to the old length where the write or the cut changed it, and flush it."""
    os.lseek(fd, start, os.SEEK_SET)
    view = memoryview(old)[start:end]
    while view:
        view = view[os.write(fd, view):]
    if resize:
        os.ftruncate(fd, len(old))
    os.fsync(fd)
