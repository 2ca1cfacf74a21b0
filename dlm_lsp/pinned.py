"""The model settings a server's command line fixes for every client.

`dlm-lsp --tcp 0.0.0.0:2087 --model DIR` serves DIR to every editor that connects,
whatever its own settings say.  Without it, the engine a TCP server shares (shared.py)
loaded the model of whichever client came first: a team's GPU box served the embedded
model where the first editor to connect had set nothing (VS Code sends its whole
section, `model: "default"` included), and the colleague whose settings named the 7B
checkpoint was told the engine keeps its settings.  Whoever starts the server knows
what that machine is for; it decides, over stdio as over TCP.

A client's own choice that is not applied is told (once, as other setting problems
are).  A setting left at its default is no choice, and is told nothing: every VS Code
client would otherwise have been told its `model: "default"` is not used.  Nor is a
value that asks for what the server's loads anyway (`device: "cpu"` where its `auto`
is the CPU, `loads_apart`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dlm_lsp.backends import LOCAL
from dlm_lsp.config import ServerConfig, camel, from_json, json_text
from dlm_lsp.engine import loads_apart

# the settings a server's command line can fix (`dlm-lsp --model M --device D
# --precision P`), as ServerConfig names them
PINNABLE = ("model", "device", "precision")
DEFAULTS = ServerConfig()


def pins(settings: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The pins of the command line's `settings` (ServerConfig names; None: not given),
    each checked as a client's setting is, and the problems with them, named by their
    flags (for a usage error: a server that cannot load what it was told to should not
    start)."""
    given, problems = {}, []
    for name, value in settings.items():
        if value is None:
            continue
        config, said = from_json(ServerConfig, {camel(name): value}, strict=True)
        if not said:
            given[name] = getattr(config, name)
        problems += [problem.replace(f"setting '{camel(name)}' =", f"--{name}")
                     for problem in said]
    return given, problems


def pinned(config: ServerConfig, pins: dict[str, Any]) -> tuple[ServerConfig, list[str]]:
    """`config` with `pins` in place of the client's own values, and a note for each
    choice of the client's that this sets aside (see the module's docstring)."""
    if not pins:
        return config, []
    fixed = replace(config, **pins)
    if config.backend != LOCAL:  # its fills run on the service's own model: nothing set aside
        return fixed, []
    apart = loads_apart(fixed, config)
    notes = [f"this server was started with --{name} {value}, which every client gets: "
             f"the setting {camel(name)} {json_text(getattr(config, name))} is not used"
             for name, value in pins.items()
             if name in apart and getattr(config, name) != getattr(DEFAULTS, name)]
    return fixed, notes
