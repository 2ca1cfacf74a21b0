"""What travels to the project's GPU machine stays under the run tool's limit.

Each call copies the working tree there (tracked files and untracked ones git does not
ignore) with the paths it carries, and refuses a call over 64 MiB before the machine
starts.  The shipped weights are most of the tree (since 2026-12-04 the export of a GPU
training run, dlm_lsp/training/gpu_run.py; before, a CPU bootstrap a fifth its size), and
each GPU run's export replaces them, so these tests count the tree with the full-size
export in their place: a file added today that would leave no room for the next run
fails here, not in a rare GPU session.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dlm_lsp.training.gpu_run import MIB, export_plan, full_config

ROOT = Path(__file__).resolve().parent.parent
TRAVEL_LIMIT = 64 * MIB  # the working tree and carried paths of one call
SHIPPED = "dlm_lsp/weights/default/"
# benchmarks/gpu_serving.sh's carried .device-wheels (its PACKAGES for Python 3.12), summed
# file sizes: measured on 2026-12-03 with `bash benchmarks/gpu_serving.sh wheels` then
# `ls -l .device-wheels`.  A test cannot download them; re-measure when PACKAGES change.
SERVING_WHEELS_BYTES = 1_119_867
WHEELS = ROOT / ".device-wheels"
ADVICE = ("keep large files out of git (ignored, or carried only by the run that needs "
          "them), shrink the export (gpu_run.full_config) or carry fewer wheels "
          "(gpu_serving.sh PACKAGES); for the training call alone, the README's "
          "Development section says what can be left behind")


def _replaced_by_export(path: str) -> bool:
    """A shipped file that a GPU run's output replaces (README: the model card stays)."""
    if not path.startswith(SHIPPED):
        return False
    name = path[len(SHIPPED):]
    return name in ("config.json", "tokenizer.json") or name.startswith("model")


@pytest.fixture(scope="module")
def tree() -> dict[str, int]:
    """Bytes of each file that travels today, by path from the repository root."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: which files travel is git's answer")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    paths = [p for p in listed if p and (ROOT / p).is_file() and not (ROOT / p).is_symlink()]
    return {p: (ROOT / p).stat().st_size for p in paths}


def _with_full_export(tree: dict[str, int]) -> tuple[int, str]:
    """Bytes of the tree once the full-size export is shipped, and how they add up."""
    replaced = sum(size for path, size in tree.items() if _replaced_by_export(path))
    kept = sum(tree.values()) - replaced
    files, export = export_plan(full_config(Path("unused")))
    biggest = sorted(((s, p) for p, s in tree.items() if not _replaced_by_export(p)),
                     reverse=True)[:5]
    words = (f"the tree without today's shipped weights {kept / MIB:.2f} MiB (largest: "
             + ", ".join(f"{p} {s / MIB:.2f}" for s, p in biggest)
             + f") + the full-size export {export / MIB:.2f} MiB ({files} files)")
    return kept + export, words


def _over(what: str, total: int, words: str) -> str:
    return (f"{what} would copy {total / MIB:.2f} MiB to the GPU machine, "
            f"{(total - TRAVEL_LIMIT) / MIB:.2f} MiB over the {TRAVEL_LIMIT // MIB} MiB "
            f"it accepts, once the full-size export is shipped: "
            f"{words}; {ADVICE}")


def test_the_training_run_still_travels_once_the_full_size_export_is_shipped(tree):
    total, words = _with_full_export(tree)
    assert total <= TRAVEL_LIMIT, _over("gpu_run's call", total, words)


def test_the_serving_run_and_its_wheels_still_travel_once_the_full_size_export_is_shipped(
        tree):
    """gpu_serving.sh run carries .device-wheels: the recorded size, or the folder here
    if it is larger (downloaded for more packages than when it was measured)."""
    here = sum(p.stat().st_size for p in WHEELS.iterdir()) if WHEELS.is_dir() else 0
    wheels = max(SERVING_WHEELS_BYTES, here)
    total, words = _with_full_export(tree)
    assert total + wheels <= TRAVEL_LIMIT, _over(
        "gpu_serving.sh run's call", total + wheels,
        f"{words} + the carried wheels {wheels / MIB:.2f} MiB")
