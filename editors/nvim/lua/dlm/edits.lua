--- Positions, ranges and guarded edits for dlm-lsp.
---
--- A fill is computed against one version of a buffer and takes from a few
--- milliseconds to seconds.  Anything typed meanwhile would be overwritten by
--- a late edit, so every edit here is applied only when the buffer is still at
--- the version the fill was computed for: the LSP version Neovim sent (its
--- changedtick at the last change) and the changedtick itself.
local M = {}

local api = vim.api
local util = vim.lsp.util

--- LSP position of a (0-based row, byte column) in `buf`, in the client's encoding.
---@param buf integer
---@param row integer 0-based
---@param col integer byte column, clamped to the line's length
---@param encoding string 'utf-8' | 'utf-16' | 'utf-32'
---@return lsp.Position
function M.position(buf, row, col, encoding)
  local line = api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or ''
  col = math.max(0, math.min(col, #line))
  return { line = row, character = vim.str_utfindex(line, encoding, col, false) }
end

--- LSP range between two (row, byte column) pairs, both 0-based, end exclusive.
function M.range(buf, srow, scol, erow, ecol, encoding)
  return {
    start = M.position(buf, srow, scol, encoding),
    ['end'] = M.position(buf, erow, ecol, encoding),
  }
end

--- The hole marker on `line` that a cursor at byte `col` means: the one it is
--- in or touching, else the nearest on the line.  Returns 0-based [start, end)
--- byte columns, or nil when the line has no marker.
---@param line string
---@param col integer
---@param marker string
---@return integer?, integer?
function M.hole_near(line, col, marker)
  if marker == '' then
    return nil
  end
  local best_start, best_end, best_distance
  local from = 1
  while true do
    local s, e = line:find(marker, from, true)
    if not s then
      break
    end
    local start, stop = s - 1, e -- 0-based, end exclusive
    local distance = col < start and start - col or (col > stop and col - stop or 0)
    if not best_distance or distance < best_distance then
      best_start, best_end, best_distance = start, stop, distance
    end
    from = e + 1
  end
  return best_start, best_end
end

--- What a request must remember to check its answer: the buffer's LSP version and tick.
---@param buf integer
---@return { buf: integer, version: integer, tick: integer }
function M.snapshot(buf)
  return { buf = buf, version = util.buf_versions[buf], tick = api.nvim_buf_get_changedtick(buf) }
end

--- Whether a result may still be applied: nil if so, else the reason not to.
---@param snap { buf: integer, version: integer, tick: integer }
---@param answered integer|nil the version the server says it filled
---@return string|nil
function M.stale(snap, answered)
  if not api.nvim_buf_is_valid(snap.buf) then
    return 'the buffer is gone'
  end
  if answered ~= nil and answered ~= vim.NIL and answered ~= snap.version then
    return ('the server filled version %s, not %s'):format(answered, snap.version)
  end
  local tick = api.nvim_buf_get_changedtick(snap.buf)
  if tick ~= snap.tick or util.buf_versions[snap.buf] ~= snap.version then
    return ('the buffer changed while filling (tick %d -> %d)'):format(snap.tick, tick)
  end
  return nil
end

--- The loaded buffers whose URI is `uri` (of those attached to `client`, when given), found
--- without making one: vim.uri_to_bufnr turns an unnamed buffer's URI, `file://`, into a
--- buffer of `/` (the root directory), never the unnamed buffer, which is how Neovim's own
--- applyEdit handler lost a scratch buffer's fills (`:enew`, `:set ft=python`).
---@param uri string
---@param client vim.lsp.Client?
---@return integer[]
function M.loaded_buffers(uri, client)
  local found = {}
  local bufs = client and vim.tbl_keys(client.attached_buffers or {}) or api.nvim_list_bufs()
  for _, buf in ipairs(bufs) do
    if api.nvim_buf_is_loaded(buf) and vim.uri_from_bufnr(buf) == uri then
      found[#found + 1] = buf
    end
  end
  return found
end

--- The one loaded buffer whose URI is `uri`; nil where there is none, or several (unnamed
--- buffers all have the URI `file://`: which one is meant cannot be told).
---@param uri string
---@return integer?
function M.loaded_buffer(uri)
  local found = M.loaded_buffers(uri)
  return #found == 1 and found[1] or nil
end

--- The buffer an edit for `uri` is meant for, or nil and why there is none: one of the
--- buffers the server was told of (`loaded_buffers`); two unnamed buffers share their URI,
--- so neither is edited.  A file the server was not told of is loaded, as Neovim does.
---@return integer?, string?
local function buffer_of(client, uri)
  local found = M.loaded_buffers(uri, client)
  if #found > 1 then
    return nil, M.shared_uri(#found, uri)
  end
  return found[1] or vim.uri_to_bufnr(uri)
end

--- Why `count` buffers that share `uri` (unnamed ones: `file://`) are not filled: the
--- server holds one text for the URI, which every one of them changes.
---@param count integer
---@param uri string
---@return string
function M.shared_uri(count, uri)
  return ('%d buffers share the URI %s (unnamed buffers): give this one a name '
    .. '(:file NAME) for dlm-lsp to edit it'):format(count, uri)
end

--- `workspace/applyEdit` handler that refuses edits for a version the buffer has
--- left.  Neovim's own handler only skips them (and still answers applied =
--- true), which would tell the server its fill landed when it did not.  Text edits go
--- to the buffer `buffer_of` finds; anything else (a file created or renamed) is
--- Neovim's own business.
function M.apply_workspace_edit(_, params, ctx)
  local client = assert(vim.lsp.get_client_by_id(ctx.client_id))
  local edit = params.edit
  local targets = {} -- { buf, edits } per text edit of a document, or { change } for the rest
  local function add(uri, text_edits, version)
    local buf, why = buffer_of(client, uri)
    if not buf then
      return why
    end
    if version ~= nil and version ~= vim.NIL and api.nvim_buf_is_loaded(buf)
      and util.buf_versions[buf] ~= version then
      -- worded as the plugin's own stale check words it (`M.stale`)
      return ('the buffer changed while filling (version %d -> %d)'):format(version,
        util.buf_versions[buf])
    end
    targets[#targets + 1] = { buf = buf, edits = text_edits }
  end
  local why
  for _, change in ipairs(edit.documentChanges or {}) do
    if change.textDocument and change.edits and not change.kind then
      why = why or add(change.textDocument.uri, change.edits, change.textDocument.version)
    else
      targets[#targets + 1] = { change = change }
    end
  end
  if not edit.documentChanges then
    for uri, text_edits in pairs(edit.changes or {}) do
      why = why or add(uri, text_edits, nil)
    end
  end
  if why then
    return { applied = false, failureReason = why }
  end
  local ok, err = pcall(function()
    for _, target in ipairs(targets) do
      if target.change then
        util.apply_workspace_edit({ documentChanges = { target.change } }, client.offset_encoding)
      else
        util.apply_text_edits(target.edits, target.buf, client.offset_encoding)
      end
    end
  end)
  return { applied = ok, failureReason = not ok and tostring(err) or nil }
end

return M
