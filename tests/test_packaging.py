"""The package as a user installs it: a wheel and an sdist built from this tree, and the
wheel's files run from a directory of their own, away from the source tree.

Everything the package reads at run time (the shipped model, the benchmark data and
example files, the sandbox's child) has to be inside the package; a path that only
exists in a checkout works in every other test here and fails only once installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What a build reads; build outputs, caches and editors' dependencies are left behind.
SOURCES = ["pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "dlm_lsp", "fixtures", "tests"]
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
MAX_BYTES = 64 * 2**20  # a wheel a user downloads, model included
# The files with holes `dlm-lsp bench syntax` fills, shipped with it; fixtures/round_trip/
# is tests/test_round_trip.py's own, not shipped.
HOLE_FIXTURES = [path for path in (ROOT / "fixtures").iterdir() if path.is_file()]


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """The wheel and sdist of a copy of this tree, built by setuptools' PEP 517 hooks (what
    `pip wheel .` and `python -m build` call, without fetching anything)."""
    import setuptools

    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.fail(f"setuptools {setuptools.__version__}: the build needs >= 77 "
                    "(the dev extra installs it)")
    tree, out = tmp_path_factory.mktemp("tree"), tmp_path_factory.mktemp("dist")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, symlinks=True, ignore=IGNORE)
        else:
            shutil.copy2(source, tree / name)
    for hook in ("build_wheel", "build_sdist"):  # one process each, as a frontend runs them
        build = f"import sys; from setuptools import build_meta as b; b.{hook}(sys.argv[1])"
        done = subprocess.run([sys.executable, "-c", build, str(out)], cwd=tree,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    (wheel,), (sdist,) = out.glob("*.whl"), out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


# every file of the shipped model: weights (sharded since the GPU-trained model, with their
# index), tokenizer, config and card; a package missing one would not load or not say what
# it is
SHIPPED_MODEL_FILES = sorted(path.name for path in (ROOT / "dlm_lsp/weights/default").iterdir())
assert {"MODEL_CARD.md", "config.json", "tokenizer.json"} <= set(SHIPPED_MODEL_FILES)


@pytest.fixture(scope="module")
def wheel_names(dists) -> list[str]:
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        return wheel.namelist()


def test_the_wheel_ships_the_model_the_benchmark_data_and_its_licence(wheel_names):
    shipped = set(wheel_names)
    model = {f"dlm_lsp/weights/default/{name}" for name in SHIPPED_MODEL_FILES}
    humaneval = {f"dlm_lsp/bench/data/humaneval_infilling/{path.name}" for path in
                 (ROOT / "dlm_lsp/bench/data/humaneval_infilling").iterdir()}
    fixtures = {f"dlm_lsp/bench/data/fixtures/{path.name}" for path in HOLE_FIXTURES}
    assert "dlm_lsp/bench/data/humaneval_infilling/LICENSE" in humaneval
    assert model <= shipped
    assert humaneval <= shipped
    assert fixtures <= shipped, sorted(fixtures - shipped)


def test_the_wheel_holds_the_package_and_nothing_of_the_repository_around_it(dists,
                                                                             wheel_names):
    tops = {name.split("/")[0] for name in wheel_names}
    assert tops == {"dlm_lsp", "dlm_lsp-0.1.0.dist-info"}
    assert not [n for n in wheel_names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]
    assert dists["wheel"].stat().st_size < MAX_BYTES


def test_the_package_s_data_ships_as_data_not_as_modules(wheel_names):
    """The fixtures' folders were found as namespace packages: their .py files shipped as
    importable modules (`dlm_lsp.bench.data.fixtures.round_trip.inventory`), files that
    no code of the package reads, beside the hole fixtures it does."""
    data = [name for name in wheel_names if name.startswith("dlm_lsp/bench/data/")]
    assert not [name for name in data if name.count("/") > 4], data  # no folder below one
    assert not [name for name in data if "round_trip" in name or "notebook" in name]


def test_the_licence_is_an_spdx_expression_and_both_licence_texts_travel_along(
        dists, wheel_names):
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        metadata = wheel.read("dlm_lsp-0.1.0.dist-info/METADATA").decode()
    headers = metadata.split("\n\n", 1)[0].splitlines()
    assert "License-Expression: MIT" in headers
    assert not any(line.startswith("License:") for line in headers)  # the deprecated field
    for licence in ("LICENSE", "dlm_lsp/bench/data/humaneval_infilling/LICENSE"):
        assert f"License-File: {licence}" in headers
        assert f"dlm_lsp-0.1.0.dist-info/licenses/{licence}" in wheel_names


def test_the_sdist_builds_the_package_without_a_partial_test_suite(dists):
    with tarfile.open(dists["sdist"]) as sdist:
        names = [name.split("/", 1)[1] for name in sdist.getnames() if "/" in name]
    assert "pyproject.toml" in names
    assert {f"dlm_lsp/weights/default/{name}" for name in SHIPPED_MODEL_FILES} <= set(names)
    assert "dlm_lsp/bench/data/fixtures/hello.py" in names
    # setuptools adds tests/test_*.py by default, without conftest.py and the helpers
    assert not [name for name in names if name.startswith("tests/")]


def test_an_installed_package_finds_its_data_in_itself_and_no_commit_of_another_repository(
        dists, tmp_path):
    """The wheel unpacked as pip installs it, into a virtual environment that sits inside
    some other git repository, and imported from a directory away from this tree."""
    project = tmp_path / "project"
    site = project / ".venv" / "site-packages"
    site.mkdir(parents=True)
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        wheel.extractall(site)
    if shutil.which("git"):  # without git no commit can be misreported
        git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@example.org"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "another project"],
                       check=True)
    probe = """
import json, sys
sys.path.insert(0, sys.argv[1])
import dlm_lsp
from dlm_lsp.bench import sandbox
from dlm_lsp.bench.humaneval import load_tasks
from dlm_lsp.bench.machine import code_label, source_revision
from dlm_lsp.bench.syntax_rate import fixture_tasks
from dlm_lsp.models import DEFAULT_MODEL_DIR
from dlm_lsp.training.contamination import HUMANEVAL_DATA
print(json.dumps({
    "package": dlm_lsp.__file__,
    "model": [str(p) for p in sorted(DEFAULT_MODEL_DIR.iterdir())],
    "humaneval": len(load_tasks("single-line", 3)),
    "contamination": str(HUMANEVAL_DATA),
    "fixtures": sorted(t.uri for t in fixture_tasks()),
    "sandbox child": sandbox._child_source(),
    "revision": source_revision(),
    "code": code_label(source_revision()),
}))
"""
    done = subprocess.run([sys.executable, "-I", "-c", probe, str(site)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert Path(found["package"]).is_relative_to(site)
    assert [Path(p).name for p in found["model"]] == SHIPPED_MODEL_FILES
    assert all(Path(p).is_relative_to(site) for p in found["model"])
    assert found["humaneval"] == 3
    assert Path(found["contamination"]).is_relative_to(site)
    assert len(found["fixtures"]) >= len(HOLE_FIXTURES)
    assert all(uri.startswith(site.as_uri()) for uri in found["fixtures"])
    assert found["sandbox child"] == (ROOT / "dlm_lsp/bench/sandbox_child.py").read_text()
    assert found["revision"] is None
    # the reports' headers name the release, not "code unknown"
    assert found["code"] == "dlm-lsp 0.1.0 (no checkout)"
