"""The training's fill probe: the fills of fixed tasks, scored at each evaluation of a run
(`dlm_lsp.training.fill_probe`), the curve of fill quality against training tokens."""

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from dlm_lsp.bench.filling import FillSettings, bench_engine, fill_task  # noqa: E402
from dlm_lsp.bench.humaneval import Task, load_tasks  # noqa: E402
from dlm_lsp.bench.lines import line_tasks  # noqa: E402
from dlm_lsp.models import load_model  # noqa: E402
from dlm_lsp.training.data import SourceFile  # noqa: E402
from dlm_lsp.training.fill_probe import (  # noqa: E402
    FillProbe,
    ProbeConfig,
    probe_summary,
    probe_tasks,
    score,
)

SOURCE = ("import os\n\n\n"
          "def area(width, height):\n"
          '    """Prose, not a task."""\n'
          "    result = width * height\n"
          "    return result\n\n\n"
          "def main():\n"
          "    print(area(2, 3), os.sep)\n")


@pytest.fixture(scope="module")
def shipped():
    return load_model("default", "cpu")


def test_the_probe_fills_each_task_as_the_engine_does_without_tree_sitter(shipped):
    """The probe runs where the engine cannot (no tree-sitter on the GPU machine), so it
    must fill as the engine does with what it leaves out turned off: validation (the
    early stop's syntax test) and repair; and as it fills on that machine's GPU, without
    the context cache (`contextCache: "auto"` keeps one on a CPU only).  One task a
    pass: padded rows may round apart."""
    cfg = ProbeConfig(lines=3, humaneval=5, rows=1)
    tasks = probe_tasks(cfg, [SourceFile("m.py", SOURCE)])
    probe = FillProbe(cfg, tasks, shipped.tokenizer, shipped.max_length)
    fills = probe.fills(shipped.module, torch.device("cpu"))
    engine = bench_engine("default", "cpu", validate=False, context_cache=False)
    for name in ("lines", "humaneval"):
        by_engine = [fill_task(engine, task, FillSettings(repair=False)).text
                     for task in tasks[name]]
        assert [f.strip() for f in fills[name]] == [f.strip() for f in by_engine]


def test_the_probe_leaves_the_model_training_with_its_weights_and_no_gradients(shipped):
    module = shipped.module
    before = {k: v.clone() for k, v in module.state_dict().items()}
    module.train()
    cfg = ProbeConfig(humaneval=2)
    FillProbe(cfg, probe_tasks(cfg, []), shipped.tokenizer, shipped.max_length)(
        module, torch.device("cpu"))
    try:
        assert module.training
        assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())
        assert all(p.grad is None for p in module.parameters())
    finally:
        module.eval()


def test_the_probe_s_tasks_are_the_benchmarks_own():
    """Its lines are `bench heldout`'s rule over the run's held-out files; its HumanEval
    tasks are the sample `bench humaneval --limit N` fills, so the last point of a curve
    can be checked against the benchmark."""
    files = [SourceFile("m.py", SOURCE), SourceFile("n.py", SOURCE.replace("area", "size"))]
    tasks = probe_tasks(ProbeConfig(lines=3, humaneval=7), files)
    assert tasks["lines"] == line_tasks([(f.path, f.text) for f in files], 3)
    assert [t.task_id for t in tasks["humaneval"]] == [
        t.task_id for t in load_tasks("single-line", 7)]
    assert "humaneval" not in probe_tasks(ProbeConfig(lines=3), files)
    assert probe_tasks(ProbeConfig(lines=3), []) == {}  # no held-out file: no set at all


def test_score_counts_exact_similar_and_empty_fills_in_percent():
    tasks = [Task(str(i), "", "", middle, "", "") for i, middle in
             enumerate(["return a + b\n", "x = 1", "y = 2", "pass"])]
    numbers = score(tasks, ["  return a + b", "x = 2", "", "pass"])
    assert numbers["exact"] == 50.0  # whitespace around a line does not count
    assert numbers["empty"] == 25.0
    assert numbers["similarity"] == round(100 * (1 + 0.8 + 0 + 1) / 4, 1)


def test_a_progress_line_says_each_set_s_exact_and_similar_share():
    point = {"heldout_loss": 2.0, "probe_lines_exact": 4.5, "probe_lines_similarity": 24.7,
             "probe_humaneval_exact": 3.0, "probe_humaneval_similarity": 19.0}
    assert probe_summary(point) == "fills exact/similar lines 4.5/24.7%, humaneval 3.0/19.0%"
    assert probe_summary({"heldout_loss": 2.0}) == ""
