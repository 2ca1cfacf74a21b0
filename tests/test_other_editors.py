"""editors/README.md's setups for the LSP clients not tested against the server here.

Helix, Sublime Text's LSP package and Kate are not installed where the tests run, so
their setups are written from each editor's documentation (Emacs's is run:
tests/test_emacs.py).  What can be checked without them is checked: each block is
valid in its editor's format as a user copies it, starts the README's executable, and
sends server settings (the editor's key for `initializationOptions`) that the server
takes without a problem.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlm_lsp.config import ServerConfig, from_json

ROOT = Path(__file__).resolve().parent.parent
EXECUTABLE = "/path/to/dlm-lsp/.venv/bin/dlm-lsp"


def block(editor: str, fence: str) -> str:
    """The `fence` block of editors/README.md's section for `editor`, as a user copies it."""
    readme = (ROOT / "editors" / "README.md").read_text(encoding="utf-8")
    section = readme.split(f"### {editor}", 1)[1].split("\n### ", 1)[0]
    return section.split(f"```{fence}\n", 1)[1].split("```", 1)[0]


def assert_settings_taken(options: object) -> None:
    """`options`, sent as initializationOptions, are settings the server knows."""
    assert isinstance(options, dict) and options, "the block sends server settings"
    _, problems = from_json(ServerConfig, options)
    assert problems == []


def test_helix_starts_the_server_with_its_settings_beside_the_language_s_servers() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads(block("Helix", "toml"))
    server = config["language-server"]["dlm-lsp"]
    assert server["command"] == EXECUTABLE
    assert_settings_taken(server["config"])  # Helix's initializationOptions
    [python] = config["language"]
    dlm = next(s for s in python["language-servers"] if isinstance(s, dict))
    assert dlm["name"] == "dlm-lsp"
    assert {"completion", "code-action"} <= set(dlm["only-features"])


def test_sublime_text_starts_the_server_with_its_settings() -> None:
    client = json.loads(block("Sublime Text (LSP package)", "json"))["clients"]["dlm-lsp"]
    assert client["enabled"] is True and client["command"] == [EXECUTABLE]
    assert_settings_taken(client["initializationOptions"])


def test_kate_starts_the_server_with_its_settings() -> None:
    """Kate's manual: a server entry's `initializationOptions` go with `initialize`."""
    server = json.loads(block("Kate", "json"))["servers"]["python"]
    assert server["command"] == [EXECUTABLE]
    assert_settings_taken(server["initializationOptions"])
