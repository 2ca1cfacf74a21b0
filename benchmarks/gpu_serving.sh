#!/usr/bin/env bash
# The serving measurements that need the GPU machine (issues 8 and 5), as one run.
#
# The GPU machine has torch, transformers, tokenizers, safetensors and pytest but
# not the server's LSP and tree-sitter packages, and no network.  So, first, here
# (PyPI reachable):
#
#     bash benchmarks/gpu_serving.sh wheels [PYTHON_VERSION]   # default 3.12
#
# downloads those packages as wheels for that Python on manylinux x86_64 into
# .device-wheels/ (ignored by git; 1.1 MB for Python 3.12 here).  Then, on the GPU machine, with the run
# tool's carry [".device-wheels"] and a timeout_s of 540 (the parts' own limits add up to 480 s):
#
#     bash benchmarks/gpu_serving.sh run
#
# installs them into a scratch folder (nothing outside it changes) and writes into
# $OUT (default ./gpu-out):
#   graphs-tests.txt      tests/test_graphs.py, whose CUDA tests run only there
#   graph-step.json/.md   the shipped model's step, eager against a replayed CUDA graph
#                         (REPEATS=N: N timed steps a row instead of graph_step.py's 50)
#   lsp-32.json/.txt      32-token fills through the real server over TCP: one at a time (p50),
#                         then 16 client connections at once (throughput, p95); CUDA graphs on
#   lsp-32-eager.json     the same with cudaGraphs off
#   checkpoints.json/.txt 7B-shaped networks of each published family: step time, and
#                         the context cache's step for a 32-token span (issue 5, 8)
# Each part has its own time limit, so one that hangs cannot take the others' time.
# A part that fails or is stopped at its limit says so in a line of its own, and the
# script then exits 1: the part's file is missing or cut short, and without the line
# a run could not tell a part that timed out from one that crashed or never ran.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS="${DEVICE_WHEELS:-.device-wheels}"  # (the tests' stand-ins name another)
# Only the Python grammar: every part fills Python (tests/test_graphs.py's requests,
# lsp_latency.py's documents) or parses nothing (graph_step.py, checkpoints_gpu.py), and
# grammars load on first use (validation.py).  The others cost 1.2 MB of the 64 MiB
# that travels to the GPU machine (tests/test_device_transfer.py).
PACKAGES=(pygls==2.1.1 lsprotocol==2025.0.0 tree-sitter==0.26.1 tree-sitter-python)

case "${1:-}" in
wheels)
    version="${2:-3.12}"
    rm -rf "$WHEELS" && mkdir -p "$WHEELS"
    python3 -m pip download --quiet --dest "$WHEELS" --only-binary=:all: \
        --python-version "$version" --implementation cp \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux_2_28_x86_64 --platform any "${PACKAGES[@]}"
    ls "$WHEELS" && du -sh "$WHEELS"
    ;;
run)
    # before anything is made: pip's "No matching distribution found for pygls" did not
    # say the wheels were never fetched (or not carried), and left a folder in /tmp
    if ! compgen -G "$WHEELS/*.whl" > /dev/null; then
        echo "gpu_serving: no wheels in $WHEELS: run 'bash benchmarks/gpu_serving.sh wheels'" \
            "first (here, where PyPI is reachable), and carry $WHEELS to the GPU machine"
        exit 2
    fi
    OUT="${OUT:-$PWD/gpu-out}"
    mkdir -p "$OUT"
    installed="$(mktemp -d)"
    trap 'rm -rf "$installed"' EXIT
    site="$installed/site"
    python3 -m pip install --quiet --no-index --find-links "$WHEELS" --target "$site" \
        "${PACKAGES[@]}" || { echo "installing the carried wheels failed"; exit 2; }
    export PYTHONPATH="$PWD:$site" HF_HUB_OFFLINE=1
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    failed=0
    said() {  # said PART LIMIT STATUS: the line a part that did not end well leaves
        case "$3" in
        0) ;;
        124) echo "gpu_serving: $1 stopped at its $2 s limit"; failed=1 ;;
        *) echo "gpu_serving: $1 failed (exit $3)"; failed=1 ;;
        esac
    }
    timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_graphs.py \
        > "$OUT/graphs-tests.txt" 2>&1
    said tests/test_graphs.py 120 $?
    tail -3 "$OUT/graphs-tests.txt"
    timeout 60 python3 benchmarks/graph_step.py ${REPEATS:+--repeats "$REPEATS"} \
        --json "$OUT/graph-step.json" \
        | tee "$OUT/graph-step.md"
    said benchmarks/graph_step.py 60 "${PIPESTATUS[0]}"
    timeout 90 python3 benchmarks/lsp_latency.py --settings '{"device": "auto"}' \
        --options '{"length": 32}' --fills "${FILLS:-64}" --concurrent 16 --tcp --json "$OUT/lsp-32.json" \
        | tee "$OUT/lsp-32.txt"
    said "benchmarks/lsp_latency.py (CUDA graphs on)" 90 "${PIPESTATUS[0]}"
    timeout 60 python3 benchmarks/lsp_latency.py \
        --settings '{"device": "auto", "cudaGraphs": false}' --options '{"length": 32}' \
        --fills "${FILLS:-64}" --concurrent 16 --tcp --json "$OUT/lsp-32-eager.json" | tail -2
    said "benchmarks/lsp_latency.py (CUDA graphs off)" 60 "${PIPESTATUS[0]}"
    timeout 150 python3 benchmarks/checkpoints_gpu.py --json "$OUT/checkpoints.json" \
        > "$OUT/checkpoints.txt" 2>&1
    said benchmarks/checkpoints_gpu.py 150 $?
    tail -20 "$OUT/checkpoints.txt"
    exit "$failed"
    ;;
*)
    echo "usage: bash benchmarks/gpu_serving.sh wheels [PYTHON_VERSION] | run" >&2
    exit 2
    ;;
esac
