--- The server's completion item, accepted from Neovim's own LSP completion, in full.
---
--- Neovim's omnifunc (`vim.lsp.omnifunc`, <C-x><C-o>) and `vim.lsp.completion` insert a
--- plain-text item's `word`: Neovim 0.11 makes it the item's text up to its first white
--- space, later versions (Neovim pull request 37949) its first line, and neither applies
--- the rest of the item's textEdit once it is accepted.  A fill is code with spaces and
--- lines in it, so accepting `return n` after `ret` left `return`.  Here, once the user
--- accepts a dlm item (<C-y>), the word Neovim inserted is replaced with the item's whole
--- text.  Completion plugins (nvim-cmp, blink.cmp) apply the textEdit themselves.
local M = {}

local api = vim.api

--- The whole text of the accepted item of `client_id` that Neovim inserted only the start
--- of, and where its inserted word lies (0-based row, byte columns); nil when the item is
--- not one of this client's, or Neovim inserted all of it, or the buffer no longer holds
--- the word where the item's edit starts (nothing is then replaced).
---@param completed table v:completed_item
---@param client vim.lsp.Client
---@return string?, integer?, integer?, integer?
local function partly_inserted(completed, client)
  local lsp = vim.tbl_get(completed, 'user_data', 'nvim', 'lsp') or {}
  local item = lsp.completion_item
  if lsp.client_id ~= client.id or not item or not item.textEdit then
    return nil
  end
  local edit, word = item.textEdit, completed.word or ''
  if edit.newText == word or not vim.startswith(edit.newText, word) then
    return nil
  end
  local row, col = unpack(api.nvim_win_get_cursor(0))
  row = row - 1
  local range = edit.range or edit.insert -- an InsertReplaceEdit has no `range`
  if not range or range.start.line ~= row then
    return nil
  end
  local line = api.nvim_get_current_line()
  local ok, first = pcall(vim.str_byteindex, line, client.offset_encoding or 'utf-16',
    range.start.character, false)
  if not ok or line:sub(first + 1, col) ~= word then
    return nil
  end
  return edit.newText, row, first, col
end

--- Complete a dlm item accepted in `buf` from Neovim's completion menu.
---@param client vim.lsp.Client
---@param buf integer
function M.attach(client, buf)
  api.nvim_create_autocmd('CompleteDone', {
    group = api.nvim_create_augroup(('dlm.completion.%d'):format(buf), { clear = true }),
    buffer = buf,
    callback = function()
      if vim.v.event.reason ~= 'accept' then -- <C-e>, or typing on: what was typed stays
        return
      end
      local text, row, first, col = partly_inserted(vim.v.completed_item, client)
      if not text then
        return
      end
      -- a fill for a `fileformat=dos` buffer comes with its `\r\n` breaks; a buffer's lines
      -- hold none (a kept `\r` shows as ^M and is written back as `\r\r\n`)
      local lines = vim.split((text:gsub('\r\n?', '\n')), '\n', { plain = true })
      api.nvim_buf_set_text(buf, row, first, row, col, lines)
      local last_col = #lines == 1 and first + #lines[1] or #lines[#lines]
      api.nvim_win_set_cursor(0, { row + #lines, last_col })
    end,
  })
end

return M
