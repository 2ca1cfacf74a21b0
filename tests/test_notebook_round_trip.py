"""The oracle round trip in notebook cells: code a cell had, written back, comes back.

A fill in a notebook cell is shown the notebook's other code cells, while its plan, its
shape and its check are the cell's (dlm_lsp/notebooks.py), and a cell is a few lines
with little indentation of its own.  Python files made notebooks (their top-level
statements split into cells, a markdown cell between some; benchmarks/notebook_round_trip.py)
are asked every request of the round trips in every code cell, with the other cells as
the server shows them, and a model that writes exactly the code the cell had gets the
cell back as it was.  The files: fixtures/notebook/analysis.py, a notebook in two spaces
(percent format: `# %%` opens a cell) with a cell that holds a dict's four-space lines
above a function and a cell that is a function alone, no indentation of its own but
its body's, and
fixtures/round_trip/inventory.py as written and re-indented by two.  In the two-space
notebooks the model also writes the code nested by four spaces, as a model that read
mostly PEP 8 code does, and gets the notebook's two back.  Every eighth fill is the
planted model's through the engine, checked to be the script's.
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
notebooks = script("notebook_round_trip")
NOTEBOOKS = {"analysis": (FIXTURES / "notebook" / "analysis.py", False),
             "inventory": (FIXTURES / "round_trip" / "inventory.py", False),
             "inventory in two spaces": (FIXTURES / "round_trip" / "inventory.py", True)}
# the notebooks, each with how the model writes there (notebook_round_trip.VARIANTS): the
# cell's code, and in the two-space ones that code nested by four spaces
ASKED = [(name, notebooks.CELLS) for name in NOTEBOOKS] + [
    ("analysis", notebooks.FOURS), ("inventory in two spaces", notebooks.FOURS)]


@pytest.fixture(scope="module")
def engine(model_dir: Path) -> Engine:
    """An engine whose spans hold the longest fill here whole (maxSpanTokens past 128)."""
    return Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                               max_span_tokens=512))


def percent_cells(text: str) -> list[tuple[str, str]]:
    """A notebook in the percent format (`# %%` opens a cell, `# %% [markdown]` a markdown
    one, its lines comments), as (kind, text) cells."""
    cells = []
    for chunk in text.split("# %%")[1:]:
        marker, _, body = chunk.partition("\n")
        if "[markdown]" in marker:
            cells.append(("markdown", "\n".join(line.lstrip("# ") for line in
                                                 body.strip().split("\n"))))
        else:
            cells.append(("code", body.strip("\n")))
    return cells


def notebook(name: str):
    """The fixture as a notebook: a percent-format one's cells, or a file's statements
    split by a generator seeded with its name."""
    path, two_spaces = NOTEBOOKS[name]
    text = path.read_text(encoding="utf-8")
    if text.startswith("# %%"):  # a notebook in two spaces
        return notebooks.Notebook.open(str(path), percent_cells(text), "two spaces")
    if two_spaces:
        text = notebooks.two_spaces(text)
    return notebooks.Notebook.open(str(path), notebooks.split_cells(text, random.Random(name)),
                                   "two spaces" if two_spaces else "as written")


def test_re_indenting_by_two_changes_no_code_and_leaves_strings_be() -> None:
    source = 'def f(x):\n    """A\n    docstring."""\n    if x:\n        return [\n            1]\n'
    assert notebooks.two_spaces(source) == (
        'def f(x):\n  """A\n    docstring."""\n  if x:\n    return [\n        1]\n')


def test_a_file_s_cells_are_its_statements_in_order() -> None:
    path = FIXTURES / "round_trip" / "inventory.py"
    source = path.read_text(encoding="utf-8")
    cells = notebooks.split_cells(source, random.Random(0))
    code = [text for kind, text in cells if kind == "code"]
    lines = [line for line in "\n".join(code).split("\n") if line.strip()]
    assert lines == [line for line in source.split("\n") if line.strip()]
    assert len(code) > 3 and not any(text != text.strip("\n") for text in code)


def test_a_model_nesting_by_four_writes_a_two_space_notebook_s_body_by_four() -> None:
    """What the model writes in the two-space notebooks: each line below the first four
    spaces a level past it, a continuation moved with its statement."""
    document = "def f(xs):\n  "
    fill = "for x in xs:\n    total(x,\n          1)\n  return 0"
    assert shaping.in_fours(fill, document, len(document), "  ") == (
        "for x in xs:\n      total(x,\n            1)\n  return 0")


@pytest.mark.parametrize(("name", "writes"), ASKED)
def test_code_a_cell_had_written_back_comes_back_unchanged_whatever_the_request(
        engine: Engine, name: str, writes: str) -> None:
    built = notebook(name)
    tokenizer = engine.model.tokenizer
    wrong, asked_for = [], set()
    index = 0
    for cell in built.code_cells():
        for kind, sites in notebooks.cell_sites(built, cell).items():
            for site in sites:
                if site.span.exception is not None:
                    continue
                found = notebooks.CellSite(built, cell, kind, site)
                asked = notebooks.ask(found, writes)
                # room for the whole fill and the prefix's edge the span takes in
                request = notebooks.request(found, asked, len(tokenizer.encode(asked.fill)) + 16)
                assert request.before or request.after  # the other cells are shown
                fill = shaping.offered(request, asked.fill)
                if index % 8 == 0:
                    Planted(engine, request, broken=asked.fill)
                    assert engine.infill(request).candidates[0].text == fill, (kind, asked.fill)
                index += 1
                asked_for.add(kind)
                outcome = notebooks.outcome(found, fill, asked)
                if not outcome.identical:
                    wrong.append(f"cell {cell}, {kind}:\n{shaping.diff(outcome)}")
    assert asked_for == set(notebooks.KINDS)
    assert not wrong, f"{len(wrong)} fills changed:\n\n" + "\n\n".join(wrong[:4])


@pytest.mark.parametrize(("argv", "says"), [
    (["{tmp}/nowhere"], "no such file or directory: {tmp}/nowhere"),
    (["{tmp}", "--per-kind", "0"], "--per-kind 0: a whole number of sites, 1 or more"),
])
def test_a_run_with_nothing_to_sample_is_refused_not_a_table_of_zeros(argv, says, tmp_path,
                                                                     capsys):
    """A missing root, or --per-kind 0, printed a table of zeros and exited 0."""
    with pytest.raises(SystemExit) as refused:
        notebooks.main([part.format(tmp=tmp_path) for part in argv])
    assert refused.value.code == 2
    assert capsys.readouterr().err.rstrip().endswith(says.format(tmp=tmp_path))
