--- :checkhealth dlm — can this Neovim run dlm-lsp, and is the server healthy?
---
--- Checks the Neovim version (and whether native inline completion exists),
--- that the server executable is found, that it starts and answers
--- `dlm/status`, and that its model loads (which device it runs on).  When no
--- dlm client is running, a temporary one is started and stopped again.
local M = {}

-- The report functions: `vim.health.start` and the like from Neovim 0.10, `report_start`
-- and the like before, `require('health')`'s before 0.8.  With vim.health alone, the check
-- failed with a Lua error on the versions its "too old" line was written for.
local reporter = vim.health or require('health')
local health = {}
for _, name in ipairs({ 'start', 'ok', 'info', 'warn', 'error' }) do
  health[name] = reporter[name] or reporter['report_' .. name]
end

--- How long to wait for the server to start and for its model to load.
M.timeout_ms = 60000

local function wait(ms, predicate)
  return vim.wait(ms, predicate, 50)
end

local function check_neovim()
  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.11') == 0 then
    health.error('Neovim ' .. version .. ' is too old', 'dlm.nvim needs Neovim 0.11 or newer')
    return false
  end
  health.ok('Neovim ' .. version)
  local ghost = require('dlm.ghost')
  local mode = ghost.mode(require('dlm').config.inline)
  if ghost.has_native() then
    health.ok('inline suggestions: ' .. mode .. ' (vim.lsp.inline_completion available)')
  else
    health.ok('inline suggestions: ' .. mode .. ' (vim.lsp.inline_completion needs 0.12; extmarks instead)')
  end
  if ghost.paused then
    health.warn('inline suggestions are paused', ':DlmToggle resumes them')
  end
  return true
end

local function check_executable(cmd)
  if type(cmd) == 'function' then -- setup() takes one, as vim.lsp.start does
    health.info('`cmd` is a function (e.g. vim.lsp.rpc.connect): no executable to look for')
    return true
  end
  if type(cmd) ~= 'table' or not cmd[1] then
    health.error('`cmd` is not a list of strings', 'e.g. require("dlm").setup({ cmd = { "dlm-lsp" } })')
    return false
  end
  local path = vim.fn.exepath(cmd[1])
  if path == '' then
    -- torch first, as the README's Quick start does: a bare `pip install -e` on a venv
    -- without torch pulls PyPI's CUDA build, gigabytes, even on a machine without a GPU
    health.error(('server executable `%s` not found'):format(cmd[1]), {
      'install the server as the README\'s Quick start does, torch first: '
        .. '`.venv/bin/pip install torch==2.13.0 && .venv/bin/pip install -e /path/to/dlm-lsp` '
        .. '(a bare `pip install -e` pulls a multi-GB CUDA torch; the Quick start says which '
        .. 'torch to take with a GPU, or for the CPU elsewhere)',
      'or point `cmd` at it: require("dlm").setup({ cmd = { "/path/to/.venv/bin/dlm-lsp" } })',
    })
    return false
  end
  health.ok(('server executable: %s'):format(path))
  return true
end

--- Whether a shared server listens at host:port, or why not.  Neovim 0.11's
--- vim.lsp.rpc.connect only warns of a connection that failed and leaves its client waiting
--- for the answer to `initialize` for ever: the check waited its whole timeout (60 s), then
--- blamed the token.
local function reachable(host, port)
  local info = vim.uv.getaddrinfo(host, nil)
  local tcp = vim.uv.new_tcp()
  local done, err = false, nil
  tcp:connect(info and info[1] and info[1].addr or host, port, function(e)
    done, err = true, e
  end)
  local answered = wait(5000, function() return done end)
  tcp:close()
  if not answered then
    return false, 'no answer in 5 s'
  end
  return err == nil, err
end

--- What to do about a shared server's refusal (`dlm.refused`): when it is full, the
--- token is fine (the token advice came first whatever the refusal said).
local function refusal_advice(refused)
  return refused:find('--max-clients', 1, true)
    and 'wait for a client to leave: the server serves at most its --max-clients at once'
    or 'set the token the server was started with: setup{ token = ... } or $DLM_LSP_TCP_TOKEN'
end

--- A client to ask: the running one, or a temporary one (returned as `temporary`).
local function get_client(errors)
  local dlm = require('dlm')
  local client = dlm.client() or dlm.starting_client()
  if client and not client.initialized then -- the editor's own, starting: not a second one
    health.info(('the server is starting (client %d): waited for'):format(client.id))
    wait(M.timeout_ms, function()
      return client.initialized or client:is_stopped()
    end)
    if dlm.refused then -- a shared server turned it away: what to do is known
      health.error(dlm.refused, refusal_advice(dlm.refused))
      return nil
    elseif client:is_stopped() then
      health.error(('the server (client %d) ended before it answered `initialize`'):format(
        client.id), ':LspLog says what it wrote; :DlmRestart starts it again')
      return nil
    elseif not client.initialized then
      health.error(('the server (client %d) did not answer `initialize` in %d s'):format(
        client.id, M.timeout_ms / 1000), ':LspLog says what it wrote; :DlmRestart starts it again')
      return nil
    end
  end
  if client then
    health.ok(('server running (client %d)'):format(client.id))
    return client, false
  end
  local exited = nil -- how a server command that stopped before `initialize` ended
  local config = dlm.lsp_config({
    root_dir = vim.fn.getcwd(),
    name = dlm.name .. '-health',
    on_exit = function(code, signal)
      exited = { code, signal }
    end,
  }, true)
  config.handlers = vim.tbl_extend('force', config.handlers, {
    ['window/showMessage'] = function(_, params)
      if params and params.type == vim.lsp.protocol.MessageType.Error then
        errors[#errors + 1] = params.message
      end
    end,
  })
  local ok, id = pcall(vim.lsp.start, config, { attach = false })
  if not ok or not id then
    health.error('the server did not start: ' .. tostring(id))
    return nil
  end
  client = vim.lsp.get_client_by_id(id)
  if not client then
    health.error('the server exited at once', 'run the server command in a terminal to see why')
    return nil
  end
  if not wait(M.timeout_ms, function()
    return client.initialized or client:is_stopped()
  end) or client:is_stopped() then
    if dlm.refused then
      health.error(dlm.refused, refusal_advice(dlm.refused))
      client:stop(true)
      return nil
    end
    wait(1000, function() return exited ~= nil end) -- its exit callback may come after
    if exited and type(dlm.config.cmd) == 'table' and not dlm.config.server
      and (exited[1] ~= 0 or exited[2] ~= 0) then
      -- "did not answer" hid what the plugin itself says of such a command
      health.error(('the server command `%s` exited (code %d, signal %d) before it answered '
        .. '`initialize`'):format(table.concat(dlm.config.cmd, ' '), exited[1], exited[2]),
        'run it in a terminal to see why (or :LspLog), fix it, then :DlmRestart')
      return nil
    end
    health.error('the server did not answer `initialize`', dlm.config.server and {
      'a shared server refuses a client without its token (setup{ token = ... } or '
        .. '$DLM_LSP_TCP_TOKEN) and clients past its --max-clients; its terminal says which',
    } or type(dlm.config.cmd) == 'function' and {
      -- no command to run: a connection (vim.lsp.rpc.connect) to nothing that answers
      'is a dlm-lsp server (`dlm-lsp --tcp HOST:PORT`) listening where `cmd` connects? '
        .. ':LspLog says what the connection met',
    } or 'run the server command in a terminal to see why')
    client:stop(true)
    return nil
  end
  health.ok('server starts and initializes')
  return client, true
end

local function status_of(client)
  local reply = client:request_sync('dlm/status', vim.empty_dict(), 10000)
  if not reply then
    return nil, 'no answer to dlm/status in 10 s'
  end
  if reply.err then
    return nil, reply.err.message
  end
  return reply.result
end

function M.check()
  health.start('dlm')
  if not check_neovim() then
    return
  end
  local dlm = require('dlm')
  if dlm.config.server then
    local host, port, why = dlm.parse_address(dlm.config.server)
    if not host then
      health.error(why)
      return
    end
    local token = dlm.config.token or vim.env.DLM_LSP_TCP_TOKEN
    health.info(('connecting to a shared server at %s:%d (not starting `cmd`), %s'):format(
      host, port, (token and token ~= '') and 'sending a token' or 'without a token'))
    local listening, why_not = reachable(host, port)
    if not listening and not dlm.client() then
      health.error(('could not connect to %s:%d: %s'):format(host, port, why_not), {
        'is `dlm-lsp --tcp ' .. host .. ':' .. port .. '` running?',
        'setup{ server = ... } must be its address',
      })
      return
    end
  elseif not check_executable(dlm.config.cmd) then
    return
  end
  local errors = {}
  local client, temporary = get_client(errors)
  if not client then
    return
  end
  local info = client.server_info
  if info and info.name then
    health.info(('server: %s %s'):format(info.name, info.version or '(no version given)'))
  end
  local status, why = status_of(client)
  -- The server loads its model in the background after `initialized`; a load that failed
  -- is in the status's loadError (a running client's showMessage has gone by already).
  local function failed()
    if status and type(status.loadError) == 'string' and #errors == 0 then
      errors[1] = status.loadError
    end
    return #errors > 0
  end
  local loaded = status and status.loaded
  if status and not loaded and not failed() then
    wait(M.timeout_ms, function()
      if failed() then
        return true
      end
      status, why = status_of(client)
      return not status or status.loaded or failed()
    end)
    loaded = status and status.loaded
  end
  if not status then
    health.error('dlm/status failed: ' .. tostring(why))
  elseif loaded then
    health.ok(('model `%s` loaded on %s'):format(status.model, status.device))
    if status.p50Ms and status.p50Ms ~= vim.NIL then
      health.info(('latency p50 %s ms, p95 %s ms over %d fills'):format(status.p50Ms, status.p95Ms, status.fills))
    end
  elseif #errors > 0 then
    -- the running server's wait before it tries again, and the command that ends it; a
    -- temporary client's server is stopped below: there is nothing to retry
    local advice = { 'check the `model` and `device` settings' }
    if not temporary then
      advice[2] = dlm.retry_advice(status.loadRetryS)
    end
    health.error(('model `%s` failed to load: %s'):format(status.model, table.concat(errors, '; ')),
      advice)
  else
    health.warn(('model `%s` not loaded after %d s (device %s)'):format(status.model, M.timeout_ms / 1000,
      status.device))
  end
  if temporary then
    client:stop(true)
  end
end

return M
