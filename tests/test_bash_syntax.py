"""Specification of dlm_lsp.bash_syntax: `bash -n` confirms what tree-sitter passes.

tree-sitter-bash accepts some text bash rejects; a fill in a bash or sh script is
valid only when bash's parser agrees, judged on the commands around the span and
never blaming the user's own damage.  Documents mark the span as ⟦old text⟧ (⟦⟧
for an insertion point), as in test_validation.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dlm_lsp import bash_syntax, validation
from dlm_lsp.bash_syntax import CHUNK_CHARS
from dlm_lsp.validation import Validation, validate_fill

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on PATH")


def _fill(marked: str, fill: str, uri: str | None = None) -> Validation:
    start = marked.index("⟦")
    end = marked.index("⟧") - 1
    return validate_fill(marked.replace("⟦", "").replace("⟧", ""), start, end, fill, "bash",
                         uri)


def _filled(marked: str, fill: str) -> str:
    return marked.replace("⟦", "").split("⟧")[0] + fill + marked.split("⟧")[1]


# --- heredocs -----------------------------------------------------------------------------


FUNCTION = "f() {\n    echo start\n⟦⟧\n}\necho hi\n"


def test_a_heredoc_whose_terminator_is_indented_is_rejected() -> None:
    """bash ends `<<EOF` only at a line that is exactly `EOF`: the `}` and the rest of
    the script became heredoc text, and tree-sitter ended the heredoc anyway."""
    fill = "    cat <<EOF\nhello\n    EOF"
    result = _fill(FUNCTION, fill)
    assert not result.valid
    assert "(bash: here-document at line 3 delimited by end-of-file (wanted `EOF'))" \
        in result.reason
    assert result.new_errors == ((4, 4),)  # the line meant to end it, for repair to re-mask
    [(a, b)] = result.new_ranges
    assert _filled(FUNCTION, fill)[a:b] == "EOF"


def test_the_same_heredoc_ended_at_column_0_is_accepted() -> None:
    assert _fill(FUNCTION, "    cat <<EOF\nhello\nEOF").valid


def test_a_dash_heredoc_may_indent_its_terminator_with_tabs_not_spaces() -> None:
    assert _fill(FUNCTION, "\tcat <<-EOF\n\thello\n\tEOF").valid
    result = _fill(FUNCTION, "    cat <<-EOF\n    hello\n    EOF")
    assert not result.valid
    assert result.new_errors == ((4, 4),)


def test_a_terminator_the_fill_writes_for_the_user_s_open_heredoc_must_end_it() -> None:
    """The heredoc is open to the end as the document is, so bash fails there either way;
    a line the fill meant to end it with is still the fill's."""
    marked = "f() {\n    cat <<EOF\nhello\n⟦⟧\n}\necho hi\n"
    assert _fill(marked, "EOF").valid
    result = _fill(marked, "    EOF")
    assert not result.valid
    assert result.new_errors == ((3, 4),)


# --- other text tree-sitter lets through --------------------------------------------------


@pytest.mark.parametrize("fill", ["fi", "done", "esac", "}", "then echo a", "echo a;;",
                                  "echo a >", "if true; then then echo a; fi"])
def test_commands_bash_cannot_parse_are_rejected(fill: str) -> None:
    result = _fill("x=1\n⟦⟧\necho b\n", fill)
    assert not result.valid
    assert "(bash: syntax error near unexpected token" in result.reason
    assert result.new_errors == ((1, 0),)


def test_a_conditional_bash_cannot_parse_is_rejected_though_bash_n_exits_0() -> None:
    """bash reports it, goes on parsing and exits 0 under -n; run, the script stops there."""
    result = _fill("x=1\n⟦⟧\necho b\n", "[[ -n ]] && echo set")
    assert not result.valid
    assert "(bash: unexpected argument `]]' to conditional unary operator)" in result.reason


def test_an_elif_after_else_is_rejected() -> None:
    marked = "if [ -n \"$a\" ]; then\n  echo a\nelse\n  echo b\n⟦⟧\nfi\n"
    assert _fill(marked, "  echo c").valid
    result = _fill(marked, "elif [ -n \"$b\" ]; then")
    assert not result.valid
    assert "unexpected token `elif'" in result.reason


def test_a_then_body_left_empty_must_be_filled_with_a_command() -> None:
    """bash notices the empty body at its `fi`, on the line below the span."""
    marked = "if [ -f x ]; then\n  ⟦⟧\nfi\necho b\n"
    assert _fill(marked, "rm x").valid
    for fill in ("", "# later"):
        result = _fill(marked, fill)
        assert not result.valid, repr(fill)
        assert result.new_errors == ((2, 0),)


# --- the user's damage is not the fill's --------------------------------------------------


@pytest.mark.parametrize("marked", [
    "f() {\n  local x=⟦⟧\n  fi\n  echo done\n}\n",
    "x=⟦⟧\nfi\necho done\n",
    "for f in *; do\n  n=⟦⟧\n  esac\ndone\n",
])
def test_a_stray_closer_below_the_span_is_the_user_s_and_good_fills_pass_over_it(
        marked: str) -> None:
    """bash fails at a `fi` (`esac`) that closes nothing, on the line below the span, with
    any fill: each was blamed for it, as for an empty `then` body's `fi`; tree-sitter reads
    it as a command and saw nothing.  The fill is judged as if that line were blank."""
    for fill in ("1", "$(pwd)", '"$1"', ""):
        assert _fill(marked, fill).valid, fill


@pytest.mark.parametrize(("marked", "line"), [
    ("f() {\n  local x=⟦⟧\n  fi\n  echo done\n}\n", 3),
    ("x=⟦⟧\nfi\necho done\n", 2),
])
def test_a_fill_passed_over_a_stray_closer_says_the_closer_was_ignored(
        marked: str, line: int) -> None:
    """As tree-sitter's verdict names a line below that it judged blank, broken on its
    own, so does bash's: its verdict passed with tree-sitter's reason alone, which said
    nothing of the line the fill was judged without."""
    for fill in ("1", '"$1"'):
        reason = _fill(marked, fill).reason
        assert reason.endswith(f"; line {line}, broken on its own, pre-existing and ignored")
        assert reason.count("broken on its own") == 1, reason


def test_over_a_stray_closer_a_fill_that_leaves_its_line_incomplete_is_still_rejected(
) -> None:
    assert not _fill("f() {\n  local x=⟦⟧\n  fi\n  echo done\n}\n", "$(").valid
    marked = "x=⟦⟧\nfi\n"
    result = _fill(marked, "1 &&")  # judged with `fi` blank: the script ends after `&&`
    assert not result.valid
    assert "unexpected end of file" in result.reason
    result = _fill("f() {\n  local x=⟦⟧\n  fi\n}\n", "1 |")
    assert not result.valid
    assert "unexpected token `}'" in result.reason


@pytest.mark.parametrize(("marked", "fill", "closer"), [
    ("if [ -f x ]; then ⟦⟧\nfi\n", "", "fi"),  # the `fi` closes the span's line's `if`
    ("if [ -f x ]; then ⟦⟧\nfi\n", "rm x; fi", "fi"),  # ... which the fill closed instead
    ("if [ -f x ]; then\n  ⟦⟧\nfi\n", "# later", "fi"),  # an empty body: `:` fills it
    ("f() {\n  if [ -f x ]; then echo a |⟦⟧\n  fi\n}\n", "", "fi"),  # the pipeline goes on
    ("if [ -f x ]\nthen\n  rm x &&⟦⟧\n  fi\necho z\n", "", "fi"),  # and the list
    ("f() {\n  if [ -f x ]; then (⟦⟧\n  fi\n  echo b\n}\n", "rm x", "fi"),  # `(` still open
])
def test_a_closer_that_closes_what_the_span_s_lines_open_is_not_broken_on_its_own(
        marked: str, fill: str, closer: str) -> None:
    """The line below fails for these fills, but not for every fill: it is judged as it
    is, where the failure is reported (not with it blank, at the end of the text)."""
    result = _fill(marked, fill)
    assert not result.valid
    assert f"unexpected token `{closer}'" in result.reason


def test_a_script_broken_elsewhere_does_not_reject_a_good_fill() -> None:
    marked = "f() {\n  ⟦⟧\n  echo a\n  echo b;;\n}\n"
    assert _fill(marked, "local x=1").valid
    result = _fill(marked, "fi")  # bash now stops earlier: the fill's doing
    assert not result.valid
    assert result.new_errors == ((1, 2),)


def test_a_script_broken_above_still_has_its_fills_checked() -> None:
    """bash stops at the first error in a file; the commands around the span are
    parsed on their own, so damage far above does not hide the fill's."""
    body = "".join(f"echo {i}\n" for i in range(30))
    marked = f"done\n{body}g() {{\n  ⟦⟧\n}}\n{body}"
    assert _fill(marked, "echo g").valid
    result = _fill(marked, "fi")
    assert not result.valid
    assert result.new_errors == ((32, 2),)


def test_a_function_too_big_to_parse_whole_is_checked_in_its_body() -> None:
    body = "".join(f"  echo {i} line of output for the log\n" for i in range(600))
    marked = f"main() {{\n  esac\n{body}  ⟦⟧\n  echo end\n}}\nmain \"$@\"\n"
    assert len(marked) > CHUNK_CHARS
    assert _fill(marked, "echo x").valid
    result = _fill(marked, "fi")
    assert not result.valid
    assert result.new_errors == ((602, 2),)


# --- extglob ------------------------------------------------------------------------------


EXTGLOB = ("#!/bin/bash\nshopt -s extglob\n\ncase $1 in\n  @(start|stop)) echo ok ;;\n"
           "esac\n⟦⟧\n")


def test_a_script_that_enables_extglob_keeps_its_patterns_and_its_fills() -> None:
    """`bash -n` runs no `shopt -s extglob`: without extglob on, bash cannot parse
    `@(a|b)`, and every fill in such a script would be blamed or unchecked."""
    assert _fill(EXTGLOB, "echo done").valid
    assert _fill(EXTGLOB, "[[ $2 == +([0-9]) ]] && echo number").valid
    assert "(bash: " in _fill(EXTGLOB, "fi").reason


# --- where bash is asked, and how ---------------------------------------------------------


def test_a_zsh_script_is_not_checked_by_bash() -> None:
    """VS Code's `shellscript` language is zsh's too; zsh parses what bash rejects."""
    marked = "x=1\n⟦⟧\necho b\n"
    assert not _fill(marked, "fi", "file:///home/u/build.sh").valid
    assert _fill(marked, "fi", "file:///home/u/prompt.zsh").valid
    assert _fill(marked, "fi", "file:///home/u/.zshrc").valid
    assert _fill("#!/usr/bin/env zsh\n" + marked, "fi", "file:///home/u/tool").valid
    assert not _fill("#!/bin/sh\n" + marked, "fi", "file:///home/u/tool").valid


def test_without_bash_on_path_tree_sitter_s_verdict_stands(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    marked = "x=1\n⟦⟧\necho b\n"
    assert not _fill(marked, "fi").valid
    monkeypatch.setenv("PATH", str(tmp_path))
    result = _fill(marked, "fi")
    assert result.valid and result.checked
    assert not _fill(marked, "echo 'a").valid  # tree-sitter still checks


@pytest.mark.parametrize("trouble", [subprocess.TimeoutExpired("bash", 2.0),
                                     OSError("no such file")])
def test_a_bash_that_cannot_answer_leaves_tree_sitter_s_verdict(
        monkeypatch: pytest.MonkeyPatch, trouble: Exception) -> None:
    asked: list[object] = []

    def failing(*args: object, **kwargs: object) -> None:
        asked.append(args)
        raise trouble

    monkeypatch.setattr(bash_syntax.subprocess, "run", failing)
    result = _fill("x=1\n⟦⟧\necho b\n", "fi")
    assert asked and result.valid and result.checked


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], dict]]:
    """The arguments of every process the check runs (each still runs)."""
    made: list[tuple[list[str], dict]] = []
    run = subprocess.run

    def recording(args: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        made.append((args, kwargs))
        return run(args, **kwargs)

    monkeypatch.setattr(bash_syntax.subprocess, "run", recording)
    return made


def test_bash_gets_no_startup_files_and_a_cleared_environment(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        calls: list[tuple[list[str], dict]]) -> None:
    marker = tmp_path / "ran"
    startup = tmp_path / "startup.sh"
    startup.write_text(f"touch {marker}\n")
    for name in ("BASH_ENV", "ENV"):
        monkeypatch.setenv(name, str(startup))
    monkeypatch.setenv("SHELLOPTS", "noclobber")
    assert not _fill("x=1\n⟦⟧\necho b\n", "fi").valid
    assert calls
    for args, kwargs in calls:
        assert {"--norc", "--noprofile", "-n"} <= set(args)
        assert kwargs["env"] == {"LC_ALL": "C"}  # no BASH_ENV, ENV, SHELLOPTS, functions
        assert kwargs["timeout"] == bash_syntax.TIMEOUT
    assert not marker.exists()


def test_the_document_as_it_is_is_asked_once_and_only_when_a_fill_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sources: list[str] = []
    run_bash = bash_syntax.run_bash

    def counting(bash: str, source: str) -> subprocess.CompletedProcess | None:
        sources.append(source)
        return run_bash(bash, source)

    monkeypatch.setattr(bash_syntax, "run_bash", counting)
    text = "x=1\n\necho b\n"
    document = validation.parsed_document(text, "bash")
    assert document.validate(4, 4, "echo a").valid
    assert sources == ["x=1\necho a\necho b\n"]  # it parses: no baseline needed
    assert not document.validate(4, 4, "fi").valid
    assert not document.validate(4, 4, "done").valid
    assert sources.count(text) == 1


def test_a_large_document_is_read_by_bash_around_the_span_not_in_tree_sitter_s_window(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """tree-sitter judges a large document in a window; one that cuts through a function
    starts inside an `if` and ends inside another, where bash stops at once, always."""
    monkeypatch.setattr(validation, "WINDOW_ABOVE", 1_000)
    monkeypatch.setattr(validation, "WINDOW_LINES", 20)
    block = "  if [ -n \"$x\" ]; then\n" + "    echo x\n" * 30 + "  fi\n"
    marked = f"main() {{\n{block * 3}  ⟦⟧\n{block * 3}}}\nmain\n"
    assert _fill(marked, "echo x").valid
    result = _fill(marked, "fi")
    assert not result.valid
    assert result.new_errors == ((97, 2),)
    assert "first at line 98," in result.reason and "(bash: " in result.reason


# --- POSIX sh scripts ----------------------------------------------------------------------


needs_dash = pytest.mark.skipif(shutil.which("dash") is None, reason="no dash on PATH")
SH_SCRIPT = "#!/bin/sh\nset -e\nx=1\n⟦⟧\necho \"$x\"\n"
BASHISMS = ["a=(1 2)", "function g { echo a; }", "cat <<< \"$x\"",
            "select y in a b; do echo \"$y\"; done", "for ((i = 0; i < 3; i++)); do echo; done",
            "diff <(ls) <(ls -a)"]


@needs_dash
@pytest.mark.parametrize("fill", BASHISMS)
def test_a_posix_sh_script_gets_no_fill_in_bash_s_own_syntax(fill: str) -> None:
    """/bin/sh is dash on Debian and Ubuntu: bash parses these, dash fails on them, so
    the fill would break the script there."""
    result = _fill(SH_SCRIPT, fill)
    assert not result.valid
    assert "(dash: Syntax error: " in result.reason
    assert result.new_errors[0][0] == 3  # the fill's line
    assert _fill(SH_SCRIPT.replace("#!/bin/sh", "#!/bin/bash"), fill).valid
    assert _fill(SH_SCRIPT.replace("#!/bin/sh\n", ""), fill).valid  # no shebang: bash's file


@needs_dash
@pytest.mark.parametrize("shebang", ["#!/bin/sh", "#!/usr/bin/env sh", "#!/bin/dash"])
def test_posix_fills_in_a_posix_sh_script_are_accepted(shebang: str) -> None:
    script = SH_SCRIPT.replace("#!/bin/sh", shebang)
    for fill in ["[ -n \"$x\" ] && echo yes", "f() {\n  echo \"$1\"\n}", "y=$((x + 1))",
                 "cat <<EOF\n$x\nEOF"]:
        assert _fill(script, fill).valid, fill
    assert not _fill(script, "a=(1 2)").valid


@needs_dash
def test_an_sh_script_already_in_bash_s_syntax_is_held_to_bash_only() -> None:
    """A `#!/bin/sh` script that uses arrays runs under a bash wherever it works at all
    (its /bin/sh is bash): a fill in the same syntax is no new damage."""
    script = "#!/bin/sh\nitems=(a b)\nx=1\n\n\n\n⟦⟧\necho \"$x\"\n"
    assert _fill(script, "a=(1 2)").valid
    assert not _fill(script, "fi").valid  # bash still checks


def test_without_dash_on_path_a_posix_sh_script_is_checked_by_bash(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "bash").symlink_to(shutil.which("bash"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _fill(SH_SCRIPT, "a=(1 2)").valid
    assert not _fill(SH_SCRIPT, "fi").valid


@needs_dash
def test_dash_gets_a_cleared_environment_and_the_timeout(
        calls: list[tuple[list[str], dict]]) -> None:
    assert not _fill(SH_SCRIPT, "a=(1 2)").valid
    dash = [(args, kwargs) for args, kwargs in calls if args[0] == "dash"]
    assert dash and all(args == ["dash", "-n"] for args, _ in dash)
    assert all(kwargs["env"] == {"LC_ALL": "C"} and kwargs["timeout"] == bash_syntax.TIMEOUT
               for _, kwargs in dash)


@pytest.mark.parametrize(("script", "fill"), [
    ("x=1\n⟦⟧\necho y\nfi\n", "if [ x ]; then"),
    ("x=1\n⟦⟧\necho y\necho z\ndone\n", "for i in 1 2; do"),
    ("x=1\n⟦⟧\nhello\nEOF\necho ok\n", "cat <<EOF"),
])
def test_a_fill_that_opens_what_a_line_further_down_closes_is_accepted(script, fill) -> None:
    """bash reads the commands around the span, cut from the script as it is: one
    below it, so a fill that opens what the user's `fi` (or `done`, or heredoc end)
    two commands further down closes failed at the cut, "unexpected end of file"."""
    verdict = _fill(script, fill)
    assert verdict.valid, verdict.reason


@pytest.mark.parametrize(("script", "fill"), [
    ("x=1\n⟦⟧\necho y\necho z\n", "if [ x ]; then"),
    ("x=1\n⟦⟧\nhello\necho ok\n", "cat <<EOF"),
])
def test_a_fill_that_opens_what_nothing_below_closes_is_still_rejected(script, fill) -> None:
    assert not _fill(script, fill).valid


@pytest.mark.parametrize(("script", "fill"), [
    ("x=1\n⟦⟧\nls -l\nmkdir x\ncd x\ncat > f <<EOF\nhello\nEOF\n", "cat <<EOF"),
    ("x=1\n⟦⟧\nls -l\ncd x\ncat > f <<-'END'\n\thello\n\tEND\n", "cat <<-END"),
])
def test_a_fill_whose_heredoc_would_end_where_the_user_s_own_ends_is_still_rejected(
        script, fill) -> None:
    """The script parses whole with the fill, but the fill's heredoc took the user's
    commands, and their own heredoc's `<<` line, as its text down to their delimiter."""
    assert not _fill(script, fill).valid


@pytest.mark.parametrize(("script", "fill"), [
    ("x=1\n⟦⟧\necho y\necho z\nfi\necho a\n;;\n", "if [ x ]; then"),
    ("x=1\n⟦⟧\nhello\nEOF\necho ok\necho a\n;;\n", "cat <<EOF"),
])
def test_a_line_the_user_left_broken_further_down_does_not_keep_such_a_fill_rejected(
        script, fill) -> None:
    """The second look used to ask for a whole parse, so a stray `;;` far below (broken
    in the script as it is) kept these rejected; that line is read as blank now."""
    verdict = _fill(script, fill)
    assert verdict.valid, verdict.reason


def test_a_fill_that_opens_what_nothing_below_closes_is_rejected_past_a_stray_line() -> None:
    """Nothing closes the fill's `if` but a stray `;;`, which read as blank leaves it open
    to the end.  A second `fi` below the one that closes it, a command to tree-sitter (no
    error in its tree), is left as it is, and the parse fails there."""
    assert not _fill("x=1\n⟦⟧\necho y\necho z\necho a\n;;\n", "if [ x ]; then").valid
    assert not _fill("x=1\n⟦⟧\necho y\necho z\nfi\necho a\nfi\n", "if [ x ]; then").valid


def test_a_fill_that_ends_its_own_heredoc_is_judged_by_what_else_it_opens() -> None:
    script = "x=1\n⟦⟧\necho y\nfi\ncat > f <<EOF\nhello\nEOF\n"
    verdict = _fill(script, "cat <<EOF\nhi\nEOF\nif [ x ]; then")
    assert verdict.valid, verdict.reason
