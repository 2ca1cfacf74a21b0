"""Replacing a user's file (`fill --write`): the old text or the new, as the file was."""

from __future__ import annotations

import os
import stat

import pytest
from fifo_reader import read_fifo

from dlm_lsp.atomic_write import PartWritten, unwritable, write_atomically


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


def test_a_hard_linked_file_is_written_in_place_and_every_name_gets_the_new_text(tmp_path):
    """Renamed over, the new text would have been a new file under one name only, the
    file's other links (`ln`) keeping the old text, split from it for good."""
    code = tmp_path / "code.py"
    code.write_text("old text\n")
    other = tmp_path / "linked.py"
    os.link(code, other)
    inode = code.stat().st_ino
    write_atomically(code, "new\n")
    assert other.read_text() == "new\n" and code.read_text() == "new\n"
    assert code.stat().st_ino == inode and code.stat().st_nlink == 2


def test_ctrl_c_while_a_file_is_written_in_place_waits_for_the_whole_new_text(
        tmp_path, monkeypatch):
    """Ctrl-C right after the bytes went in and before the cut to length left a shorter
    new text followed by the old text's tail: neither the old file nor the new."""
    import signal

    code = tmp_path / "code.py"
    code.write_text("x = <FILL>  # a long line the fill makes shorter\n")
    os.link(code, tmp_path / "linked.py")  # written in place
    real_write = os.write

    def write_then_ctrl_c(fd, data):
        written = real_write(fd, data)
        os.kill(os.getpid(), signal.SIGINT)
        return written
    monkeypatch.setattr(os, "write", write_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(code, "x = 1\n")
    assert code.read_text() == "x = 1\n"


def _failing_writes(monkeypatch, fails):
    """os.write writing half of what it is given on its first call, then failing with
    ENOSPC on the calls numbered in `fails` (a disk that fills part way)."""
    real_write, calls = os.write, []

    def write(fd, data):
        calls.append(bytes(data))
        if len(calls) in fails:
            raise OSError(28, "No space left on device")
        return real_write(fd, data[:max(1, len(data) // 2)] if len(calls) == 1 else data)
    monkeypatch.setattr(os, "write", write)
    return calls


def _hard_linked(tmp_path, text):
    code = tmp_path / "code.py"
    code.write_text(text)
    os.link(code, tmp_path / "linked.py")  # written in place
    return code


def test_a_write_in_place_that_fails_part_way_writes_the_old_text_back(tmp_path, monkeypatch):
    """The file was left with the new text's first bytes over the old: neither text."""
    code = _hard_linked(tmp_path, "x = <FILL>\n" + "# the rest of the file\n" * 20)
    inode = code.stat().st_ino
    _failing_writes(monkeypatch, fails={2})
    with pytest.raises(OSError, match="No space left") as raised:
        write_atomically(code, "x = some_long_value_to_fill_in\n" + "# the rest\n")
    assert not isinstance(raised.value, PartWritten)
    assert code.read_text() == "x = <FILL>\n" + "# the rest of the file\n" * 20
    assert code.stat().st_ino == inode and code.stat().st_nlink == 2


def test_a_write_in_place_that_grew_the_file_and_failed_cuts_it_back(tmp_path, monkeypatch):
    code = _hard_linked(tmp_path, "x = <FILL>\n")
    _failing_writes(monkeypatch, fails={2})
    with pytest.raises(OSError, match="No space left"):
        write_atomically(code, "x = " + "a_much_longer_fill_than_the_hole " * 8 + "\n")
    assert code.read_text() == "x = <FILL>\n"


def test_a_write_in_place_that_fails_after_the_cut_writes_back_the_cut_off_tail(
        tmp_path, monkeypatch):
    """The flush can fail (EIO) after the file was cut to a shorter new text."""
    code = _hard_linked(tmp_path, "x = <FILL>  # a long line the fill makes shorter\n")
    real_fsync, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(5, "Input/output error")
        real_fsync(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="Input/output error"):
        write_atomically(code, "x = 1\n")
    assert code.read_text() == "x = <FILL>  # a long line the fill makes shorter\n"


def test_a_write_in_place_starts_at_the_first_byte_that_changes(tmp_path, monkeypatch):
    """The file's head, the same in both texts, is never rewritten, so it cannot be lost."""
    code = _hard_linked(tmp_path, "head\nx = <FILL>\n")
    calls = _failing_writes(monkeypatch, fails=set())
    write_atomically(code, "head\nx = 1\n")
    assert calls[0] == b"1\n" and code.read_text() == "head\nx = 1\n"


def test_a_write_in_place_whose_old_text_cannot_be_written_back_says_so_with_its_path(
        tmp_path, monkeypatch):
    code = _hard_linked(tmp_path, "x = <FILL>\n" + "# the rest of the file\n" * 20)
    _failing_writes(monkeypatch, fails={2, 3})
    with pytest.raises(PartWritten) as raised:
        write_atomically(code, "x = some_long_value_to_fill_in\n")
    assert str(raised.value) == (
        "[Errno 28] No space left on device; writing its old text back failed too ([Errno 28] "
        f"No space left on device): {code} is left part-written")


def _tagged(path):
    """`path` with an extended attribute set, or a skip where the file system has none."""
    try:
        os.setxattr(path, "user.dlm_lsp_test", b"kept")
    except (AttributeError, OSError) as exc:
        pytest.skip(f"no user extended attributes here: {exc}")
    return path


def test_a_file_with_extended_attributes_is_replaced_atomically_and_keeps_them(tmp_path):
    """A new file renamed over it would have had none of the old one's extended
    attributes (its ACL, its labels); written in place for them, every file of an
    SELinux system (all carry a label) would have lost the atomic write."""
    code = tmp_path / "code.py"
    code.write_text("old\n")
    _tagged(code)
    inode = code.stat().st_ino
    write_atomically(code, "new\n")
    assert code.read_text() == "new\n" and code.stat().st_ino != inode
    assert os.getxattr(code, "user.dlm_lsp_test") == b"kept"


def test_a_file_whose_attribute_the_new_file_cannot_take_is_written_in_place(tmp_path,
                                                                             monkeypatch):
    """A label this process may not set on a new file would be lost by the rename; in
    place, the file keeps it, and no temporary file is left behind."""
    code = tmp_path / "code.py"
    code.write_text("old text\n")
    _tagged(code)
    inode = code.stat().st_ino

    def refused(fd, name, value, *args):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "setxattr", refused)
    write_atomically(code, "new\n")
    assert code.read_text() == "new\n" and code.stat().st_ino == inode
    assert os.getxattr(code, "user.dlm_lsp_test") == b"kept"
    assert [p.name for p in tmp_path.iterdir()] == ["code.py"]


def test_a_plain_file_is_replaced_by_a_new_one(tmp_path):
    """One link and no extended attributes: nothing a rename loses, so the write is
    atomic (a new inode)."""
    code = tmp_path / "code.py"
    code.write_text("old\n")
    inode = code.stat().st_ino
    write_atomically(code, "new\n")
    assert code.read_text() == "new\n" and code.stat().st_ino != inode


def test_a_writable_file_in_a_read_only_folder_is_written_in_place(tmp_path, monkeypatch):
    """No temporary file can be made beside it: `--write` refused it ("its folder is not
    writable") where an editor writes it.  In place, a failed write puts the old text
    back; a file that is not writable itself is refused."""
    code = tmp_path / "code.py"
    code.write_text("old\n")
    inode = code.stat().st_ino
    monkeypatch.setattr(os, "access", lambda path, mode: os.path.isfile(path))
    assert unwritable(code) is None
    write_atomically(code, "new\n")
    assert code.read_text() == "new\n" and code.stat().st_ino == inode
    assert [p.name for p in tmp_path.iterdir()] == ["code.py"]
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert unwritable(code) == "the file is not writable"


def test_a_file_with_extended_attributes_in_a_read_only_folder_is_written_in_place(
        tmp_path, monkeypatch):
    """No temporary file can be made beside it, and in place it keeps its attributes, so
    --write goes ahead rather than refusing."""
    code = tmp_path / "code.py"
    code.write_text("old\n")
    _tagged(code)
    inode = code.stat().st_ino
    monkeypatch.setattr(os, "access", lambda path, mode: os.path.isfile(path))
    assert unwritable(code) is None
    write_atomically(code, "new\n")
    assert code.read_text() == "new\n" and code.stat().st_ino == inode


def test_a_pipe_or_device_is_written_to_not_replaced_by_a_file(tmp_path):
    """The temporary file was renamed over whatever the path named: as root, a report
    written to /dev/null replaced the device with a regular file.  A named pipe stands
    for any file that is no regular one (a device is made only by root)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got, reader = read_fifo(fifo)
    write_atomically(fifo, "new text\n")
    reader.join(5)
    assert got == [b"new text\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)
