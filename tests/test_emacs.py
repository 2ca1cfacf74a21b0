"""Emacs with eglot, set up as editors/README.md says, driving the real server.

Each test writes a short Emacs Lisp script, runs `emacs --batch -l script.el` (Emacs 28.2
and eglot 1.9 from Debian 12: `apt-get install emacs-nox elpa-eglot`; `DLM_EMACS=/path/to/emacs`
runs them on another build), loads the README's `eglot-server-programs` block as written,
lets eglot start `python -m dlm_lsp` in place of its executable, with the tiny random test
model in place of its model (its `initializationOptions` otherwise as written), and reads
back what the script saw as JSON. The buffer is a copy of a fixture; what eglot wrote to it is
compared with the original around the place the fill was for.

Nothing here is installed by pip: where emacs or eglot is missing (CI has no apt) every
test is skipped, with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lsp_helpers import assert_only_inside

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "hello.py"
# the server whose fills are the text a test plants, when the test lets them end
SCRIPTED = [sys.executable, str(ROOT / "tests" / "scripted_fills.py")]


def find_emacs() -> tuple[str | None, str]:
    """$DLM_EMACS, else emacs on PATH, if eglot loads in it; else None and why not."""
    emacs = shutil.which(os.environ.get("DLM_EMACS") or "emacs")
    if emacs is None:
        return None, "emacs not found: apt-get install emacs-nox elpa-eglot (or DLM_EMACS=...)"
    probe = subprocess.run([emacs, "--batch", "--eval", "(require 'eglot)"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return None, f"eglot does not load in {emacs}: apt-get install elpa-eglot " \
                     "(eglot is built into Emacs 29+)"
    return emacs, ""


EMACS, WHY_NOT = find_emacs()
pytestmark = pytest.mark.skipif(EMACS is None, reason=WHY_NOT)



def readme_block(n: int = 0) -> str:
    """The `n`th Emacs Lisp block of editors/README.md's Emacs section, as a user copies it."""
    readme = (ROOT / "editors" / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Emacs (eglot)", 1)[1].split("\n### ", 1)[0]
    return section.split("```elisp\n")[n + 1].split("```", 1)[0]


# Every script starts as a user's init.el would: the README's block, loaded as written,
# then its entry's executable and model replaced by this Python and the test model (whose
# nonsense fills are offered even when the syntax check rejects them); it opens the file
# and starts eglot, and ends by writing `result` (a plist) as JSON for the test.  Server
# edits are applied without eglot's y-or-n-p, as the block says (its prompt went with
# eglot's 10 s timeout, and the edit with it; batch Emacs has no one to answer it anyway).
PRELUDE = r"""
(require 'eglot)
(require 'json)
(load (getenv "DLM_README_BLOCK") nil t t)
(when eglot-confirm-server-initiated-edits
  (error "the README's block leaves eglot's edit prompt on"))
(let* ((entry (car eglot-server-programs))
       (options (cadr (memq :initializationOptions (cdr entry)))))
  (unless (memq 'python-mode (car entry)) (error "the README's entry is not for python-mode"))
  (unless options (error "the README's entry sends no :initializationOptions"))
  (unless (equal (cadr entry) "/path/to/dlm-lsp/.venv/bin/dlm-lsp")
    (error "the README's executable moved: %S" (cadr entry)))
  (setcdr entry `(,@(json-parse-string (getenv "DLM_SERVER") :array-type 'list)
                  :initializationOptions
                  ,(plist-put (plist-put (copy-sequence options) :model (getenv "DLM_MODEL"))
                              :suggestInvalid t))))
(defvar result nil)
(defun finish ()
  (with-temp-file (getenv "DLM_OUT") (insert (json-encode result))))
(defun text () (buffer-substring-no-properties (point-min) (point-max)))
(find-file (getenv "DLM_FILE"))
(call-interactively #'eglot)
(let ((deadline (+ (float-time) 60)))
  (while (and (not (eglot-current-server)) (< (float-time) deadline))
    (accept-process-output nil 0.1)))
(unless (eglot-current-server) (error "eglot did not connect"))
(setq result (plist-put result :model
                        (plist-get (jsonrpc-request (eglot-current-server) :dlm/status nil)
                                   :model)))
"""


def run_emacs(tmp_path: Path, model_dir: Path, file: Path, body: str,
              timeout: float = 120, server: list[str] | None = None,
              env: dict[str, str] | None = None) -> dict:
    """Run PRELUDE + body in batch Emacs visiting `file`; return the `result` it wrote.
    `server` is the command eglot starts (default `python -m dlm_lsp`), `env` more of
    its environment (and Emacs')."""
    script = tmp_path / "script.el"
    script.write_text(PRELUDE + body + "\n(finish)\n", encoding="utf-8")
    block = tmp_path / "readme-block.el"
    block.write_text(readme_block(), encoding="utf-8")
    out = tmp_path / "result.json"
    server = server or [sys.executable, "-m", "dlm_lsp"]
    env = {**os.environ, **(env or {}), "DLM_SERVER": json.dumps(server),
           "DLM_MODEL": str(model_dir), "DLM_FILE": str(file), "DLM_OUT": str(out),
           "DLM_README_BLOCK": str(block),
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([EMACS, "--batch", "-l", str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0 and out.exists(), (
        f"emacs exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}")
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["model"] == str(model_dir), "initializationOptions reach the server"
    return result


@pytest.mark.parametrize("typed", ["", "ret"])
def test_completion_at_point_inserts_the_fill_at_the_cursor(tmp_path, model_dir, typed):
    """`M-x completion-at-point` (C-M-i) on an empty line or after a word typed there:
    the dlm item is the only one, so Emacs takes it, and eglot applies its edit. The
    line reads as the item's label (what was typed, then the fill), and nothing else in
    the buffer changes.  After `ret` an item of the fill alone (`urn n`) was filtered
    out by eglot: "No match"."""
    path = tmp_path / "hello.py"
    before = FIXTURE.read_text(encoding="utf-8").replace("<FILL>", typed)
    path.write_text(before, encoding="utf-8")
    cursor = before.index("    " + typed + "\n\n\ndef main") + 4 + len(typed)
    result = run_emacs(tmp_path, model_dir, path, f"""
(goto-char {cursor + 1})
(let ((table (nth 2 (eglot-completion-at-point))))
  (setq result (plist-put result :labels
                          (vconcat (all-completions "{typed}" table)))))
(completion-at-point)
(setq result (plist-put result :text (text)))
""")
    assert len(result["labels"]) == 1, f"eglot shows the dlm item alone: {result['labels']}"
    label = result["labels"][0]
    after = result["text"]
    assert label.startswith(typed), "eglot shows the item: its label starts with the word"
    assert_only_inside(before, after, cursor, cursor)
    line_start = before.rindex("\n", 0, cursor) + 1
    new_line = after[line_start:].split("\n")[0]
    assert new_line.startswith("    " + label) and len(label) > len(typed)  # labels stop at 80


def run_rewrite_action(beg: str, end: str) -> str:
    """Elisp: note the titles of the code actions eglot is offered between `beg` and
    `end`, run the refactor.rewrite one (as `C-u M-x eglot-code-actions` with that kind
    does), note the command's answer, and save."""
    return f"""
(setq result (plist-put result :titles
  (vconcat (mapcar (lambda (a) (plist-get a :title))
                   (eglot-code-actions {beg} {end})))))
(advice-add 'eglot-execute-command :filter-return
            (lambda (answer) (setq result (plist-put result :answer answer)) answer))
(eglot-code-actions {beg} {end} "refactor.rewrite" t)
(save-buffer)
"""


def test_code_action_fill_holes_replaces_the_hole_and_nothing_else(tmp_path, model_dir):
    """`C-u M-x eglot-code-actions`, kind refactor.rewrite: the one action, "Fill 1 hole
    with dlm-lsp", runs dlm.fillHoles, whose workspace/applyEdit eglot applies."""
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    before = path.read_text(encoding="utf-8")
    result = run_emacs(tmp_path, model_dir, path, run_rewrite_action("(point-min)", "(point-min)"))
    assert result["titles"] == ["Fill 1 hole with dlm-lsp"]
    assert result["answer"]["applied"] is True
    after = path.read_text(encoding="utf-8")
    start = before.index("<FILL>")
    assert_only_inside(before, after, start, start + len("<FILL>"))
    assert after == before.replace("<FILL>", result["answer"]["fills"][0])


def test_code_action_rewrite_selection_changes_only_the_region(tmp_path, model_dir):
    """With a region active, the action offered is "Rewrite selection with dlm-lsp": it
    runs dlm.rewriteSelection on the region, and eglot applies the rewrite there."""
    path = tmp_path / "hello.py"
    before = FIXTURE.read_text(encoding="utf-8").replace("<FILL>", "return n")
    path.write_text(before, encoding="utf-8")
    start = before.index("print(i, fibonacci(i))")
    end = start + len("print(i, fibonacci(i))")
    result = run_emacs(tmp_path, model_dir, path, f"""
(transient-mark-mode 1)
(goto-char {start + 1})
(push-mark {end + 1} t t)  ; the region: from the point to the mark, active
""" + run_rewrite_action("(region-beginning)", "(region-end)"))
    assert result["titles"] == ["Rewrite selection with dlm-lsp"]
    assert result["answer"]["applied"] is True
    after = path.read_text(encoding="utf-8")
    assert_only_inside(before, after, start, end)
    assert after == before[:start] + result["answer"]["text"] + before[end:]


def test_a_multi_line_item_is_inserted_at_the_columns_the_server_gave(tmp_path, model_dir):
    """eglot inserts a multi-line item's text as it is (plain text, `insertTextMode`
    asIs): its later lines stay at the columns the server wrote them at, none re-indented
    by python-mode, even one left of the cursor's column."""
    path = tmp_path / "hello.py"
    before = FIXTURE.read_text(encoding="utf-8").replace("<FILL>", "")
    path.write_text(before, encoding="utf-8")
    fill = "x = 1\n    if x:\n        return x\n  # two"
    (tmp_path / "fill.txt").write_text(fill, encoding="utf-8")
    cursor = before.index("    \n\n\ndef main") + 4
    result = run_emacs(tmp_path, model_dir, path, f"""
(goto-char {cursor + 1})
(completion-at-point)
(setq result (plist-put result :text (text)))
""", server=SCRIPTED, env={"DLM_TEST_FILL": str(tmp_path / "fill.txt")})
    assert result["text"] == before[:cursor] + fill + before[cursor:]


# A command that outlasts eglot's wait (`jsonrpc-default-request-timeout`, 10 s; 2 s
# here): the fill waits for the gate the script opens after eglot gave up, and after
# the buffer was edited, or not: not at all; with the edit sent to the server (eglot
# sends didChange after half a second idle); with the edit not yet sent.
EDITS = {
    "unedited": "",
    "edited": '(goto-char (point-min)) (insert "# edited\\n") '
              '(eglot--signal-textDocument/didChange)',
    "edited, not yet sent": '(goto-char (point-min)) (insert "# edited\\n")',
}


@pytest.mark.parametrize("edit", EDITS)
def test_a_command_past_eglots_timeout_applies_its_edit_to_the_unedited_buffer_only(
        tmp_path, model_dir, edit):
    """eglot says "Timed out" and forgets the command; the fill goes on.  Its edit,
    still for the version it was computed for, is applied when the buffer is as it was;
    after an edit the server drops it (the edit reached it) or eglot refuses it (the
    version is not the buffer's): nothing of it lands in the edited buffer, and the
    user is told nothing more."""
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    before = path.read_text(encoding="utf-8")
    fill = "return fibonacci(n - 1) + fibonacci(n - 2)"
    (tmp_path / "fill.txt").write_text(fill, encoding="utf-8")
    gate, log = tmp_path / "gate", tmp_path / "fill.log"
    result = run_emacs(tmp_path, model_dir, path, f"""
(setq jsonrpc-default-request-timeout 2)
(setq result (plist-put result :error
  (condition-case err
      (progn (eglot-code-actions (point-min) (point-min) "refactor.rewrite" t) nil)
    (error (error-message-string err)))))
{EDITS[edit]}
(with-temp-file "{gate}" (insert "open"))
(let ((deadline (+ (float-time) 20)))  ; the fill ends, then its edit (if any) is handled
  (while (and (not (string-match-p "end\\\\|stopped"
                                   (with-temp-buffer (insert-file-contents "{log}")
                                                     (buffer-string))))
              (< (float-time) deadline))
    (accept-process-output nil 0.05)))
(let ((deadline (+ (float-time) 2)))
  (while (< (float-time) deadline) (accept-process-output nil 0.05)))
(setq result (plist-put result :messages (with-current-buffer "*Messages*" (buffer-string))))
(setq result (plist-put result :text (text)))
""", server=SCRIPTED, env={"DLM_TEST_FILL": str(tmp_path / "fill.txt"),
                           "DLM_TEST_FILL_GATE": str(gate), "DLM_TEST_FILL_LOG": str(log)})
    assert "Timed out" in result["error"]
    ran = log.read_text().split()
    if edit == "unedited":
        assert ran == ["begin", "end"]
        assert result["text"] == before.replace("<FILL>", fill)
        assert "Edit successful" in result["messages"]
        return
    edited = "# edited\n" + before
    assert result["text"] == edited, "nothing of the fill lands in the edited buffer"
    assert "Edit successful" not in result["messages"]
    # the server stopped the fill for the edit it was sent; an edit not yet sent let
    # the fill end, and eglot refused its edit for the old version
    assert ran == (["begin", "stopped"] if edit == "edited" else ["begin", "end"])


def test_workspace_configuration_changes_the_servers_settings(tmp_path, model_dir):
    """The README's `eglot-workspace-configuration` (its `dlm` section; the model replaced
    by a second copy of the test's) reaches the server as didChangeConfiguration when
    `eglot-signal-didChangeConfiguration` is run: the server loads that model."""
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    other = tmp_path / "other-model"
    other.symlink_to(model_dir)
    block = tmp_path / "settings.el"
    block.write_text(readme_block(1), encoding="utf-8")
    result = run_emacs(tmp_path, model_dir, path, f"""
(load "{block}" nil t t)
(let ((section (plist-get (default-value 'eglot-workspace-configuration) :dlm)))
  (unless section (error "the README's eglot-workspace-configuration has no :dlm section"))
  (setq-default eglot-workspace-configuration
                (list :dlm (plist-put (copy-sequence section) :model "{other}"))))
(eglot-signal-didChangeConfiguration (eglot-current-server))
(setq result (plist-put result :now
                        (plist-get (jsonrpc-request (eglot-current-server) :dlm/status nil)
                                   :model)))
""")
    assert result["now"] == str(other)
