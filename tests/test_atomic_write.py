"""Replacing a user's file (`fill --write`): the old text or the new, as the file was."""

from __future__ import annotations

import os
import stat

import pytest

from dlm_lsp.atomic_write import write_atomically


def test_the_file_gets_the_new_text_and_keeps_its_permission_bits(tmp_path):
    """The temporary file is made private (0600); renamed over, it would have made a
    0755 script unrunnable and a shared file unreadable to the group."""
    script = tmp_path / "run.py"
    script.write_text("old\n")
    script.chmod(0o750)
    write_atomically(script, "new\n")
    assert script.read_text() == "new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750


def test_a_symbolic_link_is_written_through_to_its_target_and_stays_a_link(tmp_path):
    """Renamed over the link, the new text would have replaced the link with a file and
    left its target, the file the user meant, with the old text."""
    target = tmp_path / "real" / "code.py"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "code.py"
    link.symlink_to(target)
    write_atomically(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["code.py", "real"]


def test_a_failed_write_leaves_the_file_and_no_temporary_file(tmp_path, monkeypatch):
    code = tmp_path / "code.py"
    code.write_text("old\n")

    def full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(code, "new\n")
    assert code.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["code.py"]
