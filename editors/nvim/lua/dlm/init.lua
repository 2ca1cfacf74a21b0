--- dlm-lsp for Neovim: code infilling with masked-diffusion language models.
---
---   require("dlm").setup({})   -- starts `dlm-lsp` for the configured filetypes
---
--- Commands: :DlmFill (selection, the <FILL> hole at the cursor, or insert at
--- the cursor), :DlmRewrite [expand] (selection or current line), :DlmFillHoles,
--- :DlmStatus, :DlmRetryLoad (after a failed load), :DlmToggle [on|off] (pause ghost
--- text), :DlmRestart; ghost text while typing
--- (accept with <Tab>); `:checkhealth dlm`.
--- Every edit is applied only to the buffer version it was computed for.
local M = {}

local api = vim.api
local edits = require('dlm.edits')
local ghost = require('dlm.ghost')
local completion = require('dlm.completion')
local debounce = require('dlm.debounce')

M.defaults = {
  -- The server command: `dlm-lsp` on PATH, or e.g. { '/path/to/.venv/bin/dlm-lsp' }.
  cmd = { 'dlm-lsp' },
  -- Or 'HOST:PORT' of a running `dlm-lsp --tcp HOST:PORT`, shared with other editors
  -- (one model, fills batched together): connect to it instead of starting `cmd`.
  server = nil,
  -- The shared server's token, when it was started with DLM_LSP_TCP_TOKEN set
  -- (default: that variable in Neovim's environment); sent with `server` only.
  token = nil,
  filetypes = {
    'python', 'javascript', 'javascriptreact', 'typescript', 'typescriptreact',
    'go', 'rust', 'java', 'c', 'cpp', 'cs', 'ruby', 'php', 'sh', 'bash', 'lua', 'kotlin',
    'scala', 'swift',
  },
  -- the root the server is told of; one server serves the buffers of every root
  root_markers = { '.git', 'pyproject.toml', 'package.json', 'go.mod', 'Cargo.toml' },
  -- Server settings in camelCase (README "Configuration"), sent as initializationOptions;
  -- change them later with require('dlm').configure({ ... }).
  settings = {},
  inline = {
    enabled = true,
    native = 'auto', -- 'auto': vim.lsp.inline_completion where Neovim has it (0.12+); false: extmarks
    debounce_ms = 250,
    accept = '<Tab>', -- insert-mode key that accepts the suggestion (else what it did before); false: none
    -- keys that accept its next word / the rest of its line (as copilot.vim's); false: none.
    -- Extmark mode only: Neovim's native inline completion takes a suggestion whole.
    accept_word = '<M-Right>',
    accept_line = '<M-C-Right>',
    -- keys that show the next / previous suggestion when the server gives several (server
    -- setting candidates > 1), as copilot.vim's (native mode: Neovim's own select); false: none
    next = '<M-]>',
    prev = '<M-[>',
    dismiss = '<C-]>', -- insert-mode key that hides it (extmark mode only); false: none
    -- insert-mode key that asks for a suggestion at the cursor now, as copilot.vim's: no
    -- wait for a pause in typing, and while suggestions are paused (extmark mode only)
    suggest = '<M-\\>',
    hl_group = 'Comment',
  },
  completion = {
    -- Completion requests Neovim (`vim.lsp.completion` with autotrigger) or a completion
    -- plugin sends on its own as you type wait until typing pauses this long, as ghost
    -- text does: each would start a fill that the next key stops. 0: sent at once.
    debounce_ms = 250,
  },
  -- Show dlm/draft notifications (server setting drafts = true) as virtual text while denoising.
  draft_preview = true,
  notify = true, -- report fills and dropped results with vim.notify
}

M.config = vim.deepcopy(M.defaults)
M.name = 'dlm'

local draft_ns = api.nvim_create_namespace('dlm.draft')

local function notify(message, level)
  if M.config.notify or (level and level >= vim.log.levels.WARN) then
    vim.notify('dlm: ' .. message, level or vim.log.levels.INFO)
  end
end

--- What a command that applied nothing says: the server's `why`, after "nothing applied: "
--- unless it says so itself ("...; nothing applied" read twice).
---@param why string
local function nothing_applied(why)
  return why:match('nothing applied$') and why or ('nothing applied: ' .. why)
end

--- `message` and then `more`, after a semicolon: a message that ends in a full stop (the
--- server's) read "... (owner/name).; tried again ...".
local function and_then(message, more)
  return (tostring(message):gsub('[.;]%s*$', '')) .. '; ' .. more
end

--- What :DlmRestart does, as a message says it: with `server` set it connects to the shared
--- server again (it said "starts it", of a server the plugin never starts).
local function restart_does()
  return M.config.server and ':DlmRestart connects again' or ':DlmRestart starts it'
end

--- What a fill of `holes` holes says, `blank` of which the model filled with whitespace
--- only (`filled 2 holes (1 blank: the model wrote no code there)`), as VS Code's
--- holesFilled says it: :DlmFillHoles and :DlmFill on a hole.
---@param holes integer
---@param blank integer
---@return string
local function holes_filled(holes, blank)
  local filled = ('filled %d hole%s'):format(holes, holes == 1 and '' or 's')
  if blank <= 0 then
    return filled
  end
  local which = blank < holes and (blank .. ' blank') or holes == 1 and 'blank' or 'all blank'
  return ('%s (%s: the model wrote no code there)'):format(filled, which)
end

-- The Lua types an option of setup() may take where its default's type does not say
-- (a default of nil, or a key a value of `false` turns off).
local KINDS = {
  cmd = { 'table', 'function' }, -- a function connects as vim.lsp.start's `cmd` does
  server = { 'string' },
  token = { 'string' },
  ['inline.native'] = { 'string', 'boolean' },
}

--- Whether `value` is a list of non-empty strings.
local function names(value)
  if type(value) ~= 'table' or not vim.islist(value) then
    return false
  end
  for _, item in ipairs(value) do
    if type(item) ~= 'string' or item == '' then
      return false
    end
  end
  return true
end

-- The options whose values a Lua type does not check enough: { test, what it should be }.
-- `inline = { accept = true }` or `next = ''` passed as a string or a boolean, then failed
-- in vim.keymap.set, and `filetypes = { 'python', 3 }` in nvim_create_autocmd: setup()
-- stopped half-way, its commands made and no server ever started.
local VALUES = {
  filetypes = { names, 'a list of filetype names' },
}
for _, key in ipairs({ 'accept', 'accept_word', 'accept_line', 'next', 'prev', 'dismiss', 'suggest' }) do
  VALUES['inline.' .. key] = {
    function(value)
      return value == false or (type(value) == 'string' and value ~= '')
    end,
    "a key such as '<Tab>', or false (none)",
  }
end

--- `opts` without the options of the wrong type, and without those setup() does not
--- have, each said: `settings = "steps=4"` was a Lua traceback at every file opened,
--- and `inline = { accept = 5 }` stopped setup() half-way, its commands made and no
--- server ever started.  The tables of `inline` and `completion` are checked in turn;
--- `settings` is the server's to check (it names a wrong one in a message).
---@param opts table
---@param defaults table
---@param prefix string the options' path so far ('' or 'inline.')
local function checked(opts, defaults, prefix)
  local out = {}
  for key, value in pairs(opts) do
    local name = prefix .. tostring(key)
    local default = defaults[key]
    local kinds = KINDS[name] or (default ~= nil and { type(default) }) or nil
    local values = VALUES[name]
    if not kinds and not values then
      notify(('setup{ %s }: no such option; ignored'):format(name), vim.log.levels.WARN)
    elseif values and not values[1](value) then
      notify(('setup{ %s } should be %s, got %s; the default kept'):format(
        name, values[2], vim.inspect(value)), vim.log.levels.WARN)
    elseif values then
      out[key] = value
    elseif not vim.tbl_contains(kinds, type(value)) then
      notify(('setup{ %s } should be a %s, got %s; the default kept'):format(
        name, table.concat(kinds, ' or a '), vim.inspect(value)), vim.log.levels.WARN)
    elseif type(value) == 'table' and type(default) == 'table' and name ~= 'settings'
      and not vim.islist(default) then
      out[key] = checked(value, default, name .. '.')
    else
      out[key] = value
    end
  end
  return out
end

--- Merge user options into the defaults; lists (cmd, filetypes...) are replaced, not merged.
local function merge(defaults, opts)
  local out = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  for _, key in ipairs({ 'cmd', 'filetypes', 'root_markers' }) do
    if opts and opts[key] ~= nil then
      out[key] = opts[key]
    end
  end
  if opts and opts.settings ~= nil then
    out.settings = opts.settings
  end
  return out
end

--- The running dlm client for `buf` (or any buffer), if there is one.
---@param buf integer?
---@return vim.lsp.Client?
function M.client(buf)
  local clients = vim.lsp.get_clients({ name = M.name, bufnr = buf })
  return clients[1]
end

local function server_settings()
  local settings = vim.deepcopy(M.config.settings or {})
  local token = M.config.token or vim.env.DLM_LSP_TCP_TOKEN
  if M.config.server and token and token ~= '' then
    settings.token = token -- the shared server checks it, then drops it from the settings
  end
  return next(settings) ~= nil and settings or vim.empty_dict()
end

--- Each client's :DlmRetryLoad requests out, and the server's messages meanwhile
--- (`on_show_message`): client id -> { out = count, messages = { handler args } }.
local retrying = {}

--- `window/showMessage`, as Neovim shows it, except while a :DlmRetryLoad of this client
--- is out: the server says a failed load in an error message just before it answers, and
--- the answer says that failure too, with when it is tried next (`retry_load`).  Shown,
--- the user read the same error twice for one retry.
local function on_show_message(err, params, ctx, config)
  local held = retrying[ctx.client_id]
  if not held then
    return vim.lsp.handlers['window/showMessage'](err, params, ctx, config)
  end
  held.messages[#held.messages + 1] = { err, params, ctx, config }
end

--- `dlm/draft`: show the span as it stands while the fill denoises.
local function on_draft(_, params)
  if not M.config.draft_preview or not params or not params.textDocument then
    return
  end
  -- (an unnamed buffer's too: vim.uri_to_bufnr gave a buffer of `/`, where no draft showed)
  local buf = edits.loaded_buffer(params.textDocument.uri)
  if not buf then
    return
  end
  local version = params.textDocument.version
  if version ~= nil and version ~= vim.NIL and vim.lsp.util.buf_versions[buf] ~= version then
    return -- a draft for text that is no longer there
  end
  local client = M.client(buf)
  local row = params.range['end'].line
  local ok, col = pcall(vim.lsp.util._get_line_byte_from_position, buf, params.range['end'],
    client and client.offset_encoding or 'utf-16')
  if not ok then
    col = params.range['end'].character -- a private helper that may move: ASCII columns agree
  end
  local label = params.text:gsub('\r?\n', ' ⏎ ')
  -- in characters, not bytes: a draft's masked tokens are `░`, three bytes each, and a cut
  -- at a byte count left part of one (shown as <e2><96>)
  if vim.fn.strchars(label) > 80 then
    label = vim.fn.strcharpart(label, 0, 79) .. '…'
  end
  api.nvim_buf_clear_namespace(buf, draft_ns, 0, -1)
  pcall(api.nvim_buf_set_extmark, buf, draft_ns, row, col, {
    virt_text = { { ' ' .. label, 'Comment' }, { (' %d/%d'):format(params.step, params.steps), 'NonText' } },
    virt_text_pos = 'eol',
  })
end

local function clear_draft(buf)
  if api.nvim_buf_is_valid(buf) then
    api.nvim_buf_clear_namespace(buf, draft_ns, 0, -1)
  end
end

--- The suggestions' requests (ghost text, Neovim's own or ours, and completion items).
local SUGGESTIONS = { ['textDocument/inlineCompletion'] = true, ['textDocument/completion'] = true }

--- With `drafts = true` the server previews a suggestion's fill as it does a command's:
--- clear the preview once the suggestion is answered or cancelled, as the commands'
--- callbacks do theirs (it stayed at the line's end, `… 8/8`, until the next command).
--- A server that exits mid-fill answers nothing, and no callback runs: its client's
--- detach clears the preview (it stayed, `n ░░ 3/8`, over a fill that would never come).
local function clear_drafts_when_done(client, buf)
  local group = api.nvim_create_augroup(('dlm.draft.%d'):format(buf), { clear = true })
  api.nvim_create_autocmd('LspRequest', {
    group = group,
    buffer = buf,
    callback = function(args)
      local request = args.data.request
      if args.data.client_id == client.id and request.type ~= 'pending'
        and SUGGESTIONS[request.method] then
        clear_draft(buf)
      end
    end,
  })
  api.nvim_create_autocmd('LspDetach', {
    group = group,
    buffer = buf,
    callback = function(args)
      if args.data.client_id == client.id then
        clear_draft(buf)
      end
    end,
  })
end

--- 'HOST:PORT' as host and port, or nil and why not.
---@param address string
function M.parse_address(address)
  local host, port = tostring(address):match('^(.+):(%d+)$')
  if not host or tonumber(port) > 65535 then
    return nil, nil, ('server = %q is not HOST:PORT (e.g. "127.0.0.1:2087")'):format(address)
  end
  return host:gsub('^%[(.*)%]$', '%1'), tonumber(port)
end

--- Why the shared server refused this editor's `initialize` (wrong token, too many clients).
M.refused = nil

--- The address and token the shared server refused (connection_key()).  A buffer opened
--- later does not ask it again: a refusal is one connection and one message, not one per
--- buffer.  Only the user asks again: :DlmRestart, setup(), configure() or :checkhealth.
local refused_for = nil

--- What decides whether a shared server serves this editor: where it is and the token sent.
local function connection_key()
  return ('%s %s'):format(M.config.server, M.config.token or vim.env.DLM_LSP_TCP_TOKEN or '')
end

--- Wrap an RPC `cmd` so that an `initialize` refused by a shared server is one clear message.
--- Neovim 0.11 asserts on an `initialize` error, which prints a Lua traceback naming its own
--- client.lua and not what to do; a shared server refuses a wrong token (-32006) and clients
--- past its --max-clients that way.  The connection is closed instead, so the client stops.
---@param connect fun(dispatchers: table): table
---@param address string
---@param key string? connection_key() of this connection, remembered when it is refused
---@param quiet boolean? only remembered (M.refused), not said: :checkhealth says it in its
--- report, and an error message said during `vim.cmd('checkhealth dlm')` aborted it
function M.refusal_reported(connect, address, key, quiet)
  return function(dispatchers)
    local rpc = connect(dispatchers)
    local request = rpc.request
    rpc.request = function(method, params, callback, notify_reply_callback)
      if method == 'initialize' then
        local answer = callback
        callback = function(err, result)
          if not err then
            M.refused, refused_for = nil, nil
            return answer(err, result)
          end
          local retry = err.code == -32006
            and 'set the token it was started with (setup{ token = ... } or $DLM_LSP_TCP_TOKEN), then :DlmRestart'
            or ':DlmRestart tries again'
          -- the server's own advice for a missing token names the LSP field; the plugin's
          -- (`retry`) names its setting
          local why = tostring(err.message or err):gsub(':%s*set it in the editor %b()$', '')
          M.refused = and_then(('the shared server at %s refused this editor: %s'):format(
            address, why), retry)
          refused_for = key
          if not quiet then
            vim.notify('dlm: ' .. M.refused, vim.log.levels.ERROR)
          end
          rpc.terminate()
        end
      end
      return request(method, params, callback, notify_reply_callback)
    end
    return rpc
  end
end

--- Why the server command cannot start: its executable is not found, or it exited before
--- it answered `initialize` (M.missing says which).
M.missing = nil

--- The `cmd` (cmd_key()) whose executable was not found, or that exited before it started.
--- As with a refusing shared server, a buffer opened later does not try it again (Neovim
--- said "Spawning language server ... failed" once per buffer opened, and again per open
--- buffer on :DlmRestart; a `cmd` that exits at once, `dlm-lsp` installed without torch,
--- started a process per buffer, each "Client dlm quit with exit code 1"): one message,
--- ours, naming the command and the fix.  :DlmRestart, setup() and configure() try again.
local missing_for = nil

local function cmd_key()
  return vim.inspect(M.config.cmd)
end

--- Whether `cmd` can be started; when its executable is not found, say so (once per `cmd`
--- until the user tries again) and what to do.  A `cmd` that is not a list of strings (a
--- function) is the user's own: Neovim says what it could not start.
local function startable()
  local cmd = M.config.cmd
  if missing_for ~= nil and missing_for == cmd_key() then
    return false
  end
  if type(cmd) ~= 'table' or type(cmd[1]) ~= 'string' or vim.fn.executable(cmd[1]) == 1 then
    missing_for, M.missing = nil, nil
    return true
  end
  M.missing = ('the server command `%s` is not found (not on PATH, or not executable): '
    .. 'install dlm-lsp, or give its path: setup{ cmd = { "/path/to/.venv/bin/dlm-lsp" } }; '
    .. 'then :DlmRestart'):format(cmd[1])
  missing_for = cmd_key()
  -- said once the autocommand that got here is over: an error message said inside the
  -- FileType autocommand, which filetype detection runs through nvim_cmd, is raised as a Lua
  -- error, and opening the file showed a traceback around it
  local said = 'dlm: ' .. M.missing
  vim.schedule(function() vim.notify(said, vim.log.levels.ERROR) end)
  return false
end

--- The `on_exit` of a client started from `cmd`: a server that exited before it answered
--- `initialize`, and not because the editor stopped it (:DlmRestart while it starts: the
--- server ends with 143 on that SIGTERM), is remembered as a `cmd` not found is, and said
--- once.  Run from the process's exit callback: nothing there but Lua.
---@param key string cmd_key() of the command the client started
local function on_exit_before_start(key, cmd)
  return function(code, signal, client_id)
    local client = vim.lsp.get_client_by_id(client_id)
    -- `_is_stopping`: Neovim's own mark of a client:stop(), private (none public in 0.11)
    if client and (client.initialized or client._is_stopping)
      or code == 0 and (signal == 0 or signal == 15) then
      return
    end
    missing_for = key
    M.missing = ('the server command `%s` exited (code %d, signal %d) before it started: run '
      .. 'it in a terminal to see why (or :LspLog), fix it, then :DlmRestart'):format(
        table.concat(cmd, ' '), code, signal)
    local said = 'dlm: ' .. M.missing
    vim.schedule(function() vim.notify(said, vim.log.levels.ERROR) end)
  end
end

--- The `on_exit` of a client: a server that goes away while in use, not stopped by the
--- editor, is said, with what brings it back.  One that exited with status 0 (a SIGTERM
--- from outside, when idle) or a shared server that closed the connection was not said
--- at all: the suggestions stopped and the statusline went blank, and only the next
--- command said "no dlm-lsp server attached".  Neovim says one that ends with another
--- status itself ("Client dlm quit with exit code 1"), but not what to do.
---@param before_start function? the `on_exit` for an exit before `initialize` was answered
local function on_exit(before_start)
  return function(code, signal, client_id)
    local client = vim.lsp.get_client_by_id(client_id)
    if client and client.initialized and not client._is_stopping then
      local what = M.config.server
        and ('the shared dlm-lsp server %s closed the connection'):format(M.config.server)
        or ('the dlm-lsp server exited (code %d, signal %d)'):format(code, signal)
      local said = ('dlm: %s; %s'):format(what, restart_does())
      vim.schedule(function() vim.notify(said, vim.log.levels.WARN) end)
    elseif before_start then
      before_start(code, signal, client_id)
    end
  end
end

--- Whether `server` is set and no HOST:PORT.  Then it is said once, as a refusal is
--- (M.refused, `refused_for`), and no buffer is attached until the user names another
--- (setup(), :DlmRestart): an error() in setup() stopped the user's init.lua with a Lua
--- traceback and left no command defined (`:DlmStatus` was "Not an editor command").
local function bad_address()
  if not M.config.server then
    return false
  end
  local _, _, why = M.parse_address(M.config.server)
  if not why then
    return false
  end
  if refused_for ~= connection_key() then
    M.refused, refused_for = why .. ': fix setup{ server }', connection_key()
    local said = 'dlm: ' .. M.refused
    vim.schedule(function() vim.notify(said, vim.log.levels.ERROR) end)
  end
  return true
end

--- How to reach the server: a connection to `server` when set, else the command `cmd`.
local function server_cmd(quiet)
  if M.config.server then
    local host, port, why = M.parse_address(M.config.server)
    if not host then
      error('dlm: ' .. why)
    end
    return M.refusal_reported(vim.lsp.rpc.connect(host, port), ('%s:%d'):format(host, port),
      connection_key(), quiet)
  end
  return M.config.cmd
end

--- Tell `client` the server settings as they are now.  None is an empty object: an empty
--- Lua table went as `[]`, which the server took for a mistake ("settings 'dlm' should
--- be an object, got []; ignored").
local function notify_settings(client)
  local settings = M.config.settings or {}
  client:notify('workspace/didChangeConfiguration',
    { settings = { dlm = next(settings) ~= nil and settings or vim.empty_dict() } })
end

--- The vim.lsp.start() config for this plugin's settings (also used by :checkhealth, with
--- `quiet`: a shared server's refusal is in its report, not said beside it).
---@param overrides table?
---@param quiet boolean?
function M.lsp_config(overrides, quiet)
  local sent = vim.deepcopy(M.config.settings or {})
  return vim.tbl_extend('force', {
    name = M.name,
    cmd = debounce.cmd(server_cmd(quiet), M.config.completion.debounce_ms),
    init_options = server_settings(),
    -- settings changed while the server started (3-7 s) went to no client (only one that
    -- answered `initialize` is sent them): the server ran on those of its start
    on_init = function(client)
      if not vim.deep_equal(sent, M.config.settings or {}) then
        notify_settings(client)
      end
    end,
    handlers = {
      ['workspace/applyEdit'] = edits.apply_workspace_edit,
      ['dlm/draft'] = on_draft,
      ['window/showMessage'] = on_show_message,
    },
  }, overrides or {})
end

-- When each client was started (vim.uv.now(), ms), and how long a start may take before
-- a command says it looks stuck rather than slow.
local started_at = {} ---@type table<integer, integer>
local STARTING_S = 30

--- When the client that is starting (not yet initialized) was started; nil if none is.
--- (vim.lsp.get_clients() lists a client only once it is initialized.)
local function starting()
  for id, at in pairs(started_at) do
    local client = vim.lsp.get_client_by_id(id)
    if not client or client:is_stopped() then
      started_at[id] = nil
    elseif not client.initialized then
      return at
    end
  end
  return nil
end

--- The plugin's client that has started and not yet answered `initialize`, if any:
--- :checkhealth waits for it (it started a second server, a second model in memory).
---@return vim.lsp.Client?
function M.starting_client()
  for id in pairs(started_at) do
    local client = vim.lsp.get_client_by_id(id)
    if client and client.name == M.name and not client:is_stopped() and not client.initialized then
      return client
    end
  end
  return nil
end

--- Start (or reuse) the server for `buf` and attach to it; nothing when the shared server
--- refused this address and token already (M.refused says why), or when the executable of
--- `cmd` is not found or it exited before it started (M.missing says which).
---@param buf integer
---@return integer? client_id
function M.attach(buf)
  if M.config.server and (bad_address() or refused_for == connection_key()) then
    return nil
  end
  if not M.config.server and not startable() then
    return nil
  end
  local root = vim.fs.root(buf, M.config.root_markers) or vim.fn.getcwd()
  local cmd = M.config.cmd
  local id = vim.lsp.start(M.lsp_config({
    root_dir = root,
    on_exit = on_exit(not M.config.server and type(cmd) == 'table'
      and on_exit_before_start(cmd_key(), cmd) or nil),
    on_attach = function(client, bufnr)
      vim.b[bufnr].dlm_uri = vim.uri_from_bufnr(bufnr) -- see reopen_renamed
      ghost.attach(client, bufnr, M.config.inline)
      completion.attach(client, bufnr)
      clear_drafts_when_done(client, bufnr)
    end,
  }), {
    bufnr = buf,
    -- one server for every buffer, whatever its root: the server reads none, and Neovim's
    -- own rule (a client per root) started a second process (a second model in memory,
    -- loaded again) or a second connection to a shared server (one more of its
    -- --max-clients) for a file of another project
    reuse_client = function(client, config)
      return client.name == config.name and not client:is_stopped()
    end,
  })
  if id and not started_at[id] then
    started_at[id] = vim.uv.now()
  end
  return id
end

--- A buffer the server has open, given another name (`:file NAME`, `:saveas`): it is
--- closed under the old URI and opened under the new one now.  Neovim does that only once
--- the buffer is written, and its edits went meanwhile to a URI the server had never been
--- told of: every fill said "document ... is not open" (and the documented way to tell
--- two unnamed buffers apart, `:file NAME`, did not work until `:w`).  Neovim is told the
--- new name is known (a private function of 0.11: where it is gone, the write opens it
--- again, which does no harm).
---@param buf integer
local function reopen_renamed(buf)
  local function full_text(b) -- as Neovim sends it: its line breaks, the last one kept
    local eol = ({ dos = '\r\n', mac = '\r' })[vim.bo[b].fileformat] or '\n'
    local text = table.concat(api.nvim_buf_get_lines(b, 0, -1, false), eol)
    return vim.bo[b].eol and text .. eol or text
  end
  local client = M.client(buf)
  local old = vim.b[buf].dlm_uri
  local uri = vim.uri_from_bufnr(buf)
  if not client or not old or old == uri then
    return
  end
  vim.b[buf].dlm_uri = uri
  if #edits.loaded_buffers(old, client) == 0 then -- another unnamed buffer keeps `file://`
    client:notify('textDocument/didClose', { textDocument = { uri = old } })
  end
  client:notify('textDocument/didOpen', { textDocument = {
    uri = uri,
    languageId = client.get_language_id(buf, vim.bo[buf].filetype),
    version = vim.lsp.util.buf_versions[buf] or 0,
    text = full_text(buf),
  } })
  local ok, changetracking = pcall(require, 'vim.lsp._changetracking')
  if ok and type(changetracking._get_and_set_name) == 'function' then
    pcall(changetracking._get_and_set_name, client, buf, api.nvim_buf_get_name(buf))
  end
end

--- Attach every loaded buffer of the configured filetypes (those attached already keep
--- their client).
--- Whether the plugin attaches to `buf` by itself: a buffer of one of its filetypes that
--- holds a file (or is to: an unnamed one), as Neovim's own vim.lsp.enable() takes them.
--- A picker's preview (a scratch buffer given the file's filetype), a fugitive:// buffer
--- or a help page were sent to the server too: every preview a didOpen, and unnamed
--- previews, all `file://`, made a real unnamed buffer's fills refused ("N buffers share
--- the URI file://").  `require('dlm').attach(buf)`, called by the user, takes any buffer.
---@param buf integer
---@return boolean
local function attachable(buf)
  return vim.bo[buf].buftype == '' and vim.tbl_contains(M.config.filetypes, vim.bo[buf].filetype)
end

local function attach_loaded()
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) and attachable(buf) then
      M.attach(buf)
    end
  end
end

--- Tell the running server the plugin's settings (it changes those they name).
local function send_settings()
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    notify_settings(client)
  end
end

--- Send new server settings (merged into the current ones) to the running server; after a
--- shared server refused this editor, a settings change asks it again.
function M.configure(settings)
  M.config.settings = vim.tbl_extend('force', M.config.settings or {}, settings or {})
  send_settings()
  if refused_for or missing_for then
    refused_for, missing_for = nil, nil
    attach_loaded()
  end
end

--- :DlmRestart — stop the server (or the connection to a shared one) and start it again for
--- every loaded buffer of the configured filetypes: after a shared server refused this editor
--- (a wrong token, or its --max-clients reached), after the server exited or its executable
--- was not found, or after installing a new version.
function M.restart()
  refused_for, missing_for = nil, nil
  local clients = vim.lsp.get_clients({ name = M.name })
  -- and those that never answered `initialize`, which get_clients() leaves out: the
  -- plugin's own advice for a server that hangs there is :DlmRestart, which stopped
  -- nothing, and vim.lsp.start() then reused the hung client
  for id in pairs(started_at) do
    local client = vim.lsp.get_client_by_id(id)
    if client and client.name == M.name and not client.initialized then
      clients[#clients + 1] = client
    end
  end
  for _, client in ipairs(clients) do
    client:stop()
  end
  -- wait until they are gone: an old client detaching from a buffer after the new one
  -- attached would take the buffer's ghost text with it (LspDetach)
  local function gone()
    return vim.iter(clients):all(function(client) return not vim.lsp.get_client_by_id(client.id) end)
  end
  if not vim.wait(3000, gone, 20) then
    for _, client in ipairs(clients) do
      client:stop(true)
    end
    vim.wait(1000, gone, 20)
  end
  attach_loaded()
end

--- The buffer's dlm client, or nil after saying why there is none and what to do.
local function require_client(buf)
  local client = M.client(buf)
  if client then
    return client
  end
  local filetype = vim.bo[buf].filetype
  if not vim.tbl_contains(M.config.filetypes, filetype) then
    notify(('no dlm-lsp server for this buffer: filetype %s is not in setup{ filetypes }'):format(
      filetype == '' and '(none)' or filetype), vim.log.levels.WARN)
  elseif M.config.server and refused_for then
    notify(M.refused, vim.log.levels.WARN) -- left unattached: the shared server refused us
  elseif not M.config.server and missing_for then
    notify(M.missing, vim.log.levels.WARN) -- left unattached: `cmd` is not found
  elseif starting() then
    -- attached only once `initialize` is answered (3-7 s for the server's imports): "it
    -- exited, or did not start; :DlmRestart starts it" sent the user to kill a good start
    local waited = math.floor((vim.uv.now() - starting()) / 1000)
    if waited < STARTING_S then
      notify(('dlm-lsp is still starting (%d s); try again in a moment'):format(waited),
        vim.log.levels.WARN)
    else -- `cmd = { "python" }`: a process that reads its input and never answers
      notify(('dlm-lsp has not answered `initialize` in %d s: is setup{ cmd } the server? '
        .. '(:checkhealth dlm); '):format(waited) .. restart_does(), vim.log.levels.WARN)
    end
  else
    notify('no dlm-lsp server attached to this buffer (it exited, or did not start); '
      .. restart_does(), vim.log.levels.WARN)
  end
end

--- "rewrote lines 4-5": the lines of `range` (0-based, its end exclusive), which the
--- rewrite's `text` replaced, and where they differ in number the lines the text now
--- takes.  It counted the new text's lines alone: two lines rewritten as one said
--- "rewrote line 42", and a text ending in a line break one line more.
---@param range table
---@param text string
local function rewrote(range, text)
  local function lines(first, last)
    return first == last and ('line %d'):format(first) or ('lines %d-%d'):format(first, last)
  end
  local first = range.start.line + 1
  local last = range['end'].line + 1
  if range['end'].character == 0 and last > first then
    last = last - 1 -- a selection of whole lines ends at the start of the next
  end
  local count = #vim.split(text, '\n', { plain = true })
  if text:sub(-1) == '\n' and count > 1 then
    count = count - 1
  end
  local said = 'rewrote ' .. lines(first, last)
  if count ~= last - first + 1 then
    said = said .. (' (now %s)'):format(lines(first, first + count - 1))
  end
  return said
end

--- Warn of applied fills the syntax check rejected: an explicit fill is applied even when
--- no candidate parsed (the best is still a draft worth editing), so the user must be told
--- to look.  `valid` is a candidate's verdict, or dlm.fillHoles' list of them; nil (JSON
--- null) means unchecked.
local function warn_unparsed(valid)
  local verdicts = type(valid) == 'table' and valid or { valid }
  local bad = #vim.tbl_filter(function(v) return v == false end, verdicts)
  if bad == 0 then
    return
  end
  -- "does not parse" was wrong for most: the names check (a name nothing defines), the
  -- calls' and the others reject code that parses and would fail when run
  local what = #verdicts == 1
    and 'the check rejected the fill (it does not parse, or would fail when run)'
    or ('the check rejected %d of %d fills (they do not parse, or would fail when run)'):format(
      bad, #verdicts)
  notify(what .. '; u undoes it', vim.log.levels.WARN)
end

--- Say what an error answer to an explicit command means.  -32800 (cancelled or
--- superseded) is the user's own doing: nothing.  -32801 (the buffer changed) is no error
--- either, but said as the plugin's own stale check says it ("fill dropped: ..."), so the
--- same event reads the same whichever side noticed it first.  -32001 (the model failed
--- to load) names the command that loads it again once the cause is fixed.
local function report_error(err)
  if err.code == -32801 then
    notify(err.message)
  elseif err.code == -32001 then
    notify(and_then(err.message, M.retry_advice(nil)), vim.log.levels.WARN)
  elseif err.code ~= -32800 then
    notify(err.message, vim.log.levels.WARN)
  end
end

--- Fill `range` (an LSP range) of `buf` with dlm/infill and apply the edit if still fresh.
---@param buf integer
---@param range lsp.Range
---@param opts { options: table?, on_done: fun(applied: boolean, result: table?)? }?
function M.infill(buf, range, opts)
  opts = opts or {}
  local client = require_client(buf)
  if not client then
    return
  end
  local uri = vim.uri_from_bufnr(buf)
  local sharing = #edits.loaded_buffers(uri, client)
  if sharing > 1 then -- the server's text of the URI is every such buffer's edits mixed
    notify(edits.shared_uri(sharing, uri), vim.log.levels.WARN)
    return opts.on_done and opts.on_done(false, nil)
  end
  local snap = edits.snapshot(buf)
  local params = {
    textDocument = { uri = uri, version = snap.version },
    range = range,
    options = opts.options,
  }
  client:request('dlm/infill', params, function(err, result)
    clear_draft(buf)
    local function done(applied)
      if opts.on_done then
        opts.on_done(applied, result)
      end
    end
    if err then
      report_error(err)
      return done(false)
    end
    local why = edits.stale(snap, result.version)
    if why then
      notify('fill dropped: ' .. why)
      return done(false)
    end
    if #result.edits == 0 and result.message then -- whitespace only, in place of code
      notify(nothing_applied(result.message), vim.log.levels.WARN)
      return done(false)
    end
    vim.lsp.util.apply_text_edits(result.edits, buf, client.offset_encoding)
    local s = result.stats or {}
    local blank = vim.iter(result.edits):all(function(e) return not e.newText:find('%S') end)
    if blank then
      -- only a hole's marker is replaced by blanks (the server applies none in place of
      -- code or at a cursor): said as :DlmFillHoles says it, a warning, seen with
      -- `notify = false`; it read "filled 0 tokens", or nothing at all
      notify(holes_filled(1, 1) .. '; u undoes it', vim.log.levels.WARN)
    else
      -- `used` leaves out the tokens that spell the text before the cursor, which the model
      -- was given: a fill of `a` after `return ` read "filled 0 tokens" from servers
      -- before 2026-12-07, which counted its ` a` as the text's
      local tokens = s.used ~= 0 and s.used or nil
      local what = tokens and ('filled %d token%s'):format(tokens, tokens == 1 and '' or 's')
        or 'filled'
      notify(('%s in %s steps, %s ms (%s)'):format(what, s.steps or '?', s.ms or '?',
        s.path or s.kind or ''))
    end
    warn_unparsed((result.candidates or {})[1] and result.candidates[1].valid)
    done(true)
  end, buf)
end

--- Why a block selection (CTRL-V) over several lines is not filled or rewritten.
local BLOCK_REFUSED = 'a block selection (CTRL-V) over several lines is not one span of text; '
  .. 'select with v or V (a one-line block is filled as it is)'

--- The range :DlmFill / :DlmRewrite act on: the visual selection when the command
--- was given it, the lines of a range typed (`:3DlmRewrite`, `:3,5DlmRewrite`), else nil.
--- `cmd` is the user command's argument table.  Neovim does not say where a range came
--- from; `:'<,'>`, which Visual mode's `:` puts in, is two addresses (`cmd.range` 2) that
--- are the marks' lines.  A count or a one-line address is one (`cmd.range` 1): those
--- lines, whatever selection was made before; `:3DlmRewrite` took an old selection's
--- characters on line 3 for it.  Two addresses that are the marks' lines, `:3,3DlmRewrite`
--- after a selection on line 3, are told from `:'<,'>` by the command line they were
--- typed on (`cmd.selection`, `typed_as_selection`).  The commands given no command line
--- (vim.cmd('3,3DlmRewrite'), a `<Cmd>` mapping with a range, nvim_cmd) are given
--- `selection = false` (`selection_given`): the lines named.  So is a Lua call of M.fill
--- or M.rewrite with a range and no `selection = true` (`as_command`).
--- A fill takes one span of text, and a block over several lines is a column of pieces:
--- as a span from its top-left to its bottom-right corner it took in the text right of
--- the block on its first line and left of it on the others, which the user did not
--- select, and rewrote it.  So such a block gives nil and why not (a one-line block is a
--- span: filled).
---@return lsp.Range?, string?
local function selection_range(buf, cmd, encoding)
  if cmd.range == 0 then
    return nil
  end
  local vstart, vend = api.nvim_buf_get_mark(buf, '<'), api.nvim_buf_get_mark(buf, '>')
  local visual = cmd.range == 2 and vstart[1] == cmd.line1 and vend[1] == cmd.line2
    and cmd.selection == true
  if visual and vim.fn.visualmode() == '\22' and vstart[1] ~= vend[1] then
    return nil, BLOCK_REFUSED
  end
  local charwise = visual and vim.fn.visualmode() ~= 'V'
  if charwise then
    local last = api.nvim_buf_get_lines(buf, vend[1] - 1, vend[1], false)[1] or ''
    local char_end = vend[2] < #last and vim.str_utf_end(last, vend[2] + 1) + vend[2] + 1 or #last
    if vim.o.selection == 'exclusive' then
      char_end = math.min(vend[2], #last) -- `'>` is on the character after the selection
    end
    return edits.range(buf, vstart[1] - 1, vstart[2], vend[1] - 1, char_end, encoding)
  end
  local last = api.nvim_buf_get_lines(buf, cmd.line2 - 1, cmd.line2, false)[1] or ''
  return edits.range(buf, cmd.line1 - 1, 0, cmd.line2 - 1, #last, encoding)
end

--- The user command's argument table that a Lua call of M.fill or M.rewrite stands for:
--- `opts` as given, no range where it gives none (a mapping's `rewrite({ fargs = {
--- 'expand' } })` raised "attempt to perform arithmetic on field 'line2'").  A range
--- given names lines, as one given vim.cmd() does ("3,5DlmRewrite"): a script's or a
--- Normal-mode mapping's `rewrite({ range = 2, line1 = 3, line2 = 5 })` rewrote only
--- the characters of an old selection on lines 3-5 where the '< '> marks were left
--- there, which nothing on screen showed (or refused a block selection made there long
--- before).  `selection = true` asks for the marks' characters, as `:'<,'>` typed does;
--- called in Visual mode, a call with no range takes the selection shown (`command_range`).
---@param opts table?
local function as_command(opts)
  return vim.tbl_extend('keep', opts or {}, { range = 0, fargs = {} })
end

--- The command's range, or the live selection's: a `<Cmd>` mapping run in Visual mode
--- (`vim.keymap.set('x', '<leader>f', '<Cmd>DlmFill<CR>')`) gives the command no range,
--- and the selection's marks are not set yet.  The selection was ignored (the fill went in
--- at the cursor, the selection left shown): Visual mode is ended, which sets the marks,
--- and the selection taken, as `:'<,'>DlmFill` takes it.  So is a range that is the
--- marks' lines (`<Cmd>'<,'>DlmRewrite<CR>`): in Visual mode those are the selection
--- before this one, which is not shown (it rewrote lines 2-3 with 4-5 selected).  Other
--- lines named in Visual mode (`<Cmd>3,5DlmRewrite<CR>`) are those lines.
local function command_range(cmd)
  local mode = api.nvim_get_mode().mode
  if not (mode:find('^[vV]') or mode:find('^\22')) then
    return cmd
  end
  if cmd.range ~= 0 and not (cmd.range == 2 and cmd.line1 == api.nvim_buf_get_mark(0, '<')[1]
    and cmd.line2 == api.nvim_buf_get_mark(0, '>')[1]) then
    return cmd
  end
  vim.cmd.normal({ args = { vim.keycode('<Esc>') }, bang = true })
  local first, last = api.nvim_buf_get_mark(0, '<')[1], api.nvim_buf_get_mark(0, '>')[1]
  return vim.tbl_extend('force', cmd, { range = 2, line1 = first, line2 = last, selection = true })
end

--- The last `:` command line left to run (typed, or typed by a mapping's `:`), until the
--- command it runs takes it (`typed_as_selection`) or the event loop next turns: a user
--- command is given its range's lines, not how they were written, and CmdlineLeave,
--- just before the line runs, is where that text can still be read.  Neither
--- `histget(':', -1)` nor anything else kept after it will do: vim.cmd() and `<Cmd>`
--- mappings add no history, and the last entry would be an older command line's.
local left_cmdline

local function watch_cmdline()
  api.nvim_create_autocmd('CmdlineLeave', {
    group = api.nvim_create_augroup('dlm.cmdline', { clear = true }),
    callback = function()
      if vim.fn.getcmdtype() ~= ':' or vim.v.event.abort then
        return
      end
      local left = { text = vim.fn.getcmdline() }
      left_cmdline = left
      vim.schedule(function()
        if left_cmdline == left then -- not run (an error first), or not one of ours
          left_cmdline = nil
        end
      end)
    end,
  })
end

--- Whether the range of user command `cmd` was typed as the selection: true for `:'<,'>`
--- (what Visual mode's `:` types, also through a mapping such as `:DlmFill<CR>`) or
--- `:*`, false for other addresses (`:3,3`), nil where the command did not come from a
--- command line of its own (vim.cmd, a `<Cmd>` mapping, `:execute`), which cannot be told.
local function typed_as_selection(cmd)
  local left = left_cmdline
  left_cmdline = nil -- one command line, one command: a later vim.cmd() has none
  if not left then
    return nil
  end
  local ok, parsed = pcall(api.nvim_parse_cmd, left.text, {})
  if not ok or parsed.cmd ~= cmd.name then
    return nil
  end
  -- the addresses: what comes before the command's name (ours all start with `Dlm`),
  -- after any modifiers (`:silent '<,'>`, `:keepjumps *`: words, a count, a `!`)
  local name_at = left.text:find('Dlm', 1, true) or 1
  local addresses = left.text:sub(1, name_at - 1):gsub('[%s:]', '')
  return addresses:match("^[%w!]*'<,'>$") ~= nil or addresses:match('^[%w!]*%*$') ~= nil
end

--- Where a fill at the cursor goes in `line`.  In Insert mode (<Cmd>DlmFill<CR>) the cursor
--- sits between characters: there.  In Normal mode it sits on one, and can never be past the
--- line's end: `total = compute(` typed, <Esc>, :DlmFill leaves it on the `(`.  Filling
--- before that character would split the call, so on a line's last character the fill goes
--- after it (like `a`); elsewhere before it (like `i`).
local function insert_column(line, col)
  local mode = api.nvim_get_mode().mode
  if mode:sub(1, 1) == 'i' or mode:sub(1, 1) == 'R' or col >= #line then
    return col
  end
  local after = col + vim.str_utf_end(line, col + 1) + 1 -- the end of the character under it
  return after >= #line and #line or col
end

--- :DlmFill — the selection, else the hole marker on the cursor's line, else insert at the cursor.
--- From Lua `cmd` is optional, a user command's table (`as_command`): `range` 2 with
--- `line1`, `line2` (those lines; with `selection = true`, the last selection's
--- characters), and `on_done(applied, result)`.
---@param cmd table?
function M.fill(cmd)
  local buf = api.nvim_get_current_buf()
  local client = require_client(buf)
  if not client then
    return
  end
  local encoding = client.offset_encoding
  local range, refused = selection_range(buf, command_range(as_command(cmd)), encoding)
  if refused then
    return notify(refused, vim.log.levels.WARN)
  end
  if not range then
    local row, col = unpack(api.nvim_win_get_cursor(0))
    local line = api.nvim_get_current_line()
    local marker = (M.config.settings or {}).holeMarker
    if type(marker) ~= 'string' then -- vim.NIL: set back to the server's default
      marker = '<FILL>'
    end
    local hs, he = edits.hole_near(line, col, marker)
    if hs then
      range = edits.range(buf, row - 1, hs, row - 1, he, encoding)
    else
      col = insert_column(line, col)
      range = edits.range(buf, row - 1, col, row - 1, col, encoding)
    end
  end
  M.infill(buf, range, cmd and cmd.on_done and { on_done = cmd.on_done } or nil)
end

--- Run a server command through workspace/executeCommand (its edit comes back as applyEdit).
--- A command that applied nothing is a warning, as `M.infill`'s fill of only whitespace is:
--- the user asked for a fill and got none (no holes, the model wrote only whitespace, two
--- unnamed buffers share the URI), and with `notify = false` an info message is never seen.
--- Only where the buffer changed since the command was given is it said as a dropped fill
--- is, at info level: the user's own typing, as `report_error` says -32801.
local function execute(buf, command, arguments, on_done)
  local client = require_client(buf)
  if not client then
    return
  end
  local snap = edits.snapshot(buf)
  client:request('workspace/executeCommand', { command = command, arguments = arguments },
    function(err, result)
      clear_draft(buf)
      if err then
        report_error(err)
      elseif result and result.applied == false then
        local typed = edits.stale(snap) ~= nil
        notify(nothing_applied(result.message
          or (typed and 'the buffer changed meanwhile' or 'the edit was not applied')),
          not typed and vim.log.levels.WARN or nil)
      elseif result and result.holes then
        -- a blank fill is applied (nothing may be what goes in a hole), and was said as
        -- "filled 1 hole" like one with code; every hole blank is a fill asked for and
        -- none got: a warning, which `notify = false` still shows
        local blank = result.blank or 0
        notify(holes_filled(result.holes, blank),
          blank > 0 and blank == result.holes and vim.log.levels.WARN or nil)
      elseif result and result.applied and type(result.range) == 'table' then
        -- a rewrite said nothing once done, though it takes seconds on a CPU
        notify(rewrote(result.range, result.text or ''))
      end
      if result and result.applied then
        warn_unparsed(result.valid)
      end
      if on_done then
        on_done(err, result)
      end
    end, buf)
end

--- :DlmRewrite [expand] — regenerate the selection (or the cursor's line).  From Lua as
--- M.fill, with `fargs = { 'expand' }` (or `bang = true`) and `on_done(err, result)`.
---@param cmd table?
function M.rewrite(cmd)
  cmd = command_range(as_command(cmd))
  for _, arg in ipairs(cmd.fargs or {}) do
    if arg ~= 'expand' then -- `:DlmRewrite foo` ran as a plain rewrite
      return notify((':DlmRewrite takes expand or nothing, not %s'):format(arg),
        vim.log.levels.WARN)
    end
  end
  local buf = api.nvim_get_current_buf()
  local client = require_client(buf)
  if not client then
    return
  end
  local range, refused = selection_range(buf, cmd, client.offset_encoding)
  if refused then
    return notify(refused, vim.log.levels.WARN)
  end
  if not range then
    local row = api.nvim_win_get_cursor(0)[1]
    range = edits.range(buf, row - 1, 0, row - 1, #api.nvim_get_current_line(), client.offset_encoding)
  end
  local expand = vim.tbl_contains(cmd.fargs or {}, 'expand') or cmd.bang == true
  -- the version the range is of: an edit that reaches the server first makes it refuse the
  -- rewrite instead of rewriting other text
  local target = { uri = vim.uri_from_bufnr(buf), range = range, expand = expand,
    version = edits.snapshot(buf).version }
  execute(buf, 'dlm.rewriteSelection', { target }, cmd.on_done)
end

--- :DlmFillHoles — fill every hole marker of the buffer in one edit.
function M.fill_holes(on_done)
  local buf = api.nvim_get_current_buf()
  execute(buf, 'dlm.fillHoles', { vim.uri_from_bufnr(buf) }, on_done)
end

--- :DlmStatus — the server's dlm/status, printed.
function M.status()
  local client = require_client(api.nvim_get_current_buf())
  if not client then
    return
  end
  client:request('dlm/status', vim.empty_dict(), function(err, result)
    if err then
      return notify(err.message, vim.log.levels.WARN)
    end
    -- JSON null arrives as nil (not vim.NIL) in a response's fields
    if type(result.loadError) == 'string' then
      return vim.notify(and_then(('dlm-lsp: model %s failed to load: %s'):format(result.model,
        result.loadError), M.retry_advice(result.loadRetryS)), vim.log.levels.ERROR)
    end
    vim.notify(('dlm-lsp: model %s (%s) on %s, p50 %s ms over %s fills'):format(
      result.model, result.loaded and 'loaded' or 'loading', result.device,
      type(result.p50Ms) == 'number' and result.p50Ms or '-', result.fills or 0))
  end)
end

--- When the server tries a failed load again (`loadRetryS` of dlm/status: seconds, 0 at
--- the next request) and how not to wait: a user who reads "failed to load" fixes the
--- cause (a path, a download, memory) and then wants the model, not a minute's wait for
--- the server's own retry or a :DlmRestart that starts the whole server again.
---@param retry_s number? loadRetryS; nil where the status has none
---@return string
function M.retry_advice(retry_s)
  local when = ''
  if type(retry_s) == 'number' then
    when = retry_s <= 0 and 'tried again at the next request; '
      or ('tried again in %d s; '):format(math.ceil(retry_s))
  end
  return when .. 'once it is fixed, :DlmRetryLoad loads it now'
end

--- What the answer to dlm/retryLoad (a dlm/status) says, and how loud: the model loaded
--- and where, or why it failed again.
---@return string, integer
local function retried(result)
  if type(result.loadError) == 'string' then
    return and_then(('dlm-lsp: model %s failed to load again: %s'):format(result.model,
      result.loadError), M.retry_advice(result.loadRetryS)), vim.log.levels.ERROR
  end
  if result.loaded then
    return ('dlm-lsp: model %s loaded on %s'):format(result.model, tostring(result.device)),
      vim.log.levels.INFO
  end
  return ('dlm-lsp: model %s is not loaded (device %s)'):format(result.model,
    tostring(result.device)),
    vim.log.levels.WARN
end

--- :DlmRetryLoad — ask the server to load its model now (`dlm/retryLoad`), after a failed
--- load was fixed, and say how it went.  The server answers once the load is over, which
--- for a big model on a CPU is a minute or more (and, asked while a load is under way,
--- once that one ends): the request is asynchronous, the editor goes on meanwhile, and
--- the answer is said when it comes, also with `notify = false` (the user asked).  The
--- current buffer's client is asked, else every dlm client (the command is given from
--- any buffer: the log, a help page); with none, why there is none.
function M.retry_load()
  local buf = api.nvim_get_current_buf()
  local clients = vim.lsp.get_clients({ name = M.name, bufnr = buf })
  if #clients == 0 then
    clients = vim.lsp.get_clients({ name = M.name })
  end
  if #clients == 0 then
    local why = M.config.server and refused_for and M.refused
      or not M.config.server and missing_for and M.missing
      or 'no dlm-lsp server is running (none started yet, or it exited); ' .. restart_does()
    return notify(why, vim.log.levels.WARN)
  end
  for _, client in ipairs(clients) do
    notify(('loading the model again (client %d)'):format(client.id))
    local held = retrying[client.id] or { out = 0, messages = {} }
    retrying[client.id], held.out = held, held.out + 1
    local function answered(result)
      held.out = held.out - 1
      if held.out > 0 then
        return
      end
      retrying[client.id] = nil
      -- the answer says its load's failure itself; any other message is shown now
      local failure = result and type(result.loadError) == 'string'
        and 'dlm-lsp: ' .. result.loadError
      for _, message in ipairs(held.messages) do
        if not (failure and message[2] and message[2].message == failure) then
          on_show_message(unpack(message, 1, 4))
        end
      end
    end
    local sent = client:request('dlm/retryLoad', vim.empty_dict(), function(err, result)
      answered(result)
      if err then
        return notify(err.message, vim.log.levels.WARN)
      end
      vim.notify(retried(result))
    end)
    if not sent then -- the client has stopped: no answer comes
      answered(nil)
    end
  end
end

--- Pause or resume the ghost text while typing, in every buffer (as copilot.vim's
--- `:Copilot disable`); `on` nil switches.  Returns whether suggestions are on.
---@param on boolean?
---@return boolean
function M.toggle(on)
  if ghost.mode(M.config.inline) == 'off' then
    notify('inline suggestions are off in setup (inline.enabled = false)', vim.log.levels.WARN)
    return false
  end
  if on == nil then
    on = ghost.paused
  end
  ghost.set_paused(not on)
  -- the answer to a command the user gave, shown even with notify = false (as :DlmStatus)
  vim.notify('dlm: inline suggestions ' .. (on and 'on' or 'paused'))
  return on
end

--- A statusline component, e.g. `vim.o.statusline = '%f %=%{v:lua.require("dlm").statusline()}'`
--- or lualine's `{ require('dlm').statusline }`: '' where dlm is not attached to the
--- buffer, 'dlm: paused' while :DlmToggle has paused ghost text, 'dlm: …' while a
--- suggestion is being asked for (on a CPU that takes a noticeable while), else 'dlm'.
---@param buf integer?
---@return string
function M.statusline(buf)
  -- lualine calls a component with its own table first: anything but a buffer number is
  -- the current buffer
  buf = (type(buf) ~= 'number' or buf == 0) and api.nvim_get_current_buf() or buf
  if not M.client(buf) then
    return ''
  end
  if ghost.paused then
    return 'dlm: paused'
  end
  return ghost.pending(buf) and 'dlm: …' or 'dlm'
end

--- Whether the range given user command `cmd` is the selection: as its command line says
--- (`typed_as_selection`), else not.  A range given with no command line of its own
--- (vim.cmd('3,3DlmRewrite'), `<Cmd>3,3DlmRewrite<CR>` in Normal mode, nvim_cmd) names
--- lines outright, and they are rewritten whole: read as the selection where they were
--- the last selection's lines, they rewrote only the characters selected there long
--- before, which nothing on screen showed.  `'<,'>` given so (vim.cmd("'<,'>DlmRewrite"))
--- cannot be told from them, and is those lines too; a Visual-mode mapping still takes
--- the selection shown (`command_range`), and so does `:'<,'>` typed.
local function selection_given(cmd)
  return typed_as_selection(cmd) == true
end

local function create_commands()
  watch_cmdline()
  api.nvim_create_user_command('DlmFill', function(cmd)
    cmd.selection = selection_given(cmd)
    M.fill(cmd)
  end, { range = true, desc = 'dlm-lsp: fill the selection, the hole at the cursor, or at the cursor' })
  api.nvim_create_user_command('DlmRewrite', function(cmd)
    cmd.selection = selection_given(cmd)
    M.rewrite(cmd)
  end, {
    range = true,
    bang = true,
    nargs = '?',
    complete = function()
      return { 'expand' }
    end,
    desc = 'dlm-lsp: rewrite the selection (expand / !: grow it to the enclosing block)',
  })
  api.nvim_create_user_command('DlmFillHoles', function()
    M.fill_holes()
  end, { desc = 'dlm-lsp: fill every <FILL> hole in the buffer' })
  api.nvim_create_user_command('DlmStatus', function()
    M.status()
  end, { desc = 'dlm-lsp: model, device and latency of the server' })
  api.nvim_create_user_command('DlmRetryLoad', function()
    M.retry_load()
  end, { desc = 'dlm-lsp: load the model now after a failed load (without the wait)' })
  api.nvim_create_user_command('DlmRestart', function()
    M.restart()
  end, { desc = 'dlm-lsp: stop the server (or connection) and start it again' })
  api.nvim_create_user_command('DlmToggle', function(cmd)
    local on = ({ on = true, off = false })[cmd.args]
    if on == nil and cmd.args ~= '' then
      return notify(':DlmToggle takes on, off or nothing, not ' .. cmd.args, vim.log.levels.ERROR)
    end
    M.toggle(on)
  end, {
    nargs = '?',
    complete = function()
      return { 'on', 'off' }
    end,
    desc = 'dlm-lsp: pause or resume ghost text (on / off; none: switch)',
  })
end

--- The user's Insert-mode mappings of the plugin's keys from before setup() (maparg()'s
--- dicts, {} for none), kept for a later setup() call, which finds the plugin's own.
local users_mappings = {}

--- The callbacks of the user's mappings the keys fall back to as <Cmd> calls (by index).
M._mapped_before = {}

--- What `key` did in Insert mode before the plugin mapped it, as a function giving the keys
--- an <expr> mapping returns for it; nil where it was not mapped (the key types itself).
--- A user's global mapping of <Tab> (a completion menu's, a snippet's jump) was replaced by
--- the accept key's, which typed a bare Tab wherever no suggestion was shown.
---@param key string
---@return (fun(): string)?
local function mapped_before(key)
  local before = vim.fn.maparg(key, 'i', false, true)
  if vim.startswith(before.desc or '', 'dlm-lsp') then
    before = users_mappings[key] or {} -- ours, of an earlier setup(): the user's from before it
  else
    users_mappings[key] = before
  end
  if vim.tbl_isempty(before) or before.buffer == 1 then
    return nil -- a buffer's own mapping is its own (it wins over ours)
  end
  local callback = before.callback
  if callback and before.expr ~= 1 then
    -- run as a <Cmd> mapping runs, after ours: called inside our <expr> mapping it was
    -- under the text lock, and a snippet's jump (`function() ls.expand_or_jump() end`,
    -- not an <expr> mapping) failed with E565
    M._mapped_before[#M._mapped_before + 1] = callback
    local run = ('<Cmd>lua require("dlm")._mapped_before[%d]()<CR>'):format(#M._mapped_before)
    return function()
      return vim.keycode(run)
    end
  end
  return function()
    local keys -- as typed (termcodes replaced)
    if callback then
      keys = callback()
      if type(keys) ~= 'string' then
        return '' -- it did its work
      end
      keys = before.replace_keycodes == 1 and vim.keycode(keys) or keys
    elseif before.expr == 1 then
      keys = vim.api.nvim_eval(before.rhs)
    else
      keys = vim.keycode(before.rhs)
    end
    if before.noremap == 1 then
      return keys -- as ours: not mapped again
    end
    -- A rhs that begins with its own lhs (`imap <expr> <Tab> pumvisible() ? "\<C-n>" :
    -- "\<Tab>"`) has that lhs typed as it is, and the rest mapped (`:h recursive_mapping`):
    -- fed mapped whole, the Tab came back to this mapping, and every Tab in Insert mode
    -- failed with E223 (recursive mapping).  Returned, it is not mapped again (ours is
    -- noremap), and goes ahead of what is fed.
    local lhs = vim.keycode(key)
    local own = vim.startswith(keys, lhs) and lhs or ''
    -- mapped again, as its own were; ahead of the keys typed after it ('i'): appended,
    -- it ran after them (in a macro or `.`, `<Tab>abc<Esc>` ran its keys in Normal mode)
    api.nvim_feedkeys(keys:sub(#own + 1), 'mi', false)
    return own
  end
end

--- What `key` does in Insert mode with no mapping: itself, but for an Alt key, which
--- Neovim takes as <Esc> and the key without Alt (`<M-]>` leaves Insert mode, then `]`
--- waits for its motion).  Typed as itself, `<M-]>` inserted a `]` in every buffer, a
--- user who leaves Insert mode with Alt keys lost that (`<M-C-Right>`: <Esc><C-Right>).
---@param key string
---@return string
local function unmapped(key)
  local rest = key:match('^<[MmAa]%-(.+)>$')
  if not rest then
    return key
  end
  return '<Esc>' .. (#rest == 1 and rest or '<' .. rest .. '>')
end

--- Map `key` in Insert mode to `body`, an <expr> body that gives the key back where it has
--- nothing to do: the key then does what it did before (`mapped_before`), else types itself.
local function map(key, body, desc)
  local before = mapped_before(key)
  vim.keymap.set('i', key, function()
    local keys = body()
    if keys == key and before then
      return before()
    end
    return vim.keycode(keys == key and unmapped(key) or keys)
  end, { expr = true, replace_keycodes = false, silent = true, desc = desc })
end

--- Take back the plugin's own Insert-mode mappings of an earlier setup() and give back what
--- the keys did before it: setup() called again with `inline.enabled = false` (or another
--- key) left the old mappings, and <Tab> kept accepting suggestions.
local function remove_mappings()
  for key, before in pairs(users_mappings) do
    if vim.startswith(vim.fn.maparg(key, 'i', false, true).desc or '', 'dlm-lsp') then
      vim.keymap.del('i', key)
      if not vim.tbl_isempty(before) and before.buffer ~= 1 then
        vim.fn.mapset('i', false, before)
      end
    end
  end
end

local function create_mappings()
  remove_mappings()
  local inline = M.config.inline
  local mode = ghost.mode(inline)
  if mode == 'off' then
    return
  end
  if inline.accept then
    map(inline.accept, function()
      return ghost.accept_or_feed(inline.accept, mode)
    end, 'dlm-lsp: accept the suggestion')
  end
  for unit, key in pairs({ word = inline.accept_word, line = inline.accept_line }) do
    if key and mode == 'extmark' then
      map(key, function()
        return ghost.accept_part_or_feed(key, unit)
      end, 'dlm-lsp: accept the suggestion\'s next ' .. unit)
    end
  end
  for step, key in pairs({ [1] = inline.next, [-1] = inline.prev }) do
    if key then
      map(key, function()
        return ghost.cycle_or_feed(key, step, mode)
      end, 'dlm-lsp: show another suggestion')
    end
  end
  if inline.dismiss and mode == 'extmark' then
    map(inline.dismiss, function()
      local buf = api.nvim_get_current_buf()
      if ghost.visible(buf) then
        ghost.clear(buf, true)
        return ''
      end
      -- one still to come is dismissed too (it showed seconds later), and the key does
      -- what it does
      ghost.clear(buf, true)
      return inline.dismiss
    end, 'dlm-lsp: dismiss the suggestion')
  end
  if inline.suggest and mode == 'extmark' then
    map(inline.suggest, function()
      return ghost.suggest_or_feed(inline.suggest)
    end, 'dlm-lsp: ask for a suggestion here now')
  end
end

--- Configure the plugin and start the server for matching buffers.
---@param opts table? see M.defaults
function M.setup(opts)
  if vim.fn.has('nvim-0.11') == 0 then
    -- the rest needs 0.11 (vim.lsp.get_clients, client:request()...): on Debian 12's 0.7
    -- setup() was a Lua error, "attempt to call field 'get_clients' (a nil value)"
    vim.notify('dlm: dlm.nvim needs Neovim 0.11 or newer (see :version); not set up',
      vim.log.levels.ERROR)
    return
  end
  local before = M.config.settings
  if opts ~= nil and type(opts) ~= 'table' then
    notify(('setup() takes a table of options, got %s; the defaults used'):format(type(opts)),
      vim.log.levels.WARN)
    opts = nil
  end
  M.config = merge(M.defaults, opts and checked(opts, M.defaults, ''))
  -- setup() again (init.lua sourced again) with other settings: the running server keeps
  -- its client, so it is told them, as configure() does; it had kept the first ones (a
  -- new `holeMarker` was the plugin's, `:DlmFill`'s, and not the server's, `:DlmFillHoles`').
  -- A setting no longer named keeps the server's value until :DlmRestart.
  if not vim.deep_equal(before, M.config.settings) then
    send_settings()
  end
  -- new settings: a shared server that refused the old ones is asked again, and a `cmd`
  -- that was not found is looked for again
  refused_for, missing_for = nil, nil
  bad_address() -- said now, whether or not a buffer is open
  create_commands()
  create_mappings()
  -- the buffers attached keep their client: their ghost text follows the new `inline`
  -- options (setup() again with inline.enabled = false left it asking and showing)
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    for buf in pairs(client.attached_buffers) do
      ghost.detach(buf)
      ghost.attach(client, buf, M.config.inline)
    end
  end
  local group = api.nvim_create_augroup('dlm.attach', { clear = true })
  api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = M.config.filetypes,
    callback = function(args)
      if attachable(args.buf) then
        M.attach(args.buf)
      end
    end,
  })
  api.nvim_create_autocmd('BufFilePost', {
    group = group,
    callback = function(args)
      reopen_renamed(args.buf)
    end,
  })
  attach_loaded()
end

return M
