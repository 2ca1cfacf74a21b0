--- Inline suggestions (ghost text) from `textDocument/inlineCompletion`.
---
--- Neovim 0.12 has `vim.lsp.inline_completion`; there we only enable it and map
--- the accept key (which keeps Neovim from inserting a suggestion it still shows
--- after the cursor moved on: see `native_item`).  On 0.11 this module does the same job with extmarks:
--- after typing pauses (`inline.debounce_ms`) it asks the server for a fill at
--- the cursor, cancelling the request still in flight (the server would drop
--- it at its next step anyway), and shows the answer as virtual text if the
--- buffer and cursor are still where they were when it asked.
local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('dlm.ghost')

---@class dlm.GhostState
---@field timer uv.uv_timer_t?
---@field request { client: vim.lsp.Client, id: integer }?
---@field shown { row: integer, col: integer, text: string, tick: integer, mark: integer, hl: string, choices: string[], choice: integer, after: string }?
---@field group integer

---@type table<integer, dlm.GhostState>
local buffers = {}
-- Buffers where Neovim's native inline completion was enabled for us: the client's id.
---@type table<integer, integer>
local native_buffers = {}

--- Suggestions paused by the user (`:DlmToggle`): nothing is asked while typing and
--- nothing shown, until they are resumed.  Commands and completion keep working.
M.paused = false

--- Whether this Neovim has native inline completion (0.12+).
function M.has_native()
  local native = vim.lsp.inline_completion
  return type(native) == 'table' and type(native.enable) == 'function'
end

--- The mode the config asks for, resolved against what this Neovim has.
---@param opts table the `inline` table of the plugin's config
---@return 'native' | 'extmark' | 'off'
function M.mode(opts)
  if not opts.enabled then
    return 'off'
  end
  if opts.native == true or (opts.native == 'auto' and M.has_native()) then
    return M.has_native() and 'native' or 'extmark'
  end
  return 'extmark'
end

--- A statusline that shows `pending` must be redrawn when it changes.
local function redraw_status()
  pcall(vim.cmd.redrawstatus)
end

local function cancel_request(state)
  if state.request then
    pcall(state.request.client.cancel_request, state.request.client, state.request.id)
    state.request = nil
    redraw_status()
  end
end

--- Remove the suggestion shown in `buf` (and, with `all`, the pending request and timer).
function M.clear(buf, all)
  local state = buffers[buf]
  if not state then
    return
  end
  if state.shown and api.nvim_buf_is_valid(buf) then
    pcall(api.nvim_buf_del_extmark, buf, ns, state.shown.mark)
  end
  state.shown = nil
  if all then
    if state.timer then
      state.timer:stop()
    end
    cancel_request(state)
  end
end

--- Whether a suggestion is being asked for in `buf` (sent, not answered yet).
function M.pending(buf)
  local client = native_buffers[buf] and vim.lsp.get_client_by_id(native_buffers[buf])
  if client then -- Neovim's own requests
    for _, request in pairs(client.requests) do
      if request.bufnr == buf and request.type == 'pending'
        and request.method == 'textDocument/inlineCompletion' then
        return true
      end
    end
    return false
  end
  return buffers[buf] ~= nil and buffers[buf].request ~= nil
end

--- The suggestion shown in `buf` when it is at the cursor of the current window (where
--- it was put, the buffer unchanged since), else nil.
local function at_cursor(buf)
  local shown = buffers[buf] and buffers[buf].shown
  if not shown then
    return nil
  end
  local row, col = unpack(api.nvim_win_get_cursor(0))
  if shown.row == row - 1 and shown.col == col and shown.tick == api.nvim_buf_get_changedtick(buf) then
    return shown
  end
  return nil
end

--- Whether a suggestion is on screen at the cursor of the current window.
function M.visible(buf)
  return at_cursor(buf) ~= nil
end

--- The suggestion's text (for tests and statuslines), or nil.
function M.text(buf)
  local state = buffers[buf]
  return state and state.shown and state.shown.text or nil
end

--- The suggestions to cycle through at the cursor and the number of the one shown
--- (for tests and statuslines), or nil.
function M.choices(buf)
  local state = buffers[buf]
  return state and state.shown and { list = state.shown.choices, shown = state.shown.choice } or nil
end

--- The text of a suggestion with `\n` line breaks.  In a `fileformat=dos` buffer the server
--- writes the fill's breaks as the file's own `\r\n`, but a buffer's lines hold no break
--- characters: split on `\n` alone, each line would keep a `\r`, shown as ^M and written
--- to the file as `\r\r\n`.
---@param item table an lsp.InlineCompletionItem
---@return string
function M.item_text(item)
  local text = item.insertText
  if type(text) == 'table' then
    text = text.value -- a StringValue snippet: shown and inserted as its text
  end
  return (string.gsub(text or '', '\r\n?', '\n'))
end

--- `text` as it is drawn from display column `vcol`: a TAB in inline virtual text is put on
--- the screen as one raw TAB cell (Neovim 0.11), which the terminal moves past to a tab stop
--- of its own while Neovim counts one cell, so the rest of the line was drawn out of place.
--- Each TAB is spaces to the next of the buffer's tab stops, as it will stand once accepted.
--- (The suggestion's later lines are virtual lines, whose TABs Neovim draws itself.)
---@param text string
---@param vcol integer
---@param tabstop integer
---@return string
function M.expand_tabs(text, vcol, tabstop)
  if not text:find('\t', 1, true) then
    return text
  end
  local parts = {}
  for piece, tab in text:gmatch('([^\t]*)(\t?)') do
    parts[#parts + 1] = piece
    vcol = vcol + vim.fn.strdisplaywidth(piece)
    if tab ~= '' then
      local width = tabstop - vcol % tabstop
      parts[#parts + 1] = string.rep(' ', width)
      vcol = vcol + width
    end
  end
  return table.concat(parts)
end

--- Show `text` as the suggestion at (row, col) of `buf` (0-based), replacing any other.
--- `choices` (default: just `text`) are the suggestions to cycle through, `text` being
--- number `choice` of them.
function M.show(buf, row, col, text, hl_group, choices, choice)
  local state = buffers[buf]
  M.clear(buf)
  local lines = vim.split(text, '\n', { plain = true })
  local virt_lines = {}
  for i = 2, #lines do
    virt_lines[#virt_lines + 1] = { { lines[i], hl_group } }
  end
  local line = api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or ''
  local vcol = api.nvim_buf_call(buf, function()
    return vim.fn.strdisplaywidth(line:sub(1, col)) -- with the buffer's 'tabstop'
  end)
  local mark = api.nvim_buf_set_extmark(buf, ns, row, col, {
    virt_text = { { M.expand_tabs(lines[1], vcol, vim.bo[buf].tabstop), hl_group } },
    virt_text_pos = 'inline',
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    hl_mode = 'combine',
  })
  state.shown = {
    row = row, col = col, text = text, tick = api.nvim_buf_get_changedtick(buf), mark = mark, hl = hl_group,
    choices = choices or { text }, choice = choice or 1, after = line:sub(col + 1),
  }
end

--- When what was typed at the suggestion since it was shown is its beginning (and the
--- rest of the line is as it was), show the remainder at the cursor, as VS Code does:
--- no new request, the fill still stands for the text as it now is.  Choices that do
--- not begin so are dropped.  True when the suggestion was kept.
function M.type_through(buf)
  local shown = buffers[buf] and buffers[buf].shown
  if not shown or api.nvim_get_current_buf() ~= buf then
    return false
  end
  local row, col = unpack(api.nvim_win_get_cursor(0))
  if row - 1 ~= shown.row or col <= shown.col then
    return false
  end
  local line = api.nvim_buf_get_lines(buf, shown.row, shown.row + 1, false)[1] or ''
  local typed = line:sub(shown.col + 1, col)
  if line:sub(col + 1) ~= shown.after then
    return false
  end
  local rests, choice = {}, nil
  for i, text in ipairs(shown.choices) do
    if #text > #typed and text:sub(1, #typed) == typed then
      rests[#rests + 1] = text:sub(#typed + 1)
      if i == shown.choice then
        choice = #rests
      end
    end
  end
  if not choice then
    return false -- the suggestion shown was typed out, or typed against
  end
  M.show(buf, shown.row, col, rests[choice], shown.hl, rests, choice)
  return true
end

--- Show the next (`step` 1) or previous (-1) of the suggestions the server gave for the
--- cursor, round the list; false when none is shown.
function M.cycle(buf, step)
  local shown = at_cursor(buf)
  if not shown then
    return false
  end
  local choice = (shown.choice - 1 + step) % #shown.choices + 1
  M.show(buf, shown.row, shown.col, shown.choices[choice], shown.hl, shown.choices, choice)
  return true
end

--- Whether a completion menu is open, or a completion of `buf` is asked for and not yet
--- answered.  A suggestion would be drawn under the menu (one asked for as the user typed
--- on with the menu open was drawn over it, and <Tab> then typed a tab); and its fill, the
--- document's newest suggestion, stops the completion's on the server: `ret<C-x><C-o>`
--- typed together (a mapping, a fast typist) opened no menu, with no word said.
local function completing(client, buf)
  if vim.fn.pumvisible() == 1 then
    return true
  end
  for _, request in pairs(client.requests or {}) do
    if request.type == 'pending' and request.bufnr == buf
      and request.method == 'textDocument/completion' then
      return true
    end
  end
  return false
end

--- Ask for a suggestion at the cursor now (the debounce timer calls this; the suggest
--- key with `invoked`, which asks while suggestions are paused too).
---@param client vim.lsp.Client
---@param buf integer
---@param opts table the `inline` config
---@param invoked boolean? asked for on purpose: the server's `Invoked` trigger
function M.request(client, buf, opts, invoked)
  local state = buffers[buf]
  if not state or (M.paused and not invoked) or api.nvim_get_current_buf() ~= buf
    or not api.nvim_get_mode().mode:match('^i') or completing(client, buf) then
    return
  end
  cancel_request(state) -- superseded: its answer could only be for an older cursor
  local row, col = unpack(api.nvim_win_get_cursor(0))
  row = row - 1
  local tick = api.nvim_buf_get_changedtick(buf)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  -- Invoked (1) also where a suggestion was just accepted: the server offers none there
  -- again unasked (a second Tab would insert a second copy of the same code)
  params.context = { triggerKind = invoked and 1 or 2 } -- else Automatic
  local ok, id
  ok, id = client:request('textDocument/inlineCompletion', params, function(err, result)
    if state.request and state.request.id == id then
      state.request = nil
      redraw_status()
    end
    if err or not result or not api.nvim_buf_is_valid(buf) then
      return
    end
    local cursor = api.nvim_win_get_cursor(0)
    if api.nvim_get_current_buf() ~= buf
      or api.nvim_buf_get_changedtick(buf) ~= tick
      or cursor[1] - 1 ~= row
      or cursor[2] ~= col
      or not api.nvim_get_mode().mode:match('^i')
    then
      return -- the user moved on: this answer is for a place that no longer exists
    end
    if completing(client, buf) then
      return -- a menu opened meanwhile (<C-n>, a completion's): its place and its keys
    end
    local texts, seen = {}, {}
    for _, item in ipairs(result.items or result) do
      local text = M.item_text(item)
      if text ~= '' and not seen[text] then
        texts[#texts + 1], seen[text] = text, true
      end
    end
    if #texts > 0 then
      M.show(buf, row, col, texts[1], opts.hl_group, texts, 1)
    end
  end, buf)
  if ok and id then
    state.request = { client = client, id = id }
    redraw_status()
  end
end

--- Debounce: (re)start the buffer's timer; only the last keystroke of a burst asks.
function M.schedule(client, buf, opts)
  local state = buffers[buf]
  if not state then
    return
  end
  M.clear(buf) -- also while paused: the suggest key's, for text that has changed
  if M.paused then
    return
  end
  -- where and when it was asked for: a cursor moved afterwards without typing (an arrow
  -- key, a click) takes it back, or it asked, once the wait was over, at a place where
  -- nothing was typed (`scheduled_moved`)
  state.scheduled = { tick = api.nvim_buf_get_changedtick(buf), cursor = api.nvim_win_get_cursor(0) }
  state.timer = state.timer or vim.uv.new_timer()
  state.timer:stop()
  state.timer:start(opts.debounce_ms, 0, vim.schedule_wrap(function()
    if client:is_stopped() then
      return
    end
    M.request(client, buf, opts)
  end))
end

--- Whether a suggestion is still to come in `buf` (its wait under way, or asked for and
--- not answered) for a place the cursor has left without typing: the buffer is as it was
--- when it was scheduled, the cursor elsewhere.
local function scheduled_moved(buf)
  local state = buffers[buf]
  local waiting = state and (state.request ~= nil or (state.timer and state.timer:is_active()))
  if not waiting or not state.scheduled then
    return false
  end
  local cursor = api.nvim_win_get_cursor(0)
  return api.nvim_buf_get_changedtick(buf) == state.scheduled.tick
    and (cursor[1] ~= state.scheduled.cursor[1] or cursor[2] ~= state.scheduled.cursor[2])
end

--- Insert `text` at (row, col) and put the cursor after it; returns that place.
local function insert(buf, row, col, text)
  local lines = vim.split(text, '\n', { plain = true })
  api.nvim_buf_set_text(buf, row, col, row, col, lines)
  local last_row = row + #lines - 1
  local last_col = #lines == 1 and col + #lines[1] or #lines[#lines]
  api.nvim_win_set_cursor(0, { last_row + 1, last_col })
  return last_row, last_col
end

--- Insert the suggestion shown at the cursor; false when there is none.
function M.accept(buf)
  local shown = at_cursor(buf)
  if not shown then
    return false
  end
  M.clear(buf, true)
  insert(buf, shown.row, shown.col, shown.text)
  return true
end

--- The head of a suggestion that a partial accept inserts.  'word': the leading
--- whitespace (line breaks too), then one word (letters, digits, `_`) or one run of
--- other characters.  'line': everything before the first line break that follows
--- some text, so accepting line by line walks down the suggestion.  Whitespace only,
--- or no such break: all of it.  (Lua's classes are ASCII: a multi-byte character is
--- never split, its bytes all fall in the "other" run.)
---@param text string
---@param unit 'word' | 'line'
---@return string
function M.next_part(text, unit)
  local part
  if unit == 'line' then
    local first = text:find('%S')
    local stop = first and text:find('\n', first, true)
    part = stop and text:sub(1, stop - 1) or text
  else
    part = text:match('^%s*[%w_]+') or text:match('^%s*[^%w_%s]+') or text
  end
  return part
end

--- Insert the next word or line of the suggestion shown at the cursor and keep
--- showing the rest after it, with no new request (the rest is still the answer
--- to the text as it now stands); false when nothing is shown.
---@param unit 'word' | 'line'
function M.accept_part(buf, unit)
  local shown = at_cursor(buf)
  if not shown then
    return false
  end
  local part = M.next_part(shown.text, unit)
  if part == shown.text then
    return M.accept(buf)
  end
  M.clear(buf, true)
  local row, col = insert(buf, shown.row, shown.col, part)
  M.show(buf, row, col, shown.text:sub(#part + 1), shown.hl)
  return true
end

--- Start suggestions in `buf` for `client`.
---@return 'native' | 'extmark' | 'off'
function M.attach(client, buf, opts)
  local mode = M.mode(opts)
  if mode == 'native' then
    local ok = pcall(vim.lsp.inline_completion.enable, not M.paused, { bufnr = buf })
    if ok then
      native_buffers[buf] = client.id
      api.nvim_create_autocmd('LspRequest', { -- a statusline showing `pending` follows them
        group = api.nvim_create_augroup(('dlm.ghost.native.%d'):format(buf), { clear = true }),
        buffer = buf,
        callback = function(args)
          if args.data.client_id == client.id
            and args.data.request.method == 'textDocument/inlineCompletion' then
            redraw_status()
          end
        end,
      })
      return mode
    end
    mode = 'extmark' -- an API we do not know: fall back rather than lose suggestions
  end
  if mode == 'off' or buffers[buf] then
    return mode
  end
  local group = api.nvim_create_augroup(('dlm.ghost.%d'):format(buf), { clear = true })
  buffers[buf] = { group = group, client = client, opts = opts }
  api.nvim_create_autocmd({ 'TextChangedI', 'TextChangedP' }, {
    group = group,
    buffer = buf,
    callback = function()
      local shown = buffers[buf] and buffers[buf].shown
      if shown and shown.tick == api.nvim_buf_get_changedtick(buf) then
        return -- a change the suggestion shown already accounts for (a partial accept's)
      end
      if M.type_through(buf) then
        return
      end
      M.schedule(client, buf, opts)
    end,
  })
  api.nvim_create_autocmd('CursorMovedI', {
    group = group,
    buffer = buf,
    callback = function()
      if buffers[buf] and buffers[buf].shown and not M.visible(buf) and not M.type_through(buf) then
        M.clear(buf, true)
      elseif scheduled_moved(buf) then
        M.clear(buf, true)
      end
    end,
  })
  -- a completion menu opened: the suggestion would be drawn under it, and the keys are
  -- the menu's (`act_or_feed`)
  api.nvim_create_autocmd('CompleteChanged', {
    group = group,
    buffer = buf,
    callback = function()
      M.clear(buf, true)
    end,
  })
  api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, {
    group = group,
    buffer = buf,
    callback = function()
      M.clear(buf, true)
    end,
  })
  -- Insert mode left with <C-c>, which fires no InsertLeave: the suggestion stayed drawn
  -- in Normal mode, through edits and undo, until the next Insert mode
  api.nvim_create_autocmd('ModeChanged', {
    group = group,
    buffer = buf,
    callback = function()
      local to = vim.v.event.new_mode or ''
      if not to:match('^i') and not to:match('^niI') then -- <C-o> runs one command only
        M.clear(buf, true)
      end
    end,
  })
  api.nvim_create_autocmd({ 'BufUnload', 'LspDetach' }, {
    group = group,
    buffer = buf,
    callback = function(args)
      -- LspDetach is every server's: another one of the buffer's leaving (pyright
      -- restarted) is no reason to stop suggesting
      if args.event == 'BufUnload' or args.data.client_id == client.id then
        M.detach(buf)
      end
    end,
  })
  return mode
end

--- Pause or resume suggestions in every buffer; a pause also drops what is shown and
--- cancels what is being asked (the server stops that fill at its next step).
---@param paused boolean
function M.set_paused(paused)
  M.paused = paused
  if paused then
    for buf in pairs(buffers) do
      M.clear(buf, true)
    end
  end
  for buf in pairs(native_buffers) do
    if api.nvim_buf_is_valid(buf) then
      pcall(vim.lsp.inline_completion.enable, not paused, { bufnr = buf })
    end
  end
  -- a statusline showing `dlm: paused` kept it after `<Cmd>DlmToggle<CR>` until a key
  -- redrew it (a command typed on the command line redraws it on its own)
  redraw_status()
end

function M.detach(buf)
  if native_buffers[buf] and api.nvim_buf_is_valid(buf) then
    -- Neovim's own suggestions stop too: setup() again with `enabled = false` (or
    -- `native = false`) left them asked for and shown, and no longer the plugin's to stop
    pcall(vim.lsp.inline_completion.enable, false, { bufnr = buf })
    pcall(api.nvim_del_augroup_by_name, ('dlm.ghost.native.%d'):format(buf))
  end
  native_buffers[buf] = nil
  local state = buffers[buf]
  if not state then
    return
  end
  M.clear(buf, true)
  if state.timer then
    state.timer:close()
  end
  pcall(api.nvim_del_augroup_by_id, state.group)
  buffers[buf] = nil
end

--- The action an accept or cycling key left to run as the key after it (`act_or_feed`).
local pending = nil ---@type fun()?

--- Run the action `act_or_feed` left (its <Cmd> key).
function M._run_pending()
  local run = pending
  pending = nil
  if run then
    run()
  end
end

--- An <expr> mapping's body: with a suggestion shown, `action(buf)` as the next key, a
--- <Cmd> (buffer text cannot change inside an <expr> mapping), and no key typed; else the
--- key, as typed.  The <Cmd> goes ahead of the keys typed after this one: scheduled, the
--- action ran after them, and `<Tab>x` read at once (a paste, a fast typist over ssh,
--- `imap <C-j> <Tab><Esc>`) typed the `x` first, the suggestion then no longer at the
--- cursor: neither it nor a Tab was inserted.
local function act_or_feed(key, action)
  local buf = api.nvim_get_current_buf()
  -- with a completion menu open the key is the menu's (`<Tab>` accepted the suggestion
  -- under it, and the user's pumvisible() mapping of <Tab> never ran)
  if M.visible(buf) and vim.fn.pumvisible() == 0 then
    pending = function()
      action(buf)
    end
    return '<Cmd>lua require("dlm.ghost")._run_pending()<CR>' -- as typed: map() converts
  end
  return key
end

--- Native accept's `on_accept`: Neovim inserts an item over the range it was asked
--- for, so what was typed since (the suggestion's beginning, shown typed through)
--- would come twice; the item's range is stretched to the cursor over it.  An item
--- for another place (the cursor left its line, or typed against it) is not
--- inserted: the key is typed instead.
local function native_item(buf, key)
  return function(item)
    if not item.range or type(item.insert_text) ~= 'string' then
      return item
    end
    local srow, scol, erow, ecol = item.range:to_extmark()
    local row, col = unpack(api.nvim_win_get_cursor(0))
    row = row - 1
    if row == erow and col == ecol then
      return item -- nothing typed since it was asked for
    end
    local line = api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or ''
    local typed = line:sub(scol + 1, col) -- what the item's range and the typing since hold
    if row == srow and row == erow and col > ecol and vim.startswith(item.insert_text, typed) then
      -- through an LSP range in UTF-8 (byte columns): vim.range.extmark() took
      -- (row, col, row, col, opts) in 0.12.0 and takes (buf, row, col, row, col) on
      -- Neovim's master since April 2026; vim.range.lsp(buf, range, encoding) is the same
      -- in both (the buffer-first call raised in 0.12.0's scheduled accept: Tab did nothing)
      item.range = vim.range.lsp(buf, { start = { line = srow, character = scol },
        ['end'] = { line = row, character = col } }, 'utf-8')
      return item
    end
    api.nvim_feedkeys(vim.keycode(key), 'ni', false) -- ahead of the keys typed after it
    return nil
  end
end

--- The accept mapping's body: insert the suggestion, or type the key as usual.
---@param key string the mapped key, e.g. '<Tab>'
---@param mode 'native' | 'extmark' | 'off'
function M.accept_or_feed(key, mode)
  local buf = api.nvim_get_current_buf()
  if mode == 'native' then
    local ok, accepted = pcall(vim.lsp.inline_completion.get,
      { bufnr = buf, on_accept = native_item(buf, key) })
    if ok and accepted then
      return ''
    end
    return key
  end
  return act_or_feed(key, M.accept)
end

--- Whether Neovim's own inline completion shows a suggestion in `buf` (its extmark:
--- 0.12 has no function that says so without accepting it).
local function native_shown(buf)
  local native_ns = api.nvim_get_namespaces()['nvim.lsp.inline_completion']
  return native_ns ~= nil and #api.nvim_buf_get_extmarks(buf, native_ns, 0, -1, { limit = 1 }) > 0
end

--- The cycling mappings' body: show the next or previous suggestion, or type the key as
--- usual.
---@param key string
---@param step integer 1 or -1
---@param mode 'native' | 'extmark' | 'off'
function M.cycle_or_feed(key, step, mode)
  if mode == 'native' then
    local buf = api.nvim_get_current_buf()
    if not native_shown(buf) then
      return key
    end
    pending = function() -- as act_or_feed's: ahead of the keys typed after it
      pcall(vim.lsp.inline_completion.select, { bufnr = buf, count = step })
    end
    return '<Cmd>lua require("dlm.ghost")._run_pending()<CR>'
  end
  return act_or_feed(key, function(buf)
    M.cycle(buf, step)
  end)
end

--- The suggest mapping's body (extmark mode): ask for a suggestion at the cursor now, on
--- purpose (`M.request`'s `invoked`), in place of the one shown or coming.  Without it
--- nothing asked but a pause in typing: a user who had paused suggestions (:DlmToggle),
--- or set a long `debounce_ms`, or had just accepted one there, could not ask at a place.
--- Where there is nothing to ask (a buffer the server does not serve, a completion menu
--- open) the key does what it did before.
---@param key string
function M.suggest_or_feed(key)
  local buf = api.nvim_get_current_buf()
  local state = buffers[buf]
  if not state or state.client:is_stopped() or completing(state.client, buf) then
    return key -- a menu open or a completion on its way: the key is theirs
  end
  pending = function() -- as act_or_feed's: ahead of the keys typed after it
    M.clear(buf, true)
    -- where and when, as `M.schedule` notes it: moving away before it comes stops it
    state.scheduled = { tick = api.nvim_buf_get_changedtick(buf), cursor = api.nvim_win_get_cursor(0) }
    M.request(state.client, buf, state.opts, true)
  end
  return '<Cmd>lua require("dlm.ghost")._run_pending()<CR>'
end

--- The partial-accept mappings' body (extmark mode): insert the suggestion's next word
--- or line, or type the key as usual.
---@param key string
---@param unit 'word' | 'line'
function M.accept_part_or_feed(key, unit)
  return act_or_feed(key, function(buf)
    M.accept_part(buf, unit)
  end)
end

M.namespace = ns
return M
