"""Name the machine and the code a benchmark ran on, so its numbers can be compared later."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

import torch


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages: other jobs on the machine slow a benchmark."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def describe_machine(device: str | None = None) -> dict[str, object]:
    """CPU, GPU (when the device is CUDA), cores, torch threads, load, versions, date.

    The load average is taken when the description is made (at the end of a run,
    where the reports call it), so it covers the run's last minutes.
    """
    gpu = None
    if device and device.startswith("cuda") and torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(torch.device(device))
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "arch": platform.machine(),
        "gpu": gpu,
        "device": device,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "load_average": load_average(),
        "python": platform.python_version(),
        "os": platform.platform(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def machine_line(machine: dict[str, object]) -> str:
    """One readable line: `AMD EPYC, 2 cores x86_64, torch 2.13.0+cpu (2 threads), cpu,
    load 1.2`."""
    where = machine.get("gpu") or machine.get("device") or "cpu"
    load = machine.get("load_average")
    load_text = f", load {load[0]}" if load else ""
    threads = machine["torch_threads"]
    return (f"{machine['cpu']}, {machine['cores']} cores {machine['arch']}, torch "
            f"{machine['torch']} ({threads} thread{'s' * (threads != 1)}), {where}{load_text}")


def code_label(revision: str | None) -> str:
    """What a report's header says of the code that made it: the checkout's commit, else
    the package's version (an installed copy said "code unknown", which no release
    could be traced by)."""
    if revision:
        return revision
    from dlm_lsp import __version__

    return f"dlm-lsp {__version__} (no checkout)"


def source_revision() -> str | None:
    """The checkout's git commit, `+dirty` with uncommitted changes to dlm_lsp; else None.

    Only when the package runs from the top of a checkout: an installed copy (in
    site-packages, or a virtual environment) may sit inside some other repository,
    whose commit says nothing about this code."""
    root = str(Path(__file__).resolve().parents[2])
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel",
                               "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", "dlm_lsp"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    top, commit = head.stdout.splitlines()
    if Path(top).resolve() != Path(root):
        return None
    return commit + ("+dirty" if dirty.stdout.strip() else "")
