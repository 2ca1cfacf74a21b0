"""Single-line tasks from source files: the lines `bench heldout` and the training's fill
probe (`training.fill_probe`) ask a model to write again.

A task is one line of code: the cursor sits after the line's indentation and the middle is
the rest of the line.  Lines of MIN_CHARS to MAX_CHARS characters that are neither
comments nor inside a multi-line string (docstrings are prose) are candidates, in files
that tokenize as Python 3.  Apart from the benchmark because training, on a machine
without the engine's tree-sitter, draws its probe's tasks by the same rule.
"""

from __future__ import annotations

import io
import tokenize

from dlm_lsp.bench.humaneval import Task

MIN_CHARS, MAX_CHARS = 8, 100  # a line's content (after its indentation) to be a task


def string_lines(text: str) -> set[int] | None:
    """0-based numbers of the lines a multi-line string covers (docstrings: prose, not
    code); None when the file does not tokenize as Python 3."""
    covered: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                covered.update(range(tok.start[0] - 1, tok.end[0]))
    except (tokenize.TokenError, SyntaxError):
        return None
    return covered


def line_tasks(files: list[tuple[str, str]], limit: int | None) -> list[Task]:
    """One task per candidate line, `limit` of them evenly spread (all when None)."""
    tasks = []
    for rel, text in files:
        prose = string_lines(text)
        if prose is None:
            continue
        at = 0
        for number, line in enumerate(text.splitlines(keepends=True)):
            body = line.rstrip("\r\n")
            content = body.lstrip(" \t")
            start = at + len(body) - len(content)
            at += len(line)
            if (not (MIN_CHARS <= len(content.rstrip()) <= MAX_CHARS)
                    or content.startswith("#") or number in prose):
                continue
            end = start + len(content)
            tasks.append(Task(f"{rel}:{number + 1}", text[:start], text[end:], content, "", ""))
    if limit is None or limit >= len(tasks):
        return tasks
    step = len(tasks) / limit
    return [tasks[int(i * step)] for i in range(limit)]
