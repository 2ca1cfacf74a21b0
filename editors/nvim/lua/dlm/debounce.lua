--- Completion requests asked at each keystroke, sent only once typing pauses.
---
--- Neovim's own completion with `autotrigger` (and completion plugins) asks for items
--- at every trigger character and, while the menu shows an incomplete list (a fill's
--- always is), at every keystroke.  Each request starts a fill on the server, which the
--- next keystroke's edit stops: measured in headless Neovim 0.11 with every character a
--- trigger, typing 29 characters at 150 ms each began 29 fills and finished 2, in 111
--- forward passes where the ghost text's 2 debounced fills took 24.  So, as the ghost
--- text does (`inline.debounce_ms`), an automatic request (trigger kind 2, a trigger
--- character, or 3, an incomplete list's) is held for `debounce_ms` and sent only if no
--- newer one replaced it and the buffer did not change meanwhile; one the user asked
--- for (kind 1: <C-x><C-o>, `vim.lsp.completion.get()`) goes at once.
---
--- This sits between Neovim's LSP client and its RPC connection (the `cmd` function
--- Neovim takes for a server), so the client keeps its bookkeeping: a held request has
--- an id of its own (negative: the connection numbers requests from 1), which a
--- `$/cancelRequest` names; cancelled or replaced while held, it is answered as the
--- connection answers a request the server cancelled (no result, the reply noted).
local M = {}

local api = vim.api

local COMPLETION = 'textDocument/completion'
local CANCEL = '$/cancelRequest'
-- CompletionTriggerKind: TriggerCharacter, TriggerForIncompleteCompletions
local AUTOMATIC = { [2] = true, [3] = true }

--- Whether a request is one the editor sends on its own as the user types.
local function automatic(method, params)
  local context = type(params) == 'table' and params.context or nil
  return method == COMPLETION and type(context) == 'table' and AUTOMATIC[context.triggerKind] == true
end

--- The buffer a request's position is in, and its changedtick now (nil: not loaded, or
--- one of several unnamed buffers; vim.uri_to_bufnr gave a buffer of `/` for any unnamed
--- one, so a request held in a scratch buffer was sent after the user typed on).
local function tick_of(params)
  local uri = vim.tbl_get(params, 'textDocument', 'uri')
  local buf = uri and require('dlm.edits').loaded_buffer(uri)
  if buf then
    return buf, api.nvim_buf_get_changedtick(buf)
  end
  return nil, nil
end

--- `rpc` (a vim.lsp.rpc.PublicClient) with automatic completion requests held for
--- `delay_ms` after the last one; `rpc` itself when `delay_ms` is not positive.
---@param rpc table
---@param delay_ms integer?
---@return table
function M.wrap(rpc, delay_ms)
  if not delay_ms or delay_ms <= 0 then
    return rpc
  end
  local timer = assert(vim.uv.new_timer())
  local held = nil ---@type { id: integer, method: string, params: table, callback: function, reply: function?, buf: integer?, tick: integer? }?
  local sent = {} ---@type table<integer, integer> our id -> the connection's, until answered
  local last_id = 0
  local wrapped = setmetatable({}, { __index = rpc })

  --- Note the reply to our request `id` as the connection would: later, on the loop.
  local function replied(request)
    if request.reply then
      vim.schedule(function() request.reply(request.id) end)
    end
  end

  --- Let go of the held request, unsent: answered as a cancelled one is.
  local function drop()
    local request = held
    held = nil
    if not timer:is_closing() then
      timer:stop()
    end
    if request then
      replied(request)
    end
  end

  local function send(request)
    local ok, id = rpc.request(request.method, request.params, request.callback, function()
      sent[request.id] = nil
      if request.reply then
        request.reply(request.id)
      end
    end)
    if ok and id then
      sent[request.id] = id
    else
      replied(request)
    end
  end

  function wrapped.request(method, params, callback, notify_reply_callback)
    if not automatic(method, params) then
      return rpc.request(method, params, callback, notify_reply_callback)
    end
    if rpc.is_closing() then
      return false, nil
    end
    drop() -- a newer request replaces it: its answer would be for an older cursor
    last_id = last_id - 1
    local buf, tick = tick_of(params)
    local request = { id = last_id, method = method, params = params, callback = callback,
      reply = notify_reply_callback, buf = buf, tick = tick }
    held = request
    timer:start(delay_ms, 0, vim.schedule_wrap(function()
      if held ~= request then
        return -- replaced or cancelled after the timer fired
      end
      held = nil
      local _, now = tick_of(params)
      if rpc.is_closing() then
        replied(request)
      elseif now ~= tick then
        -- typed on with no new request (a key that is no trigger): the position is of
        -- text that is gone; an empty list closes the menu, incomplete so it asks again
        request.callback(nil, { isIncomplete = true, items = {} })
        replied(request)
      else
        send(request)
      end
    end))
    return true, request.id
  end

  function wrapped.notify(method, params)
    local id = method == CANCEL and type(params) == 'table' and params.id or nil
    if id and held and held.id == id then
      drop()
      return true
    end
    if id and sent[id] then
      return rpc.notify(method, vim.tbl_extend('force', params, { id = sent[id] }))
    end
    return rpc.notify(method, params)
  end

  --- Let the held request go and close the timer (the connection is ending or gone).
  function wrapped.close_timer()
    drop()
    if not timer:is_closing() then
      timer:close()
    end
  end

  function wrapped.terminate()
    wrapped.close_timer()
    return rpc.terminate()
  end

  return wrapped
end

--- A `cmd` for vim.lsp.start() that connects as `cmd` does (a command to start, or a
--- function that connects) and holds automatic completion requests (`M.wrap`).
---@param cmd string[] | fun(dispatchers: table, config: table): table
---@param delay_ms integer?
function M.cmd(cmd, delay_ms)
  if not delay_ms or delay_ms <= 0 then
    return cmd
  end
  return function(dispatchers, config)
    local rpc, wrapped
    -- the timer goes with the connection however it ends: closed only by terminate(),
    -- which Neovim's graceful stop (:DlmRestart's) and a server that exits never call,
    -- one timer was left open per restart
    local on_exit = dispatchers.on_exit
    dispatchers = vim.tbl_extend('force', dispatchers or {}, { on_exit = function(...)
      if wrapped and wrapped.close_timer then
        wrapped.close_timer()
      end
      if on_exit then
        return on_exit(...)
      end
    end })
    if type(cmd) == 'function' then
      rpc = cmd(dispatchers, config)
    else
      rpc = vim.lsp.rpc.start(cmd, dispatchers, {
        cwd = config and config.cmd_cwd, env = config and config.cmd_env,
        detached = config and config.detached,
      })
    end
    wrapped = M.wrap(rpc, delay_ms)
    return wrapped
  end
end

return M
