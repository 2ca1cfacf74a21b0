"""Specification of dlm_lsp.models.graphs: replayed steps give the eager results.

A CUDA graph reads its input from, and writes its output to, the buffers it
was captured with.  On machines without CUDA these tests substitute a capture
with exactly those buffer semantics (`buffer_capture`), so the bookkeeping
around it (copying inputs in, copying outputs out, which shapes are captured,
falling back) is checked everywhere; the last tests run the real capture
where a GPU is present.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from pathlib import Path

import pytest
import torch

from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine
from dlm_lsp.models import load_model
from dlm_lsp.models.graphs import GraphConfig, ShapeGraphs
from dlm_lsp.results import InfillRequest


def buffer_capture(fn, example: torch.Tensor, pool: object, pause: float = 0.0):
    """A stand-in for cuda_capture with a CUDA graph's buffer semantics: a replay
    computes from the captured input buffer into the captured output buffer."""
    static_in = example.clone()
    static_out = fn(static_in)

    def replay(ids: torch.Tensor) -> torch.Tensor:
        static_in.copy_(ids)
        time.sleep(pause)  # widens the window in which an unlocked caller would interfere
        static_out.copy_(fn(static_in))
        return static_out
    return replay, pool if pool is not None else object()


def _ids(model, batch: int, length: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(2, model.tokenizer.vocab_size, (batch, length), generator=gen)


@pytest.fixture
def model(model_dir: Path):
    return load_model(str(model_dir), "cpu")


@pytest.fixture
def graphed(model_dir: Path):
    model = load_model(str(model_dir), "cpu")
    model.use_graphs(capture=buffer_capture)
    return model


def test_rows_of_different_lengths_share_no_pass_while_steps_replay_as_graphs(
        model, graphed) -> None:
    """Each length replays its own graph; a padded pass would run eagerly, slower."""
    assert model.padded_rows and not graphed.padded_rows


def test_replayed_steps_give_the_eager_hidden_states(model, graphed) -> None:
    for seed, (batch, length) in enumerate([(1, 40), (1, 40), (2, 40), (1, 40), (2, 40),
                                            (2, 40), (1, 64)]):
        ids = _ids(model, batch, length, seed)
        assert torch.equal(graphed.hidden(ids), model.hidden(ids))
    assert graphed.graphs.stats.replays >= 4  # (1, 40) from its 2nd call, (2, 40) too


def test_a_shape_is_captured_on_its_second_call_and_one_off_shapes_never_are(graphed) -> None:
    graphed.hidden(_ids(graphed, 1, 30, 0))
    assert graphed.graphs.shapes() == []
    graphed.hidden(_ids(graphed, 1, 30, 1))
    graphed.hidden(_ids(graphed, 3, 17, 2))
    assert graphed.graphs.shapes() == [(1, 30)]
    stats = graphed.graphs.stats
    assert (stats.captured, stats.replays, stats.eager) == (1, 1, 2)


def test_an_earlier_result_survives_the_next_replay(model, graphed) -> None:
    a, b = _ids(model, 1, 24, 0), _ids(model, 1, 24, 1)
    graphed.hidden(a)
    first = graphed.hidden(a)  # replayed
    graphed.hidden(b)  # replays the same graph over other input
    assert torch.equal(first, model.hidden(a))


def test_the_least_recently_used_shape_is_dropped_past_the_limit() -> None:
    graphs = ShapeGraphs(lambda ids: ids * 2, GraphConfig(after=1, max_graphs=2),
                         capture=buffer_capture)
    for length in (3, 4, 3, 5):  # 4 is the least recently used when 5 arrives
        graphs(torch.ones(1, length))
    assert graphs.shapes() == [(1, 3), (1, 5)]
    assert graphs.stats.evicted == 1
    assert torch.equal(graphs(torch.ones(1, 4)), torch.full((1, 4), 2.0))


def test_a_failed_capture_switches_graphs_off_and_the_step_still_runs(model) -> None:
    attempts = []

    def failing(fn, example, pool):
        attempts.append(tuple(example.shape))
        raise RuntimeError("operation not permitted when stream is capturing")
    model.use_graphs(capture=failing)
    ids = _ids(model, 1, 20, 0)
    expected = model.graphs.fn(ids)
    for _ in range(4):
        assert torch.equal(model.hidden(ids), expected)
    assert attempts == [(1, 20)]  # tried once, never again
    assert "not permitted" in model.graphs.stats.failed


def test_concurrent_callers_each_get_their_own_result() -> None:
    graphs = ShapeGraphs(lambda ids: ids + 1, GraphConfig(after=1),
                         capture=lambda fn, ex, pool: buffer_capture(fn, ex, pool, pause=0.01))
    out: dict[int, torch.Tensor] = {}

    def call(i: int) -> None:
        for _ in range(5):
            out[i] = graphs(torch.full((2, 8), float(i)))
    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert all(torch.equal(out[i], torch.full((2, 8), i + 1.0)) for i in range(6))


def _fill(engine: Engine, seed: int) -> tuple:
    text = "def area(w, h):\n    return \n\nprint(area(2, 3))\n"
    at = text.index("return ") + len("return ")
    req = InfillRequest(text, at, at, "python", "file:///a.py",
                        InfillOptions(seed=seed, repair_rounds=0, fallback=False))
    result = engine.infill(req)
    return [c.text for c in result.candidates], result.steps


@pytest.mark.parametrize("batch_rows", [16, 0])
def test_fills_through_the_engine_are_the_same_with_graphs(model_dir: Path,
                                                           batch_rows: int) -> None:
    # as on CUDA, where `contextCache: "auto"` keeps no cache (its steps replay no graph)
    config = ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                          batch_rows=batch_rows, context_cache=False)
    eager, graphed = Engine(config), Engine(config)
    graphed.model.use_graphs(capture=buffer_capture)
    try:
        for seed in range(3):
            assert _fill(graphed, seed) == _fill(eager, seed)
        status = graphed.status()["cudaGraphs"]
        assert status["replays"] > 0 and status["failed"] is None
        assert eager.status()["cudaGraphs"] is None
    finally:
        eager.close()
        graphed.close()


@pytest.mark.parametrize("device", ["cuda", "auto"])
def test_switching_cuda_graphs_on_cuda_reloads_the_model(model_dir: Path, cuda_machine: list,
                                                        device: str) -> None:
    engine = Engine(ServerConfig(model=str(model_dir), device=device))
    first = engine.model
    assert engine.reconfigure(ServerConfig(model=str(model_dir), device=device,
                                           cuda_graphs=False))
    assert engine.model is not first
    assert cuda_machine == [(device, True), (device, False)]
    engine.close()


@pytest.mark.parametrize("cuda, device", [(False, "cpu"), (False, "auto"), (True, "cpu")])
def test_switching_cuda_graphs_off_cuda_keeps_the_model(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, cuda: bool, device: str) -> None:
    """Steps replay as graphs only on CUDA: on a CPU the switch changes nothing that a
    reload (seconds to minutes for a big checkpoint) would change."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    engine = Engine(ServerConfig(model=str(model_dir), device=device))
    first = engine.model
    assert not engine.reconfigure(ServerConfig(model=str(model_dir), device=device,
                                               cuda_graphs=False))
    assert engine.model is first
    engine.close()


def _published(tmp_path: Path) -> Path:
    """A published checkpoint as far as a load first reads it: config.json names its family."""
    directory = tmp_path / "dream-coder"
    directory.mkdir()
    (directory / "config.json").write_text('{"model_type": "dream"}')
    return directory


def _hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, models: dict[str, str]) -> None:
    """A local hub cache in `tmp_path` that holds, for each hub id of `models`, the
    snapshot a download leaves (refs/main names it) with a config.json of that
    model_type; the cache huggingface_hub reads is this one (HF_HUB_CACHE, read once
    at its import: the test sets its constant too)."""
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    for repo_id, model_type in models.items():
        repo = cache / f"models--{repo_id.replace('/', '--')}"
        commit = "0123456789abcdef0123456789abcdef01234567"
        (repo / "refs").mkdir(parents=True)
        (repo / "refs" / "main").write_text(commit)
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text(
            f'{{"model_type": "{model_type}"}}')
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))


@pytest.mark.parametrize("device, prefix", [("cuda", ""), ("auto", ""), ("cuda", "dream:")])
def test_switching_cuda_graphs_on_cuda_keeps_a_published_checkpoint(
        tmp_path: Path, cuda_machine: list, device: str, prefix: str) -> None:
    """Only our own models replay graphs; a published one runs eagerly whatever the
    switch says, and was loaded again for it (minutes for a 7B checkpoint)."""
    config = ServerConfig(model=f"{prefix}{_published(tmp_path)}", device=device)
    engine = Engine(config)
    assert not engine.reconfigure(ServerConfig(model=config.model, device=device,
                                               cuda_graphs=False))
    assert cuda_machine == []  # settings alone: nothing was loaded to tell
    engine.close()


@pytest.mark.parametrize("spec, uses", [
    ("default", True), ("{ours}", True), ("dlm-tiny:{ours}", True), ("{published}", False),
    ("dream:{ours}", False), ("owner/not-fetched", True), ("{tmp}", True)])
def test_a_model_is_told_to_replay_graphs_as_it_loads(
        model_dir: Path, tmp_path: Path, spec: str, uses: bool) -> None:
    """Our own family replays graphs, whatever names it ("dlm-tiny:" or config.json); a
    published family, named or detected, does not.  A model that cannot be told of
    without a load (a hub id fetched only then, a directory that is no model) counts as
    one that does: the switch reloads it, as it did before models were told apart."""
    from dlm_lsp.models import uses_graphs

    named = spec.format(ours=model_dir, published=_published(tmp_path), tmp=tmp_path)
    assert uses_graphs(named) is uses


def test_switching_cuda_graphs_on_cuda_keeps_a_published_checkpoint_named_by_hub_id(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cuda_machine: list) -> None:
    """A hub id is told by the config.json of its snapshot in the local hub cache (no
    network: the cache is read as a file tree); it was loaded again for the switch."""
    _hub_cache(tmp_path, monkeypatch, {"Dream-org/Dream-Coder": "dream"})
    engine = Engine(ServerConfig(model="Dream-org/Dream-Coder", device="cuda"))
    assert not engine.reconfigure(ServerConfig(model="Dream-org/Dream-Coder", device="cuda",
                                               cuda_graphs=False))
    assert cuda_machine == []
    engine.close()


@pytest.mark.parametrize("spec, uses", [
    ("Dream-org/Dream-Coder", False), ("me/tiny-coder", True), ("owner/not-fetched", True),
    ("Dream-org/Dream-Coder/config.json", True)])
def test_a_hub_id_is_told_by_its_config_in_the_local_hub_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, uses: bool) -> None:
    """A published checkpoint in the cache runs eagerly, one of our own replays graphs;
    one not in the cache, or no hub id, cannot be told of and counts as one that does."""
    from dlm_lsp.models import uses_graphs

    _hub_cache(tmp_path, monkeypatch, {"Dream-org/Dream-Coder": "dream",
                                       "me/tiny-coder": "dlm-tiny"})
    monkeypatch.chdir(tmp_path)  # no directory of the spec's name beside the test run
    assert uses_graphs(spec) is uses


def test_graphs_are_used_on_cuda_only(model_dir: Path) -> None:
    assert load_model(str(model_dir), "cpu").graphs is None


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_cuda_graph_replays_match_eager_steps(model_dir: Path, precision: str) -> None:
    graphed = load_model(str(model_dir), "cuda", precision)
    eager = load_model(str(model_dir), "cuda", precision, graphs=False)
    assert graphed.graphs is not None and eager.graphs is None
    for seed in range(4):
        ids = _ids(eager, 2, 96, seed).cuda()
        torch.testing.assert_close(graphed.hidden(ids), eager.hidden(ids), rtol=0, atol=1e-2)
    assert graphed.graphs.stats.failed is None
    assert graphed.graphs.stats.replays == 3


def test_a_rotation_table_grown_for_a_longer_sequence_leaves_the_old_one_alive() -> None:
    """A span past max_length (maxSpanTokens raised) still grows the table; a graph
    captured earlier reads the old one by its address, so it must not be freed."""
    from dlm_lsp.models import tiny

    first = weakref.ref(tiny._rotation(8, 12_345.0, 16, torch.device("cpu"), torch.float32)[0])
    grown = tiny._rotation(8, 12_345.0, 1 << 16, torch.device("cpu"), torch.float32)
    gc.collect()
    assert grown[0].shape[0] >= 1 << 16 and first() is not None


def test_rotation_tables_cover_the_longest_sequence_before_any_capture(model_dir: Path) -> None:
    """A graph keeps the address of the rotary table it read; a table regrown for a longer
    sequence later would leave it reading freed memory, so the table is built whole first."""
    from dlm_lsp.models import tiny

    tiny._ROTATIONS.clear()
    model = load_model(str(model_dir), "cpu")
    model.use_graphs(capture=buffer_capture)
    cfg = model.module.cfg
    for dtype in (torch.float32, torch.bfloat16):
        key = (cfg.d_model // cfg.n_heads, cfg.rope_base, "cpu", dtype)
        assert tiny._ROTATIONS[key][0].shape[0] >= model.max_length
