"""Keep the extension's server settings in package.json in step with the server.

The server's settings are defined once, in `dlm_lsp.config.ServerConfig`.  The
extension contributes one VS Code setting per field (`dlm.<camelCase name>`) so
the Settings UI can show and check them; this script writes that section of
package.json from the dataclass (type, default, allowed values, bounds) and takes
each description from the README's Configuration table, falling back to the comment
beside the field.  A denoising control the server leaves unset (None: "the sampler's
own default") shows the value a fill then uses, as the README does, and a switch is
a plain boolean: VS Code's Settings UI shows a checkbox for `boolean` but only "Edit
in settings.json" for `["boolean", "null"]`.  `--check` changes nothing and exits 1
when package.json has drifted (a field added, renamed, retyped, given a new default,
bounds or description), which is what tests/test_vscode.py runs.

    .venv/bin/python editors/vscode/scripts/sync_settings.py          # rewrite package.json
    .venv/bin/python editors/vscode/scripts/sync_settings.py --check  # exit 1 on drift

from the repository's root, with the Python the server is installed in (the README's
Quick start puts it in .venv): the script imports the server, torch included.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import re
import sys
import types
from pathlib import Path
from typing import Any, get_type_hints

RUN = ".venv/bin/python editors/vscode/scripts/sync_settings.py"

try:
    from dlm_lsp import config as server_config
    from dlm_lsp.engine import sampler_config
    from dlm_lsp.passes import REPAIR_SETTINGS, repair_config
except ModuleNotFoundError as missing:  # a python3 without the server: say which Python
    sys.exit(f"sync_settings.py reads the server's settings from dlm_lsp, and {missing.name} "
             f"is not installed for {sys.executable}: run it with the Python dlm-lsp is "
             f"installed in, from the repository's root: {RUN}")

EXTENSION = Path(__file__).resolve().parent.parent
PACKAGE_JSON = EXTENSION / "package.json"
README = EXTENSION.parent.parent / "README.md"
SECTION_ID = "dlm.server"  # the `id` of the generated configuration section



def allowed_values(field: str) -> tuple[str | bool, ...] | None:
    """The closed set a field's value must come from: the tuple the server checks it
    against, named after the field by config.py's convention (strategy -> STRATEGIES,
    refine_order -> REFINE_ORDERS, context_cache -> CONTEXT_CACHES: true, false or
    "auto")."""
    name = field.upper()
    for constant in (name + "S", name[:-1] + "IES" if name.endswith("Y") else None):
        values = getattr(server_config, constant, None) if constant else None
        if isinstance(values, tuple) and all(isinstance(v, (str, bool)) for v in values):
            return values
    return None

# What a setting means for the extension, beyond what it means for the server.
IN_THE_EDITOR = {
    "drafts": "VS Code shows each draft as a faded live preview at the span while it denoises.",
    "holeMarker": ("**Fill selection** with nothing selected fills a marker on the cursor's line "
                   "(the one under or nearest the cursor) rather than inserting at the cursor."),
}
# Where the server sends documents and its token, and whose certificates it trusts: VS
# Code's "machine" scope keeps them out of a workspace's .vscode/settings.json, as the
# client's own server.path, server.address and the like, so that a cloned repository
# cannot send them to a listener of its own (the user's settings alone set them).
MACHINE = ("remoteUrl", "remoteToken", "remoteCaFile")
JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string",
              type(None): "null"}


def json_type(hint: Any) -> str | list[str]:
    """The JSON schema type of a field's annotation (`int | None` -> ["integer", "null"])."""
    args = hint.__args__ if isinstance(hint, types.UnionType) else (hint,)
    names = [JSON_TYPES[a] for a in args]
    return names[0] if len(names) == 1 else names


def effective_defaults() -> dict[str, Any]:
    """snake_case field -> the value a fill uses when the setting is left out: the
    server's default, or for a control it leaves unset, the sampler's or repair's own."""
    config, options = server_config.ServerConfig(), server_config.InfillOptions()
    sampler = sampler_config(config, options, 1, config.strategy)
    repair = repair_config(config, options)
    found = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    for f in dataclasses.fields(server_config.SamplingControls):
        if found[f.name] is None and hasattr(sampler, f.name):
            found[f.name] = getattr(sampler, f.name)
    for name, key in REPAIR_SETTINGS:
        if found[key] is None:
            found[key] = getattr(repair, name)
    return found


# The largest integer a JavaScript number holds exactly: VS Code reads a setting as one,
# and `seed`'s 2**63 - 1 became 2**63, which passed the schema (rounded the same way)
# and the server refused ("previous value kept").
SAFE_INTEGER = 2 ** 53 - 1


def bounds(field: str) -> dict[str, Any]:
    """A number setting's bounds as JSON schema keywords (VS Code checks them as typed),
    those of an integer within what VS Code can send exactly (`SAFE_INTEGER`)."""
    span = server_config.value_range(field)
    if span is None:
        return {}
    found: dict[str, Any] = {}
    if span.low is not None:
        found["exclusiveMinimum" if span.above else "minimum"] = (
            max(span.low, -SAFE_INTEGER) if isinstance(span.low, int) else span.low)
    if span.high is not None:
        found["maximum"] = (min(span.high, SAFE_INTEGER) if isinstance(span.high, int)
                            else span.high)
    return found


def readme_descriptions() -> dict[str, str]:
    """camelCase name -> meaning, from the rows of README's Configuration table (in its order)."""
    if not README.exists():
        return {}
    text = README.read_text(encoding="utf-8")
    table = text.split("## Configuration", 1)[-1].split("\n## ", 1)[0]
    found: dict[str, str] = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        for name in re.findall(r"`(\w+)`", cells[0]):
            found[name] = cells[-1]
    return found


def source_comments() -> dict[str, str]:
    """snake_case field -> the comment beside it in dlm_lsp/config.py (or on the lines above)."""
    found: dict[str, str] = {}
    above: list[str] = []
    for line in inspect.getsource(server_config).splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("# "))
            continue
        field = re.match(r"(\w+): [^=]+=[^#]*(?:#(.*))?$", stripped)
        if field and (field[2] or above):
            found.setdefault(field[1], (field[2] or " ".join(above)).strip())
        if not field or field[2]:  # a comment block describes the fields right below it
            above = []
    return found


def settings_section() -> dict[str, Any]:
    """The package.json configuration section mirroring ServerConfig."""
    hints = get_type_hints(server_config.ServerConfig)
    described, comments = readme_descriptions(), source_comments()
    # The Settings UI lists them in the README's order; fields it does not list come last.
    rank = {name: i for i, name in enumerate(described)}
    fields = sorted(dataclasses.fields(server_config.ServerConfig),
                    key=lambda f: rank.get(server_config.camel(f.name), len(rank)))
    defaults = effective_defaults()
    properties: dict[str, Any] = {}
    for order, field in enumerate(fields):
        name = server_config.camel(field.name)
        kind, default = json_type(hints[field.name]), defaults[field.name]
        if kind == ["boolean", "null"] and default is not None:
            kind = "boolean"  # a checkbox; null (the default) is never needed from VS Code
        prop: dict[str, Any] = {"type": kind, "default": default, **bounds(field.name)}
        if (values := allowed_values(field.name)) is not None:
            prop["enum"] = list(values)
        if field.name in server_config.PATTERNS:  # anchored: JSON schema's is a search
            prop["pattern"] = f"^(?:{server_config.PATTERNS[field.name]})$"
            prop["patternErrorMessage"] = "should be " + server_config.accepted(field.name, str)
        meaning = described.get(name) or comments.get(field.name) or "see the dlm-lsp README"
        extra = f" {IN_THE_EDITOR[name]}" if name in IN_THE_EDITOR else ""
        prop["markdownDescription"] = f"{meaning}\n\nServer setting `{name}`.{extra}"
        prop["order"] = order
        if name in MACHINE:
            prop["scope"] = "machine"
        properties[f"dlm.{name}"] = prop
    return {"id": SECTION_ID, "title": "dlm-lsp server", "order": 2, "properties": properties}


def schema_only(section: dict[str, Any]) -> dict[str, Any]:
    """What must match the server and the README: names, types, defaults, allowed values,
    bounds, descriptions and their order (a stale description misleads as a stale default
    does: the Settings UI is where VS Code users read them)."""
    return dict(section.get("properties", {}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if package.json drifted")
    args = parser.parse_args()
    package = json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))
    sections = package["contributes"]["configuration"]
    index = next(i for i, s in enumerate(sections) if s.get("id") == SECTION_ID)
    wanted = settings_section()
    if args.check:
        have, want = schema_only(sections[index]), schema_only(wanted)
        if have == want:
            return 0
        for key in sorted(set(have) | set(want)):
            if have.get(key) != want.get(key):
                print(f"{key}: package.json {have.get(key)} != server {want.get(key)}",
                      file=sys.stderr)
        print(f"run: {RUN}", file=sys.stderr)
        return 1
    sections[index] = wanted
    PACKAGE_JSON.write_text(json.dumps(package, indent=2, ensure_ascii=False) + "\n",
                            encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
