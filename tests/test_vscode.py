"""The VS Code extension (editors/vscode): its settings mirror the server's, and it
builds and passes its own unit tests from a clean copy.

The end-to-end run in a real VS Code extension host (code-server + headless
Chromium, ~600 MB of tools) is `editors/vscode/e2e/run.sh`, outside pytest.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dlm_lsp.config import InfillOptions, SamplingControls, ServerConfig, camel, from_json
from dlm_lsp.passes import repair_config
from dlm_lsp.sampler_settings import sampler_config

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


def test_package_json_contributes_every_server_setting_as_the_server_and_readme_say():
    """Types, defaults, allowed values, bounds and the README's descriptions: four
    descriptions had gone stale when only the first three were compared."""
    sync = load_sync_settings()
    have = sync.schema_only(manifest_sections()[sync.SECTION_ID])
    want = sync.schema_only(sync.settings_section())
    assert have == want, f"run: {sync.RUN}"


def test_the_sync_script_run_without_the_server_installed_says_which_python_to_use():
    """editors/README.md said `python3 editors/vscode/scripts/sync_settings.py`, and a python3
    without the server failed with a traceback (No module named 'dlm_lsp')."""
    bare = subprocess.run([sys.executable, "-I", "-S",  # no site-packages: no dlm_lsp, no torch
                           str(EXTENSION / "scripts" / "sync_settings.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert bare.returncode == 1 and "Traceback" not in bare.stderr
    sync = load_sync_settings()
    assert "is not installed for" in bare.stderr and sync.RUN in bare.stderr
    assert sync.RUN in EDITORS_README.read_text(encoding="utf-8")


def server_properties() -> dict[str, dict]:
    """camelCase server setting -> its package.json property."""
    return {key.removeprefix("dlm."): prop
            for key, prop in manifest_sections()["dlm.server"]["properties"].items()}


def readme_defaults() -> dict[str, object]:
    """camelCase setting -> the default the README's Configuration table documents."""
    text = (EXTENSION.parent.parent / "README.md").read_text(encoding="utf-8")
    table = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    found = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            for name in re.findall(r"`(\w+)`", cells[0]):
                found[name] = json.loads(cells[1].strip("`"))
    return found


def test_every_server_switch_is_a_checkbox_in_the_settings_ui():
    """VS Code's Settings UI shows ["boolean", "null"] as "Edit in settings.json" only:
    earlyStop, stopWhenSettled, ltrFirstLine and fallback could not be switched there."""
    switches = [key for key, prop in server_properties().items() if "boolean" in prop["type"]]
    assert {"earlyStop", "stopWhenSettled", "ltrFirstLine", "fallback"} <= set(switches)
    for key in switches:
        if key == "contextCache":  # true, false or "auto": a dropdown of the three
            assert server_properties()[key]["enum"] == [True, False, "auto"]
            continue
        assert server_properties()[key]["type"] == "boolean", key


def test_the_defaults_vs_code_shows_and_sends_are_the_ones_the_readme_documents():
    """package.json said null for ten controls whose default the README gives (topP 1.0,
    remaskBelow 0.5, repairRounds 2, ...): the Settings UI showed an empty box."""
    documented = readme_defaults()
    assert sorted(documented) == sorted(server_properties())
    for key, prop in server_properties().items():
        assert prop["default"] == documented[key], key


def test_sending_vs_code_s_defaults_changes_nothing_on_the_server():
    """The extension sends every setting at its shown default: the fills must be those
    of a client that sends nothing."""
    defaults = {key: prop["default"] for key, prop in server_properties().items()}
    sent, problems = from_json(ServerConfig, defaults)
    assert problems == []
    plain = ServerConfig()
    assert sampler_config(sent, InfillOptions(), 16, sent.strategy) == sampler_config(
        plain, InfillOptions(), 16, plain.strategy)
    assert repair_config(sent, InfillOptions()) == repair_config(plain, InfillOptions())
    controls = {f.name for f in dataclasses.fields(SamplingControls)}
    for f in dataclasses.fields(ServerConfig):
        if f.name not in controls:
            assert getattr(sent, f.name) == getattr(plain, f.name), f.name


def test_the_settings_ui_bounds_are_the_ones_the_server_checks():
    """The Settings UI refuses, as it is typed, exactly what the server would refuse, within
    the integers VS Code can send exactly (a JavaScript number's): past them, the server's
    own bound (`seed`'s 2**63 - 1) was read as 2**63, and refused."""
    safe = load_sync_settings().SAFE_INTEGER
    assert safe == 2 ** 53 - 1 and float(safe) == safe and float(safe + 2) == safe + 1
    bounded = 0
    for key, prop in server_properties().items():
        step = 1 if "integer" in prop["type"] else 0.5
        edges = []
        if "minimum" in prop:
            edges += [(prop["minimum"], True)]
            edges += [(prop["minimum"] - step, False)] if prop["minimum"] != -safe else []
        if "exclusiveMinimum" in prop:
            edges += [(prop["exclusiveMinimum"], False),
                      (prop["exclusiveMinimum"] + step, True)]
        if "maximum" in prop:
            edges += [(prop["maximum"], True)]
            edges += [(prop["maximum"] + step, False)] if prop["maximum"] != safe else []
        assert all(abs(value) <= safe for value, _ in edges), key
        for value, accepted in edges:
            assert (from_json(ServerConfig, {key: value})[1] == []) == accepted, (key, value)
        bounded += bool(edges)
    assert bounded >= 30  # every number setting with a range (candidates, steps, ...)


@pytest.mark.parametrize(("key", "values"), [
    ("holeMarker", ["<FILL>", "??", "é", "\u2028", "", "\r", "\n", "a\r\nb"]),
    ("remoteToken", ["", "a-b_c.d~e+f/g=", "tok en", "€uro", "\t", "s\udcffcret"]),
])
def test_the_settings_ui_patterns_take_what_the_server_takes(key, values):
    """VS Code checks a string setting's `pattern` as it is typed (a search, so it is
    anchored): it must take exactly the values the server takes."""
    prop = server_properties()[key]
    pattern = re.compile(prop["pattern"])
    assert pattern.pattern.startswith("^") and pattern.pattern.endswith("$")
    for value in values:
        taken = from_json(ServerConfig, {key: value})[1] == []
        assert (pattern.search(value) is not None) == taken, (key, value)
    assert prop["patternErrorMessage"].startswith("should be ")


def test_server_settings_use_the_wire_names_the_server_reads():
    server = manifest_sections()["dlm.server"]["properties"]
    fields = [f.name for f in ServerConfig.__dataclass_fields__.values()]
    assert sorted(server) == sorted(f"dlm.{camel(name)}" for name in fields)


def test_client_settings_cannot_be_mistaken_for_server_settings():
    sections = manifest_sections()
    client, server = sections["dlm.client"]["properties"], sections["dlm.server"]["properties"]
    assert not set(client) & set(server)
    assert "dlm.server.path" in client and "dlm.inline.debounceMs" in client


def test_a_workspace_cannot_set_what_runs_or_where_documents_and_tokens_go():
    """A cloned repository's .vscode/settings.json could name the program VS Code starts
    as the server, or a `remoteUrl` of its own, which was sent the documents and the
    user's DLM_LSP_REMOTE_TOKEN.  VS Code's "machine" scope leaves them to the user's
    settings; every other setting (a workspace's steps, languages) stays the workspace's."""
    sections = manifest_sections()
    scoped = {key for section in sections.values()
              for key, prop in section["properties"].items() if prop.get("scope") == "machine"}
    assert scoped == {"dlm.server.path", "dlm.server.args", "dlm.server.env",
                      "dlm.server.address", "dlm.server.token", "dlm.remoteUrl",
                      "dlm.remoteToken", "dlm.remoteCaFile"}


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


def test_the_extension_activates_at_startup_for_languages_added_to_dlm_languages():
    """Its `onLanguage` events are fixed at build time, the default languages': a user who
    added Haskell to dlm.languages and opened only Haskell files got no activation, so no
    ghost text and no status bar. It also activates once VS Code has started (the server
    waits for a file of dlm.languages: src/languages.ts); the defaults still activate it
    as soon as one opens."""
    package = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    events = package["activationEvents"]
    assert "onStartupFinished" in events
    client = package["contributes"]["configuration"][0]["properties"]
    defaults = client["dlm.languages"]["default"]
    assert {f"onLanguage:{language}" for language in defaults} <= set(events)


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


EDITORS_README = EXTENSION.parent / "README.md"


def contributed_commands() -> dict[str, dict]:
    package = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    return {c["command"]: c for c in package["contributes"]["commands"]}


def test_the_commands_contributed_are_the_ones_the_extension_registers():
    """A contributed command the extension never registers fails with "command not found";
    one it registers without contributing it is missing from the palette."""
    source = (EXTENSION / "src" / "extension.ts").read_text(encoding="utf-8")
    registered = set(re.findall(r'command\("(dlm-lsp\.\w+)", \(\) =>', source))
    assert registered == set(contributed_commands())
    package = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    used = [*package["contributes"]["menus"]["editor/context"],
            *package["contributes"]["keybindings"]]
    assert {item["command"] for item in used} <= registered


def test_the_editor_readme_names_every_command_as_the_palette_shows_it_with_its_key():
    """editors/README.md tells users what to type in the palette (`DLM: Fill selection`)
    and which key runs it."""
    readme = EDITORS_README.read_text(encoding="utf-8")
    titles = {command: f"**{c['category']}: {c['title']}**"
              for command, c in contributed_commands().items()}
    for title in titles.values():
        assert title in readme, title
    package = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    for binding in package["contributes"]["keybindings"]:
        key = "+".join(part.capitalize() for part in binding["key"].split("+"))
        assert f"{titles[binding['command']]} (`{key}`)" in readme, binding


def test_every_client_setting_the_extension_reads_is_contributed_and_documented():
    """A key misspelt in the code is never set (VS Code keeps the fallback whatever the user
    writes); one left out of editors/README.md is found only in the Settings UI, and a
    default the README gives must be the one the Settings UI shows."""
    client = manifest_sections()["dlm.client"]["properties"]
    server = manifest_sections()["dlm.server"]["properties"]
    source = "\n".join(p.read_text(encoding="utf-8") for p in (EXTENSION / "src").glob("*.ts"))
    read = set(re.findall(r'config(?:\(\))?\.get(?:<[^>]+>)?\("([\w.]+)"', source))
    restarting = re.search(r"RESTART_SETTINGS = \[([^\]]+)\]", source).group(1)
    read |= {key.removeprefix("dlm.") for key in re.findall(r'"([\w.]+)"', restarting)}
    assert {"server.path", "inline.debounceMs", "holeMarker"} <= read
    for key in read:
        assert f"dlm.{key}" in client or f"dlm.{key}" in server, key
    readme = EDITORS_README.read_text(encoding="utf-8")
    for key, prop in client.items():
        assert f"`{key}`" in readme, key
        given = re.search(rf"`{re.escape(key)}`\s+\(([^)`;]+)\)", readme)
        if given:
            assert json.loads(given.group(1)) == prop["default"], key


def test_the_trace_setting_says_it_needs_the_output_s_trace_log_level():
    """vscode-languageclient 11 (the version bundled) traces the LSP messages only while the output
    channel's log level is Trace (then `dlm.trace.server: "off"` still traces them):
    "messages" or "verbose" alone logged nothing, as the description promised."""
    source = (EXTENSION / "src" / "extension.ts").read_text(encoding="utf-8")
    assert 'new DlmClient("dlm", "dlm-lsp"' in source  # the client reads `dlm.trace.server`
    lock = json.loads((EXTENSION / "package-lock.json").read_text(encoding="utf-8"))
    major = int(lock["packages"]["node_modules/vscode-languageclient"]["version"].split(".")[0])
    assert major >= 11
    trace = manifest_sections()["dlm.client"]["properties"]["dlm.trace.server"]
    assert "Trace" in trace["markdownDescription"] and "log level" in trace["markdownDescription"]
    assert "log level" in EDITORS_README.read_text(encoding="utf-8").split(
        "`dlm.trace.server`", 1)[1][:400]
