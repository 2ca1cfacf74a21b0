"""Replace a user's file with new text so that it is either the old text or the new.

`dlm-lsp fill --write` wrote the filled text over the file in place: the file was
truncated first, so a write that failed part-way (a full disk, a file-size limit)
left it cut short, the user's code lost with the fills.  The new text goes to a
temporary file in the same directory (the same file system, so the rename is
atomic), flushed to disk, with the old file's permission bits (and its owner, where
this process may set it), then renamed over the old one.  A symbolic link is
written through: its target is replaced and the link stays a link.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def target_of(path: Path) -> Path:
    """The file a write to `path` replaces: `path` itself, or a symbolic link's target."""
    return Path(os.path.realpath(path))


def unwritable(path: Path) -> str | None:
    """Why `write_atomically(path, ...)` would fail, or None: the file must be writable,
    and so must its directory, where the temporary file is made and renamed."""
    target = target_of(path)
    if not os.access(target, os.W_OK):
        return "the file is not writable"
    if not os.access(target.parent, os.W_OK | os.X_OK):
        return f"its folder {target.parent} is not writable (the new text is written there first)"
    return None


def write_atomically(path: Path, text: str, encoding: str = "utf-8") -> None:
    """Write `text` to `path` (its target, if a link) through a temporary file renamed over
    it; on an OSError the file is as it was and no temporary file is left behind."""
    target = target_of(path)
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
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
