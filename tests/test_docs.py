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
import sys
from pathlib import Path

import pytest
from cli_parsers import command_parsers
from rpc import ServerProcess

from dlm_lsp.config import (
    DEFAULT_STEPS,
    REFINE_ORDERS,
    SCHEDULES,
    STRATEGIES,
    InfillOptions,
    ServerConfig,
    accepted,
    camel,
    from_json,
    value_range,
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
    return text_code_spans(path.read_text(encoding="utf-8"))


def text_code_spans(markdown: str) -> list[tuple[int, str]]:
    """`code_spans` of a piece of a document (a section: a fence's backticks paired with
    a span's would read the prose between as code)."""
    spans, prose, fenced = [], [], False
    for number, line in enumerate(markdown.split("\n"), 1):
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


def heading_anchor(title: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation other than
    `-` and `_` dropped, spaces made `-`."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def test_every_link_to_a_heading_of_the_same_document_finds_it():
    """The README's contents list and its "Next:" line link to `#sections`; a heading
    renamed left a link that scrolls nowhere, which the path check above skips."""
    broken = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        anchors = {heading_anchor(title) for title in
                   re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}
        broken += [f"{doc.relative_to(ROOT)}: #{target}"
                   for target in re.findall(r"\]\(#([^)\s]+)\)", text)
                   if target not in anchors]
    assert broken == []


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
    'latencyMs' ignored" (then the settings were per task kind, `latencyMsSingleLine`,
    ...; `latencyMs` is a setting too since)."""
    section = readme_section("Denoising controls")
    settings, options = wire_names(ServerConfig), wire_names(InfillOptions)
    settings_only = listed_after("settings only:", section)
    options_only = listed_after("request options only:", section)
    assert settings_only and settings_only <= settings - options
    assert options_only == options - settings


def test_the_configuration_gives_each_number_the_range_the_server_checks():
    """The table gave defaults and meanings, no ranges: a user learnt that `candidates`
    stops at 16 from the refusal.  The Ranges list says them in the words the refusal
    uses, and follows the checks (`config.value_range`) as they change."""
    section = " ".join(readme_section("Configuration").split())
    listed = section.split("- **Ranges** of the numbers", 1)[1].split(". (Until", 1)[0]
    listed = listed.split("): ", 1)[1].replace("\\*", "*")
    said: dict[str, str] = {}
    for group in listed.split("; "):
        names, words = group.split(": ", 1)
        said.update({name: words for name in re.findall(r"`(\w+)`", names)})
    checked = {camel(field.name): accepted(field.name, None)
               for field in dataclasses.fields(ServerConfig) if value_range(field.name)}
    assert said == checked


def test_every_control_the_denoising_section_names_is_both_a_setting_and_an_option():
    """The rest of what the section names in code spans is a control both ways, a value
    one of them takes, or a field of `dlm/status` (What the server speaks)."""
    section = readme_section("Denoising controls")
    status_fields = top_level_names(documented_result("dlm/status"))
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
    """The `Result {...}` shape the README's "What the server speaks" gives `method`, in
    the method's own subsection (### `dlm/infill`), a span broken over lines joined."""
    section = " ".join(readme_subsection(f"`{method}`").split())
    return re.search(r"Result `(\{.*?\})`", section).group(1)


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
    printed = [stderr.getvalue().strip(), partial.heading, partial.mark().strip(), files.said(),
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


def readme_subsection(title: str) -> str:
    """The text of the README's `### title` subsection, up to the next heading."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.split(r"\n##+ ", text.split(f"\n### {title}\n", 1)[1], maxsplit=1)[0]


def section_options(title: str) -> list[tuple[int, str]]:
    """The `--option` code spans of the README's section `title` that stand alone, with
    no command before them in the span (the prose says which command takes them)."""
    return [(line, option) for line, span in text_code_spans(readme_section(title))
            if span.startswith("--") for option in options_shown(span)]


@pytest.mark.parametrize(("title", "commands"), [
    ("Command line", ["dlm-lsp", "dlm-lsp fill"]),
    ("Supported models", ["dlm-lsp models check", "dlm-lsp train"]),
    ("Training", ["dlm-lsp train"]),
])
def test_the_options_a_section_names_alone_are_options_of_its_commands(title, commands):
    """The Training section names `--vocab-size` or `--eval-every N` in its prose, with no
    `dlm-lsp train` in the same span, so the command-line check above never read them: a
    flag renamed in the trainer stayed in the prose."""
    parsers = command_parsers()
    known = {name for command in commands for action in parsers[command]._actions
             for name in action.option_strings}
    options = section_options(title)
    assert options
    assert [f"README {title}:{line}: {option}" for line, option in options
            if option not in known] == []


FILL_LINE = re.compile(r"# hole at offset (\d+): ([a-z-]+), (\d+) tokens, "
                       r"\d+ steps?(?: \((?:\d+(?:, stopped early,)? \+ \d+ in repair"
                       r"|stopped early)\))?, \d+ ms, "
                       r"syntax (?:valid|INVALID|unchecked) \((?:diffusion|repair|left-to-right)"
                       r"(?:, \d+ repair round\(s\))?\)")


def test_the_quick_start_s_sample_line_is_the_one_its_first_fill_prints():
    """The Quick start quotes the line `dlm-lsp fill fixtures/hello.py` prints on stderr.
    Its time, steps and path vary with the machine (bf16 or fp32); where the hole is, the
    kind of fill and the span's length do not, and the line's shape is the program's."""
    sample = next(span for _, span in text_code_spans(readme_section("Quick start"))
                  if span.startswith("# hole at offset"))
    documented = FILL_LINE.fullmatch(sample)
    assert documented, sample
    filled = subprocess.run([sys.executable, "-m", "dlm_lsp", "fill", "fixtures/hello.py"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert filled.returncode == 0, filled.stderr
    printed = [FILL_LINE.fullmatch(line) for line in filled.stderr.splitlines()
               if line.startswith("# hole at offset")]
    assert len(printed) == 1 and printed[0], filled.stderr
    assert documented.groups() == printed[0].groups()


def _expand_checkpoints(cell: str) -> tuple[str, ...]:
    """The hub ids of a table cell that abbreviates them as the README does:
    `org/Name-Base-7B, -Instruct-7B, Other-Base-7B` (a `-tail` replaces as many parts of
    the id before it; a name without an owner has the one before it)."""
    ids: list[str] = []
    for name in (part.strip() for part in cell.split(",")):
        if name.startswith("-"):
            name = ids[-1].rsplit("-", name.count("-"))[0] + name
        elif "/" not in name:
            name = f"{ids[-1].split('/')[0]}/{name}"
        ids.append(name)
    return tuple(ids)


def test_the_supported_models_table_gives_each_family_the_registry_s_conventions():
    """A user picks a checkpoint and reads its mask and span end from this table; the
    registry (`dlm-lsp models`) is what the loader uses."""
    from dlm_lsp.models.registry import FAMILIES, LLAMA, QWEN2

    rows = {}
    for line in readme_section("Supported models").splitlines():
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)]
        if len(cells) == 8 and cells[1].startswith("`"):
            rows[cells[1].strip("`")] = cells[2:7]
    assert set(rows) == set(FAMILIES)
    for name, (checkpoints, network, logits, mask, end) in rows.items():
        family = FAMILIES[name]
        assert _expand_checkpoints(checkpoints) == family.checkpoints, name
        assert network.split()[0] == {QWEN2: "Qwen2", LLAMA: "LLaMA"}[family.architecture]
        assert logits == ("shifted" if family.shifted else "aligned"), name
        assert mask.startswith(f"`{family.mask_token}`"), name
        assert family.mask_id is None or f"({family.mask_id})" in mask, name
        assert end.startswith(f"`{family.end_token}`"), name


def _shipped() -> tuple[Path, dict]:
    """The shipped model's folder and its config.json."""
    weights = ROOT / "dlm_lsp" / "weights" / "default"
    return weights, json.loads((weights / "config.json").read_text(encoding="utf-8"))


def test_the_embedded_model_s_table_gives_the_numbers_its_config_records():
    """Every number of the README's model table is one the shipped model's config.json
    records of its shape and its training run, or the size of its weights."""
    weights, config = _shipped()
    run = config["training"]
    table = " ".join(readme_subsection("The embedded default model").split())
    shards = sum(p.stat().st_size for p in weights.glob("model*.safetensors"))
    expected = [
        f"{run['parameters'] / 1e6:.1f}M parameters",
        f"d {config['d_model']}, {config['n_layers']} layers, {config['n_heads']} heads",
        f"{config['vocab_size']} ids",
        f"{run['train_files']:,} Python files",
        f"{run['train_tokens'] / 1e6:.1f}M tokens;",
        f"{len(run['heldout_files'])} files ({run['heldout_tokens'] / 1e3:,.0f}k tokens) held out",
        f"{run['seconds']:,.0f} s of training ({run['tokens_seen'] / 1e6:.1f}M tokens, "
        f"{run['tokens_per_second'] / 1e6:.2f}M tokens/s)",
        f"held-out loss {run['heldout_loss']:.2f} (masked diffusion; "
        f"{run['initial_heldout_loss']:.2f} before training), "
        f"{run['heldout_infill_loss']:.2f} on fully masked infilling rows",
        f"{shards / 2**20:.1f} MiB fp16 safetensors in "
        f"{len(list(weights.glob('model*.safetensors')))} shards",
        f"{len(run['sources']) - 1} installed packages",
        *(f"Python {source['version']} standard library" for source in run["sources"]
          if source["name"] == "Python standard library"),
    ]
    assert [phrase for phrase in expected if phrase not in table] == []


def test_the_shipped_model_s_card_lists_every_source_its_config_records():
    """The card is where a user reads what the model was trained on and under which
    licence; config.json is what the training run recorded.  Every source (name,
    version, declared licence, files, bytes) must be a row of the card's data section."""
    weights, config = _shipped()
    card = (weights / "MODEL_CARD.md").read_text(encoding="utf-8")
    data = card.split("## Training data and licences")[1].split("\n## ")[0]
    rows = {tuple(cell.strip() for cell in line.strip("|").split(" | "))
            for line in data.splitlines() if line.startswith("| ")}
    sources = config["training"]["sources"]
    missing = [source["name"] for source in sources
               if (source["name"], source["version"], source["licence"].replace("|", "/"),
                   f"{source['files']:,}", f"{source['bytes']:,}") not in rows]
    assert sources and missing == []


def test_the_card_s_history_is_the_config_s():
    """The card says the shipped model was trained from scratch in one run; a model
    continued from another keeps the earlier runs in its config.json (`lineage.py`), and
    the card would then have to say so."""
    from dlm_lsp.training.lineage import Lineage

    weights, config = _shipped()
    training = config["training"]
    card = (weights / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert training["earlier_runs"] == [] and training["init_from"] is None
    assert len(Lineage.of(training).earlier) == 1  # what a run continuing it would keep
    assert "from scratch, in one run" in " ".join(card.split())
    assert training["cumulative_tokens_seen"] == training["tokens_seen"]


def test_the_languages_validation_is_said_to_check_are_those_it_has_grammars_for():
    from dlm_lsp.validation import LANGUAGES

    listed = re.search(r"parsed in place with tree-sitter \(([^;]*);",
                       " ".join(readme_section("How it works").split())).group(1)
    names = {"c++": "cpp", "c#": "csharp"}
    assert {names.get(name.lower(), name.lower()) for name in listed.split(", ")} == set(
        LANGUAGES)


def _gpu_recipe():
    from dlm_lsp.training import gpu_run

    return gpu_run.full_config(Path("out"))


def _parameters(cfg) -> int:
    """The parameter count of a training recipe's model shape."""
    from dlm_lsp.models.tiny import TinyConfig, TinyDenoiser

    return TinyDenoiser(TinyConfig(vocab_size=cfg.vocab_size, d_model=cfg.d_model,
                                   n_layers=cfg.n_layers, n_heads=cfg.n_heads,
                                   max_length=cfg.max_length)).num_parameters()


def _module(name: str):
    import importlib

    return importlib.import_module(f"dlm_lsp.{name}")


# (section, the phrase that states a value, with the value as its group, the value in the
# code): defaults and limits a user reads in the README and relies on
STATED = [
    ("Denoising controls", r"else (\d+) steps for a single-line fill",
     lambda: DEFAULT_STEPS["single-line"]),
    ("Denoising controls", r"steps for a single-line fill and (\d+) for the others",
     lambda: DEFAULT_STEPS["multi-line"] if DEFAULT_STEPS["multi-line"] == DEFAULT_STEPS[
         "rewrite"] else "not one number"),
    ("How it works", r"is a \*single-line\* fill \((\d+) tokens",
     lambda: ServerConfig().single_line_tokens),
    ("How it works", r"is a \*multi-line\* fill \((\d+) tokens\)",
     lambda: ServerConfig().multi_line_tokens),
    ("How it works", r"the ([\d,]+) lines either side", lambda: _module("policy").LOCAL_LINES),
    ("How it works", r"lines either side, within ([\d,]+) characters",
     lambda: _module("policy").LOCAL_CHARS),
    ("How it works", r"at most its last (\d+) characters",
     lambda: _module("span").HEAD_MAX_CHARS),
    ("How it works", r"\(`batchRows`, default (\d+);", lambda: ServerConfig().batch_rows),
    ("How it works", r"With `batchPadding` \((on|off) by default\)",
     lambda: "on" if ServerConfig().batch_padding else "off"),
    ("How it works", r"plus (\d+) tokens either side, and denoises",
     lambda: _module("repair").RepairConfig().margin),
    ("How it works", r"`fallbackMaxTokens`, (\d+)\)",
     lambda: _module("repair").RepairConfig().fallback_max_tokens),
    ("How it works", r"documents over (\d+)k characters",
     lambda: _module("validation").WINDOW_ABOVE // 1000),
    ("How it works", r"past ([\d,]+) characters, those of the function",
     lambda: _module("bash_syntax").CHUNK_CHARS),
    ("Supported models", r"\(`candidates: (\d+)`, the default\)",
     lambda: ServerConfig().candidates),
    ("Supported models", r"its default full pass every (\d+) steps",
     lambda: ServerConfig().cache_refresh),
    ("Training", r"trains a tiny model in seconds on a CPU \((\d+) steps, or \d+ s",
     lambda: _module("training.train").tiny_preset().max_steps),
    ("Training", r"trains a tiny model in seconds on a CPU \(\d+ steps, or (\d+) s",
     lambda: round(_module("training.train").tiny_preset().seconds)),
    ("Training", r"on (\d+) thread unless `--threads N` says otherwise",
     lambda: _module("training.train").tiny_preset().threads),
    ("Training", r"trains a (\d+)M-parameter model",
     lambda: round(_parameters(_gpu_recipe()) / 1e6)),
    ("Training", r"\(d (\d+), \d+ layers\) in bf16", lambda: _gpu_recipe().d_model),
    ("Training", r"\(d \d+, (\d+) layers\) in bf16", lambda: _gpu_recipe().n_layers),
    ("Training", r"writes int8 shards under (\d+) MiB each",
     lambda: _module("training.gpu_run").SHARD_BYTES // 2**20),
    ("Training", r"and writes (\w+) shards", lambda: _gpu_recipe().weights),
]


@pytest.mark.parametrize(("title", "phrase", "value"), STATED,
                         ids=[phrase for _, phrase, _ in STATED])
def test_a_default_the_readme_states_is_the_code_s(title, phrase, value):
    """How many tokens a fill masks, how far the syntax hints read, what a batch holds:
    a user sizes requests and settings by these numbers, and each has moved in the code
    before (a span's length, a window's limit)."""
    found = re.search(phrase, " ".join(readme_section(title).split()))
    assert found, f"README {title} no longer says {phrase!r}"
    assert found.group(1).replace(",", "") == str(value())


def test_the_paths_how_it_works_names_are_those_a_fill_can_report():
    """`stats.path` was said to be `diffusion`, `repair` or `left-to-right`; the rest of a
    suggestion the user typed along is answered with `reused`, which a client reading
    only the documented values did not expect."""
    from dlm_lsp import repair

    text = " ".join(readme_section("How it works").split())
    listed = re.search(r"`stats\.path` says which path \((.*?)\) produced", text).group(1)
    named = set(re.findall(r"`([a-z-]+)`", listed))
    assert named == {repair.DIFFUSION, repair.REPAIR, repair.LEFT_TO_RIGHT, repair.REUSED,
                     repair.BINDING, repair.RETURN, repair.HEADER, repair.TALLY, repair.VALUE}


def _class_members() -> dict[str, set[str]]:
    """Every class of the package, by name, with the names its body defines (methods,
    class attributes and fields, and what its methods assign to `self`)."""
    import ast

    members: dict[str, set[str]] = {}
    for source in (ROOT / "dlm_lsp").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names = members.setdefault(node.name, set())
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        names.add(inner.name)
                    elif isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                        names.add(inner.id)
                    elif (isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Store)
                          and isinstance(inner.value, ast.Name) and inner.value.id == "self"):
                        names.add(inner.attr)
    return members


def test_every_class_member_the_documents_name_is_one_the_class_has():
    """`InfillRun.beyond_reach`, `Tokenizer.decode`: the README points a reader at the code
    that does what it describes; a method renamed is a pointer to nothing."""
    members = _class_members()
    named = [(doc, line, span) for doc in DOCS for line, span in code_spans(doc)
             if re.fullmatch(r"[A-Z]\w*\.\w+", span) and span.split(".")[0] in members]
    assert named
    assert [f"{doc.relative_to(ROOT)}:{line}: {span}" for doc, line, span in named
            if span.split(".")[1] not in members[span.split(".")[0]]] == []


# (what How it works says of a cursor, an example of it: `|` the cursor, the kind it says,
# the languages it holds for; None: the text alone, with no grammar)
POLICY_EXAMPLES = [
    ("a cursor with code after it on the line is a *single-line* fill", "x = foo(|)\n",
     "single-line", ("python", None)),
    ("a cursor on an empty line or a hole alone on its line is a *multi-line* fill",
     "a = 1\n|\nb = 2\n", "multi-line", ("python", None)),
    ("a cursor at column 0 before code has code after it, so it is single-line too",
     "import os\n\n|print(x)\n", "single-line", ("python", None)),
    ("the end of a `def f():` or `{` line opens a multi-line body", "def f():|\n",
     "multi-line", ("python",)),
    ("the end of a `def f():` or `{` line opens a multi-line body", "int f() {|\n}\n",
     "multi-line", ("c",)),
    ("a Ruby, Lua or shell line that opens a keyword block (`def g`,", "def g|\nend\n",
     "multi-line", ("ruby",)),
    ("`function g()`,", "function g()|\nend\n", "multi-line", ("lua",)),
    ("`if x; then`;", "if x; then|\nfi\n", "multi-line", ("bash",)),
    ("not inside a bracket it leaves open, `def g(a,`", "def g(a,|\nend\n", "single-line",
     ("ruby",)),
    ("unless the header follows that bracket, a callback's `set('n', 'x', function()`",
     "vim.keymap.set('n', 'x', function()|\nend)\n", "multi-line", ("lua",)),
]


@pytest.mark.parametrize(("says", "marked", "kind", "languages"), POLICY_EXAMPLES,
                         ids=[f"{kind}: {marked}" for _, marked, kind, _ in POLICY_EXAMPLES])
def test_the_length_policy_is_as_how_it_works_describes_it(says, marked, kind, languages):
    """How it works said that a cursor at column 0 before code inserts whole lines (a
    multi-line fill), which the policy stopped doing on 2026-11-30 (8d70c58): such a
    cursor has code after it on its line, and is a single-line fill.  Each rule and
    example the section gives is checked here against the policy."""
    from dlm_lsp.config import InfillOptions
    from dlm_lsp.models.tokenizer import Tokenizer
    from dlm_lsp.policy import plan_span

    assert says in " ".join(readme_section("How it works").split())
    text, at = marked.replace("|", ""), marked.index("|")
    tokenizer = Tokenizer.from_file(ROOT / "dlm_lsp" / "weights" / "default" / "tokenizer.json")
    for language in languages:
        plan = plan_span(text, at, at, ServerConfig(), InfillOptions(), tokenizer,
                         language=language)
        assert plan.kind == kind, language
