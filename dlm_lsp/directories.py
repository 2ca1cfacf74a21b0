"""What is wrong with a path that should be a directory, said the same way by every
command.

"X is not a directory" was said of a path that does not exist at all, which read as
though something were there: a user with a mistyped `--model models/dreem` looked for a
file of that name.  A missing path and a file where a directory belongs are told apart.
"""

from __future__ import annotations

import os
from pathlib import Path


def not_a_directory(path: str | Path) -> str:
    """Why `path` (a directory was wanted) is none, with its absolute path: it does not
    exist, or it is a file."""
    where = os.path.abspath(Path(path).expanduser())
    if os.path.lexists(where):
        return f"{where} is a file, not a directory"
    return f"{where} does not exist"
