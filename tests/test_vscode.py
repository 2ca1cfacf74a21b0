"""The VS Code extension (editors/vscode): its settings mirror the server's, and it
builds and passes its own unit tests from a clean copy.

The end-to-end run in a real VS Code extension host (code-server + headless
Chromium, ~600 MB of tools) is `editors/vscode/e2e/run.sh`, outside pytest.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dlm_lsp.config import ServerConfig, camel

EXTENSION = Path(__file__).resolve().parent.parent / "editors" / "vscode"


def load_sync_settings():
    """editors/vscode/scripts/sync_settings.py, imported from its path."""
    spec = importlib.util.spec_from_file_location(
        "sync_settings", EXTENSION / "scripts" / "sync_settings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def manifest_sections() -> dict[str, dict]:
    package = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    return {s["id"]: s for s in package["contributes"]["configuration"]}


def test_package_json_contributes_every_server_setting_with_its_type_and_default():
    sync = load_sync_settings()
    have = sync.schema_only(manifest_sections()[sync.SECTION_ID])
    want = sync.schema_only(sync.settings_section())
    assert have == want, "run: python3 editors/vscode/scripts/sync_settings.py"


def test_server_settings_use_the_wire_names_the_server_reads():
    server = manifest_sections()["dlm.server"]["properties"]
    fields = [f.name for f in ServerConfig.__dataclass_fields__.values()]
    assert sorted(server) == sorted(f"dlm.{camel(name)}" for name in fields)


def test_client_settings_cannot_be_mistaken_for_server_settings():
    sections = manifest_sections()
    client, server = sections["dlm.client"]["properties"], sections["dlm.server"]["properties"]
    assert not set(client) & set(server)
    assert "dlm.server.path" in client and "dlm.inline.debounceMs" in client


def test_every_setting_is_described():
    for section in manifest_sections().values():
        for key, prop in section["properties"].items():
            assert prop.get("markdownDescription", "").strip(), key


def test_fill_commands_are_offered_in_the_menu_and_key_only_for_the_server_s_languages():
    """In a Markdown file "DLM: Fill selection" could only fail (the server never opened
    the document): the `when`s read the context key the extension sets from dlm.languages,
    which it sets under that name."""
    package = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    source = (EXTENSION / "src" / "extension.ts").read_text(encoding="utf-8")
    key = re.search(r'const LANGUAGES_CONTEXT = "([^"]+)"', source).group(1)
    assert 'executeCommand("setContext", LANGUAGES_CONTEXT, languages)' in source
    offered = [*package["contributes"]["menus"]["editor/context"],
               *(k for k in package["contributes"]["keybindings"]
                 if k["command"].startswith("dlm-lsp.fill"))]
    assert {item["command"] for item in offered} >= {"dlm-lsp.fillSelection",
                                                     "dlm-lsp.fillHoles"}
    for item in offered:
        assert f"editorLangId in {key}" in item.get("when", ""), item


NPM = shutil.which("npm")


@pytest.mark.skipif(NPM is None, reason="npm not found: the extension's build needs Node.js + npm")
def test_extension_typechecks_builds_and_passes_its_unit_tests(tmp_path):
    """`npm ci && npm test` in a clean copy of the extension (only what git tracks)."""
    copy = tmp_path / "vscode"
    shutil.copytree(EXTENSION, copy, ignore=shutil.ignore_patterns(
        "node_modules", "dist", "out", "*.vsix", "work"))
    ci = subprocess.run([NPM, "ci", "--no-fund", "--no-audit"], cwd=copy, capture_output=True,
                        text=True, timeout=300)
    assert ci.returncode == 0, ci.stdout[-3000:] + ci.stderr[-3000:]
    test = subprocess.run([NPM, "test"], cwd=copy, capture_output=True, text=True, timeout=300)
    assert test.returncode == 0, test.stdout[-6000:] + test.stderr[-3000:]
    assert (copy / "dist" / "extension.js").exists()
    assert "# fail 0" in test.stdout or "ℹ fail 0" in test.stdout
