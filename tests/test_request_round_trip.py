"""The oracle round trip of the other requests: code a file had, written back, comes back.

tests/test_round_trip.py holds multi-line fills at a blank line to it.  Here the other
requests an editor makes (benchmarks/request_round_trip.py): a cursor after code on a
line (the rest of the line the fill), in the middle of a line, a hole there, the end of a
line that opens a block (its body the fill), selections rewritten (whole lines, with
their last line break, from their code, starting or ending inside a line, grown by
`expand`), a completion item and ghost text (alone, and extending a selected item).  For
each, a model that writes exactly the code the file had there gets, once the server's
edit is applied, the file as it was.  Sites are sampled from fixtures/round_trip/ and
fixtures/hello.* (their hole's line left out), a few a kind a file; every fourth one's
fill is the planted model's through the engine, checked to be the script's.  In the
files that nest by two spaces or by tabs (Lua's and Ruby's keyword blocks too), a model
that writes four spaces a level (`shaping_round_trip.in_fours`) gets the file's unit back at every
request whose fill is lines and shows its step (`request_round_trip.FOURS_KINDS`).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from benchmark_scripts import script
from fakes import Planted

from dlm_lsp.config import ServerConfig
from dlm_lsp.engine import Engine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
shaping = script("shaping_round_trip")
requests = script("request_round_trip")
FILES = sorted((FIXTURES / "round_trip").iterdir()) + sorted(FIXTURES.glob("hello.*"))
PER_FILE = 4  # sites a kind a file


def without_holes(path: Path) -> str:
    """The file's text, without the lines that hold a hole marker."""
    lines = path.read_text(encoding="utf-8").split("\n")
    return "\n".join(line for line in lines if shaping.HOLE not in line)


@pytest.fixture(scope="module")
def engine(model_dir: Path) -> Engine:
    """An engine whose spans hold the longest fill here whole (maxSpanTokens past 128)."""
    return Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                               max_span_tokens=512))


def chosen(path: Path, kinds: tuple[str, ...] = requests.KINDS) -> list[tuple[str, object]]:
    """(kind, site) of a file: PER_FILE sites of each kind, seeded by the file's name."""
    found = parsed(path)
    rng = random.Random(path.name)
    picked = []
    for kind in kinds:
        options = found.found.get(requests._SITES.get(kind, kind), [])
        for start, end in rng.sample(options, min(PER_FILE, len(options))):
            site = found.site(kind, start, end)
            if site is not None and site.span.exception is None:
                picked.append((kind, site))
    return picked


def parsed(path: Path):
    found = requests.sites(path, shaping.language_of(path), without_holes(path))
    assert found is not None, f"{path.name} does not parse cleanly"
    return found


# the files that nest by two spaces or by tabs (GNU style passed over, as the script does)
NOT_IN_FOURS = [path for path in FILES if requests.not_in_fours(parsed(path))]


def test_every_kind_has_sites_in_every_language() -> None:
    kinds = {kind for path in FILES for kind, _ in chosen(path)}
    assert kinds == set(requests.KINDS)


def _written_back(engine: Engine, site, kind: str, asked, index: int) -> str | None:
    """How the file differs once the server's edit of `asked.fill` at `site` is applied
    (None: not at all); every fourth fill also through the engine, the planted model's."""
    # room for the whole fill and the prefix's edge the span takes in
    length = len(engine.model.tokenizer.encode(asked.fill)) + 16
    request = shaping.request(site.span, asked, length)
    fill = shaping.offered(request, asked.fill)
    if index % 4 == 0:
        Planted(engine, request, broken=asked.fill)
        assert engine.infill(request).candidates[0].text == fill, (kind, asked.fill)
    outcome = shaping.Outcome(site.span, asked, requests.applied(asked, site, fill))
    return None if outcome.identical else f"line {site.span.line}, {kind}:\n{shaping.diff(outcome)}"


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.name)
def test_code_a_file_had_written_back_comes_back_unchanged_whatever_the_request(
        engine: Engine, path: Path) -> None:
    wrong = [why for index, (kind, site) in enumerate(chosen(path))
             if (why := _written_back(engine, site, kind, requests.ask(site, kind), index))]
    assert not wrong, f"{len(wrong)} fills changed:\n\n" + "\n\n".join(wrong[:4])


def test_files_of_two_spaces_and_of_tabs_are_asked_with_the_model_in_fours() -> None:
    assert {path.name for path in NOT_IN_FOURS} >= {"cache.js", "store.ts", "Ledger.java",
                                                     "server.go", "queue.c", "Panel.tsx",
                                                     "events.lua", "shop.rb"}


@pytest.mark.parametrize("path", NOT_IN_FOURS, ids=lambda path: path.name)
def test_code_a_model_nesting_by_four_writes_comes_back_on_the_file_s_unit(
        engine: Engine, path: Path) -> None:
    """Where the fill shows the step it nests by (`request_round_trip.shows_its_step`),
    its levels, its comments and its backslash continuations go on the file's unit
    (`assert checked`: the files' sites hold such fills)."""
    language = shaping.language_of(path)
    wrong, checked = [], 0
    for index, (kind, site) in enumerate(chosen(path, requests.FOURS_KINDS)):
        asked = requests.written_in_fours(requests.ask(site, kind), language)
        if not requests.shows_its_step(asked, language):
            continue
        checked += 1
        if why := _written_back(engine, site, kind, asked, index):
            wrong.append(why)
    assert checked >= 4
    assert not wrong, f"{len(wrong)} fills changed:\n\n" + "\n\n".join(wrong[:4])
