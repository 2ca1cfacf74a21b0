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



def readme_block() -> str:
    """The Emacs Lisp block of editors/README.md's Emacs section, as a user copies it."""
    readme = (ROOT / "editors" / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Emacs (eglot)", 1)[1]
    return section.split("```elisp\n", 1)[1].split("```", 1)[0]


# Every script starts as a user's init.el would: the README's block, loaded as written,
# then its entry's executable and model replaced by this Python and the test model (whose
# nonsense fills are offered even when the syntax check rejects them); it opens the file
# and starts eglot, and ends by writing `result` (a plist) as JSON for the test.  Server
# edits are applied without eglot's y-or-n-p (batch Emacs has no one to answer it).
PRELUDE = r"""
(require 'eglot)
(require 'json)
(setq eglot-confirm-server-initiated-edits nil)
(load (getenv "DLM_README_BLOCK") nil t t)
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
              timeout: float = 120) -> dict:
    """Run PRELUDE + body in batch Emacs visiting `file`; return the `result` it wrote."""
    script = tmp_path / "script.el"
    script.write_text(PRELUDE + body + "\n(finish)\n", encoding="utf-8")
    block = tmp_path / "readme-block.el"
    block.write_text(readme_block(), encoding="utf-8")
    out = tmp_path / "result.json"
    env = {**os.environ, "DLM_SERVER": json.dumps([sys.executable, "-m", "dlm_lsp"]),
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


def test_code_action_fill_holes_replaces_the_hole_and_nothing_else(tmp_path, model_dir):
    """`C-u M-x eglot-code-actions`, kind refactor.rewrite: the one action, "Fill 1 hole
    with dlm-lsp", runs dlm.fillHoles, whose workspace/applyEdit eglot applies."""
    path = tmp_path / "hello.py"
    shutil.copy(FIXTURE, path)
    before = path.read_text(encoding="utf-8")
    result = run_emacs(tmp_path, model_dir, path, """
(setq result (plist-put result :titles
  (vconcat (mapcar (lambda (a) (plist-get a :title))
                   (eglot-code-actions (point-min) (point-min))))))
(advice-add 'eglot-execute-command :filter-return
            (lambda (answer) (setq result (plist-put result :answer answer)) answer))
(eglot-code-actions (point-min) (point-min) "refactor.rewrite" t)
(save-buffer)
""")
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
(setq result (plist-put result :titles
  (vconcat (mapcar (lambda (a) (plist-get a :title))
                   (eglot-code-actions (region-beginning) (region-end))))))
(advice-add 'eglot-execute-command :filter-return
            (lambda (answer) (setq result (plist-put result :answer answer)) answer))
(eglot-code-actions (region-beginning) (region-end) "refactor.rewrite" t)
(save-buffer)
""")
    assert result["titles"] == ["Rewrite selection with dlm-lsp"]
    assert result["answer"]["applied"] is True
    after = path.read_text(encoding="utf-8")
    assert_only_inside(before, after, start, end)
    assert after == before[:start] + result["answer"]["text"] + before[end:]
