"""Specification of dlm_lsp.pinned: `dlm-lsp --model M` serves M to every client."""

from __future__ import annotations

from pathlib import Path

from dlm_lsp.config import ServerConfig
from dlm_lsp.pinned import pinned, pins
from dlm_lsp.server import build_server
from dlm_lsp.shared import EnginePool


def test_a_pinned_model_is_every_clients_whatever_its_settings_say() -> None:
    ls = build_server(pins={"model": "/models/dream-coder"})
    assert ls.config.model == "/models/dream-coder"  # before any settings came
    problems, _ = ls.apply_settings({"dlm": {"model": "/home/me/other", "steps": 6}},
                                    initial=True)
    assert (ls.config.model, ls.config.steps) == ("/models/dream-coder", 6)
    assert problems == ["this server was started with --model /models/dream-coder, which "
                        "every client gets: the setting model \"/home/me/other\" is not used"]


def test_a_client_is_told_once_and_not_at_all_for_a_setting_it_left_at_its_default() -> None:
    """VS Code sends its whole section, `model: "default"` included, at every change: a
    default is no choice of the user's, and a choice is told once, as wrong values are."""
    ls = build_server(pins={"model": "/models/dream-coder", "precision": "fp32"})
    assert ls.apply_settings({"dlm": {"model": "default", "precision": "auto"}},
                             initial=True)[0] == []
    assert len(ls.apply_settings({"dlm": {"model": "/mine"}})[0]) == 1
    assert ls.apply_settings({"dlm": {"model": "/mine", "steps": 3}})[0] == []
    assert ls.config.model == "/models/dream-coder"


def test_a_value_that_loads_what_the_pin_loads_is_no_conflict() -> None:
    """A client's "cpu" beside the command line's "cpu" asked for what it gets: nothing is
    said.  Its "cuda" is a choice set aside, and is told."""
    base = ServerConfig(device="cpu")
    same, notes = pinned(ServerConfig(device="cpu"), {"device": "cpu"})
    assert same == base and notes == []
    _, notes = pinned(ServerConfig(device="cuda"), {"device": "cpu"})
    assert notes and "--device cpu" in notes[0] and '"cuda"' in notes[0]


def test_a_client_on_a_remote_service_is_told_nothing_of_the_servers_model() -> None:
    """Its fills run on the service's own model: "--model M, which every client gets"
    was not so for it."""
    asked = ServerConfig(backend="remote", remote_url="http://gpu-box:8000", model="/mine")
    fixed, notes = pinned(asked, {"model": "/srv/m"})
    assert notes == [] and fixed.model == "/srv/m" and fixed.backend == "remote"


def test_the_command_lines_values_are_checked_as_settings_are_and_named_by_their_flags():
    given, problems = pins({"model": "", "device": None, "precision": "fp32"})
    assert given == {"precision": "fp32"}
    assert problems == ['--model "" should be a model name or directory']
    assert pins({"model": None, "device": None, "precision": None}) == ({}, [])


def test_over_tcp_each_connection_gets_the_pins_and_the_shared_engine_loads_them(
        model_dir: Path) -> None:
    """The first client to connect no longer chooses the team's model."""
    pool = EnginePool()
    first = build_server(pool.join, pins={"model": str(model_dir)})
    first.apply_settings({"dlm": {"model": "default", "device": "cpu"}}, initial=True)
    assert pool.engine is not None and pool.engine.config.model == str(model_dir)
    second = build_server(pool.join, pins={"model": str(model_dir)})
    problems, _ = second.apply_settings({"dlm": {"model": "/elsewhere", "device": "cpu"}},
                                        initial=True)
    assert second.config.model == str(model_dir)
    assert [p for p in problems if "shared with" in p] == []  # nothing to keep apart
    assert len(problems) == 1 and "--model" in problems[0]
