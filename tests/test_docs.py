"""The documentation works as written: what it links to or names exists, and the
commands it shows take the options it shows.

A user copies a command from the README, the editors' README, the model card or a
benchmark report and runs it; a path or an option renamed in the code and not in the
prose is an error message (or a 404) at the first try.  The editors' setup blocks and the
settings table have tests of their own (tests/test_other_editors.py, test_emacs.py,
test_nvim.py, test_vscode.py); these cover what every document shows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from cli_parsers import command_parsers
from rpc import ServerProcess

from dlm_lsp.config import (
    REFINE_ORDERS,
    SCHEDULES,
    STRATEGIES,
    InfillOptions,
    ServerConfig,
    camel,
    from_json,
)

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "editors" / "README.md",
        ROOT / "editors" / "vscode" / "README.md",
        ROOT / "dlm_lsp" / "weights" / "default" / "MODEL_CARD.md",
        *sorted((ROOT / "benchmarks" / "results").glob("*.md"))]
# a path into the repository, as the documents write one in backticks
REPO_PATH = re.compile(r"(?:dlm_lsp|benchmarks|editors|tests|fixtures)/[\w./*-]*")
# where a shell command ends and the next (or a comment) begins
COMMAND_END = re.compile(r"\s(?:\||;|&&|#|>|2>)\s")
# `dlm-lsp` itself (also a path's last part, /path/to/.venv/bin/dlm-lsp), python -m dlm_lsp,
# or a span that begins with a `bench` command, as the benchmark tables write one
DLM_LSP = re.compile(r"(?:^|[\s/])(?:dlm-lsp|-m dlm_lsp)(?=\s|$)|^(?=bench\s)")
# a script or module the documents run with python (or bash)
SCRIPT = re.compile(r"(benchmarks/\w+\.(?:py|sh)|-m dlm_lsp(?:\.\w+)+)")
# a commit as the documents name one: 7 to 40 hex digits, a digit and a letter among them
COMMIT = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
# commits a report names and says were never merged
NEVER_MERGED = {"426c34b"}


def code_spans(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every code span of `path`, a span broken over lines joined with
    spaces, and every line of its fenced blocks."""
    spans, prose, fenced = [], [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            prose.append("")
        elif fenced:
            spans.append((number, line))
            prose.append("")
        else:
            prose.append(line)
    text = "\n".join(prose)
    for span in re.finditer(r"`([^`]+)`", text):
        spans.append((text.count("\n", 0, span.start()) + 1, " ".join(span.group(1).split())))
    return spans


def options_shown(command: str) -> list[str]:
    """The `--options` of `command` up to where it ends, bare of `[...]` and `=value`."""
    command = COMMAND_END.split(f" {command} ", 1)[0]
    try:
        words = shlex.split(command)
    except ValueError:  # an unpaired quote: a fragment of prose, not a command
        words = command.split()
    return [word.strip("[]").split("=", 1)[0] for word in words
            if word.strip("[").startswith("--")]


def test_every_path_the_documents_link_or_name_exists():
    missing = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            if not (doc.parent / target.split("#", 1)[0]).exists():
                missing.append(f"{doc.relative_to(ROOT)}: link {target}")
        for line, span in code_spans(doc):
            if REPO_PATH.fullmatch(span) and not (
                    any(ROOT.glob(span)) or any(doc.parent.glob(span))):
                missing.append(f"{doc.relative_to(ROOT)}:{line}: {span}")
    assert missing == []


def test_every_dlm_lsp_command_the_documents_show_takes_the_options_they_show():
    """Each `dlm-lsp [command ...] --option` names commands and options that exist."""
    parsers = command_parsers()
    wrong = []
    for doc in DOCS:
        for line, span in code_spans(doc):
            for found in DLM_LSP.finditer(span):
                words = COMMAND_END.split(f" {span[found.end():]} ", 1)[0].split()
                prog = "dlm-lsp"
                for word in words:
                    if word.startswith("-") or f"{prog} {word}" not in parsers:
                        break
                    prog = f"{prog} {word}"
                known = {name for action in parsers[prog]._actions
                         for name in action.option_strings}
                wrong += [f"{doc.relative_to(ROOT)}:{line}: {prog} {option}"
                          for option in options_shown(span[found.end():])
                          if option not in known]
    assert wrong == []


def test_every_script_the_documents_run_takes_the_options_they_show():
    """benchmarks/*.py and `python -m dlm_lsp.*` modules: each option shown is one the
    script defines (its parser spells it out: `add_argument("--option"`)."""
    wrong = []
    for doc in DOCS:
        for line, span in code_spans(doc):
            for found in SCRIPT.finditer(span):
                name = found.group(1)
                script = ROOT / (name if name.startswith("benchmarks/")
                                 else name.removeprefix("-m ").replace(".", "/") + ".py")
                if not script.exists():
                    wrong.append(f"{doc.relative_to(ROOT)}:{line}: {name} does not exist")
                    continue
                source = script.read_text(encoding="utf-8")
                wrong += [f"{doc.relative_to(ROOT)}:{line}: {name} {option}"
                          for option in options_shown(span[found.end():])
                          if f'"{option}"' not in source]
    assert wrong == []


def test_every_commit_the_documents_name_is_in_this_repository_s_history():
    """Reports name the commit each run measured.  A helper's branch is merged under new
    hashes, and four reports written there named 12 commits `git show` could not find.
    The check is ancestry of HEAD, not presence in the object store: a local clone
    copies a helper's unmerged objects too, so a hash only that clone knew passed here
    and failed in CI's clone, which fetches main's history alone."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.strip()
    if shallow == "true":
        pytest.skip("a shallow clone lacks the history")
    named = sorted({commit for doc in DOCS
                    for commit in COMMIT.findall(doc.read_text(encoding="utf-8"))}
                   - NEVER_MERGED)
    history = subprocess.run(["git", "rev-list", "HEAD"], cwd=ROOT, text=True,
                             capture_output=True, check=True).stdout.split()
    assert [commit for commit in named
            if not any(full.startswith(commit) for full in history)] == []


def readme_section(title: str) -> str:
    """The text of the README's `## title` section, up to the next one."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def wire_names(cls: type) -> set[str]:
    return {camel(field.name) for field in dataclasses.fields(cls)}


def listed_after(words: str, text: str) -> set[str]:
    """The code spans of `text` from `words` up to the next `;`, `(` or `.`."""
    found = re.search(re.escape(words) + r"([^;(.]*)", " ".join(text.split()))
    assert found, f"the section no longer says which controls are {words.rstrip(':')}"
    return set(re.findall(r"`(\w+)`", found.group(1)))


def test_the_controls_said_to_be_only_settings_or_only_request_options_are_so():
    """"Every control is a setting and a per-request option", said the Denoising
    controls, then named `latencyMs` as the latency target: sent as a setting (in
    initializationOptions, or VS Code's settings.json) it was "unknown setting
    'latencyMs' ignored"; the setting is per task kind (`latencyMsSingleLine`, ...)."""
    section = readme_section("Denoising controls")
    settings, options = wire_names(ServerConfig), wire_names(InfillOptions)
    settings_only = listed_after("settings only:", section)
    options_only = listed_after("request options only:", section)
    assert settings_only and settings_only <= settings - options
    assert options_only == options - settings


def test_every_control_the_denoising_section_names_is_both_a_setting_and_an_option():
    """The rest of what the section names in code spans is a control both ways, a value
    one of them takes, or a field of `dlm/status` (What the server speaks)."""
    section = readme_section("Denoising controls")
    status_row = next(row for row in readme_section("What the server speaks").splitlines()
                      if row.startswith("| `dlm/status`"))
    status_fields = set(re.search(r"Result `\{([^}]*)\}`", status_row).group(1)
                        .replace(" ", "").split(","))
    exceptions = (listed_after("settings only:", section)
                  | listed_after("request options only:", section))
    values = {*STRATEGIES, *SCHEDULES, *REFINE_ORDERS}
    named = set(re.findall(r"`([a-z][A-Za-z]*)`", section))
    both = wire_names(ServerConfig) & wire_names(InfillOptions)
    assert sorted(named - both - exceptions - values - status_fields) == []


def top_level_names(braced: str) -> set[str]:
    """The member names of a `{name, name?: ..., name: {...}}` shape as the README writes
    a result, outside its nested braces and brackets."""
    depth, outside = 0, []
    for ch in braced.strip()[1:-1]:
        depth += (ch in "[{") - (ch in "]}")
        if depth == 0 and ch not in "]}":
            outside.append(ch)
    return {part.split(":")[0].strip().rstrip("?") for part in "".join(outside).split(",")}


def documented_result(method: str) -> str:
    """The `Result {...}` shape the README's "What the server speaks" gives `method`."""
    row = next(row for row in readme_section("What the server speaks").splitlines()
               if row.startswith(f"| `{method}`"))
    return re.search(r"Result `(\{.*?\})`", row).group(1)


def test_the_results_of_infill_and_status_have_the_members_the_readme_lists():
    """A client is written against the README's result shapes: a member renamed or added
    in the server and not there is a client reading a name that is never sent."""
    infill = documented_result("dlm/infill")
    candidate = re.search(r"candidates: \[(\{[^}]*\})\]", infill).group(1)
    stats = re.search(r"stats: (\{[^}]*\})", infill).group(1)
    server = ServerProcess()
    try:
        client = server.client
        client.initialize({"candidates": 2})
        client.open("file:///docs/a.py", "def add(a, b):\n    \n")
        at = {"line": 1, "character": 4}
        filled = client.call("dlm/infill", {"textDocument": {"uri": "file:///docs/a.py"},
                                            "range": {"start": at, "end": at}}, timeout=120)
        status = client.call("dlm/status", {})["result"]
    finally:
        server.close()
    result = filled["result"]
    assert set(result) - {"message"} == top_level_names(infill)
    assert {name for c in result["candidates"] for name in c} == top_level_names(candidate)
    assert set(result["stats"]) == top_level_names(stats)
    assert set(status) == top_level_names(documented_result("dlm/status"))


def test_the_remote_status_sample_is_what_status_remote_prints(monkeypatch):
    """Scale out shows `dlm-lsp status --remote` after 48 fills.  The sample began at the
    replica tables, while the command prints the service's address, model, device,
    replica count and queue depth first: given the sample's own values, the command must
    print the sample line for line."""
    from dlm_lsp.remote.client import RemoteEngine
    from dlm_lsp.status import remote_status

    section = readme_section("Scale out: a shared GPU service")
    block = section.split("dlm-lsp status --remote URL", 1)[1].split("```text\n", 1)[1]
    sample = [line.removeprefix("  ") for line in block.split("```", 1)[0].rstrip().splitlines()]
    assert sample[0].startswith("service "), "the sample leaves out the service's lines"
    head = dict(line.split(None, 1) for line in sample[:sample.index("")])
    replicas: dict[str, dict[str, str]] = {}
    table: list[str] = []
    for line in sample[sample.index(""):]:
        if not line:
            table = []
        elif not table:
            table = line.split()
        else:
            replicas.setdefault(line.split()[0], {}).update(zip(table, line.split(),
                                                                strict=True))
    service = {"model": head["model"], "device": head["device"],
               "replicas": int(head["replicas"].removesuffix(" live")),
               "queueDepth": int(head["queueDepth"]), "replicaStats": list(replicas.values())}
    monkeypatch.setattr(RemoteEngine, "service_metrics", lambda self: service)
    assert remote_status(head["service"]) == sample


def test_the_progress_and_stop_lines_the_benchmarks_section_quotes_are_printed_so():
    """Benchmarks quotes a `bench` command's progress line and what a stopped run says
    (its first line, its table rows, its JSON and its last line), for a run stopped at 64
    of 200 tasks.  Made by the code from the same numbers, each must be what it quotes."""
    from dlm_lsp.bench.output import ReportFiles
    from dlm_lsp.bench.progress import Partial, Progress

    spans = {span for _, span in code_spans(ROOT / "README.md")}
    clock = iter([0.0, 41.0])
    progress = Progress("humaneval", 200, "tasks", clock=lambda: next(clock))
    partial = Partial(64, 200, "tasks", "SIGINT")
    files = ReportFiles(partial.report)
    files.written += ["run.json", "run.md"]
    with contextlib.redirect_stderr(io.StringIO()) as stderr:
        progress.finish(64, "12 passed")
    printed = [stderr.getvalue().strip(), str(partial), partial.mark().strip(), files.said(),
               '"partial": ' + json.dumps(dataclasses.asdict(partial))]
    assert [line for line in printed if " ".join(line.split()) not in spans] == []


def test_every_extra_the_documents_install_is_one_the_package_declares():
    """`pip install -e ".[remote]"`, `dlm-lsp[bench]`, "the `bench-ar` extra": an extra
    pip does not know is only a warning, and the command a user copied then installs
    the package without what the section needs."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
                   ["project"]["optional-dependencies"])
    named = {(doc.relative_to(ROOT), extra) for doc in DOCS
             for found in re.finditer(r'(?:\.|dlm-lsp)\[([\w,-]+)\]|`([\w-]+)` extra',
                                      doc.read_text(encoding="utf-8"))
             for extra in (found.group(1) or found.group(2)).split(",")}
    assert named
    assert [f"{doc}: {extra}" for doc, extra in sorted(named) if extra not in declared] == []


def test_the_settings_scale_out_gives_an_editor_are_settings_the_server_takes():
    """The section's ```json blocks are what a user pastes into the editor's dlm-lsp
    settings (`<the token>` standing for the token): each name and value must be taken,
    not "unknown setting ... ignored", or the editor fills on the local engine."""
    section = readme_section("Scale out: a shared GPU service")
    blocks = [json.loads(block.split("```", 1)[0])
              for block in section.split("```json\n")[1:]]
    assert len(blocks) == 2
    for settings in blocks:
        pasted = {name: "s3cret" if str(value).startswith("<") else value
                  for name, value in settings.items()}
        assert from_json(ServerConfig, pasted)[1] == []
