"""Report files of the benchmarks (dlm_lsp/bench/output.py): where they may go, and a
run's printed lines when the reader of its output has gone."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from fifo_reader import read_fifo

from dlm_lsp.bench.output import check_writable, write_text


def test_a_report_goes_to_a_pipe_a_device_or_a_stream_as_written(tmp_path):
    """`bench ... --json >(wc -c)` failed after the whole run ("No such file or
    directory": /dev/fd/63 resolves to `pipe:[N]`), `--json /dev/null` as root replaced
    the device with a file, and `--json /dev/stdout > out.txt` replaced out.txt, the
    table printed before lost: a stream is written to, after what it holds."""
    read_end, write_end = os.pipe()
    check_writable("--json", f"/dev/fd/{write_end}")
    write_text(f"/dev/fd/{write_end}", "{}\n")
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        assert pipe.read() == b"{}\n"

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    check_writable("--json", fifo)  # returns at once: opening it would wait for a reader
    got, reader = read_fifo(fifo)
    write_text(fifo, "{}\n")
    reader.join(5)
    assert got == [b"{}\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)

    printed = tmp_path / "out.txt"  # what /dev/stdout is, redirected to a file
    printed.write_text("| the table |\n")
    with open(printed, "a") as stdout:
        write_text(f"/dev/fd/{stdout.fileno()}", "{}\n")
    assert printed.read_text() == "| the table |\n{}\n"


def test_a_report_line_to_a_reader_gone_is_dropped_and_the_run_goes_on(tmp_path):
    """`bench syntax --json F | head -1`: the second row hit the closed pipe and ended the
    run (status 141) before it wrote F."""
    program = ("import os\nfrom dlm_lsp.bench.output import say\n"
               "read, write = os.pipe()\nos.dup2(write, 1)\nos.close(read)\n"
               "say('first row')\nsay('second row')\n"
               f"open({str(tmp_path / 'report.json')!r}, 'w').write('{{}}')\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report.json").read_text() == "{}" and "Traceback" not in done.stderr
