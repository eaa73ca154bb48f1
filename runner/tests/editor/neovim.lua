-- Drives Neovim's built-in LSP client against `runner lsp` on one plan: reads the diagnostics
-- the client received, applies the quick fix of the misspelt dependency, renames a task and
-- writes the file. What it saw goes to $RUNNER_EDITOR_OUT as JSON; a failure is written there
-- too, so the test can say what went wrong. Written for Neovim 0.7 (Debian 12), whose client
-- is started with vim.lsp.start_client.

local out = {}
local function finish()
  local file = io.open(os.getenv("RUNNER_EDITOR_OUT"), "w")
  file:write(vim.fn.json_encode(out))
  file:close()
  vim.cmd("qall!")
end

local function step(name, fn)
  local ok, err = pcall(fn)
  if not ok then
    out.failed = name .. ": " .. tostring(err)
    finish()
  end
end

local plan = os.getenv("RUNNER_EDITOR_PLAN")
local buf, client_id, client

-- The diagnostics the client holds, as {code, line} pairs.
local function held()
  local seen = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local lsp = (d.user_data or {}).lsp or {}
    table.insert(seen, { code = lsp.code or d.code, line = d.lnum, severity = d.severity })
  end
  table.sort(seen, function(a, b) return a.line < b.line end)
  return seen
end

local function has(code)
  for _, d in ipairs(held()) do
    if d.code == code then return true end
  end
  return false
end

local function wait(what, condition)
  if not vim.wait(30000, condition, 20) then
    error("timed out waiting for " .. what .. "; diagnostics: " .. vim.fn.json_encode(held()))
  end
end

-- The version of the buffer the last published diagnostics were for: the server has read
-- every edit once it reaches the buffer's own version.
local published = -1
local publish = vim.lsp.handlers["textDocument/publishDiagnostics"]
vim.lsp.handlers["textDocument/publishDiagnostics"] = function(err, result, ctx, config)
  if result and result.version then published = result.version end
  return publish(err, result, ctx, config)
end

local function caught_up()
  wait("the server to read the latest edit", function() return published >= vim.lsp.util.buf_versions[buf] end)
end

step("start", function()
  vim.cmd("edit " .. vim.fn.fnameescape(plan))
  buf = vim.api.nvim_get_current_buf()
  client_id = vim.lsp.start_client({
    name = "runner",
    cmd = { os.getenv("RUNNER_BIN"), "lsp" },
    root_dir = vim.fn.fnamemodify(plan, ":h"),
  })
  assert(client_id, "the client started")
  vim.lsp.buf_attach_client(buf, client_id)
  client = vim.lsp.get_client_by_id(client_id)
end)

step("diagnostics", function()
  wait("the first diagnostics", function() return has("plan::unknown_dependency") and has("plan::template_not_ancestor") end)
  out.opened = held()
end)

step("hover", function()
  local line = vim.fn.search("id: draft", "nw") - 1
  local params = { textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = line, character = 12 } }
  local reply = client.request_sync("textDocument/hover", params, 10000, buf)
  out.hover = reply.result.contents.value
end)

step("quick fix", function()
  local typo
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.user_data.lsp.code == "plan::unknown_dependency" then typo = d end
  end
  -- What vim.lsp.buf.code_action sends: the range, and the diagnostics there in LSP's terms.
  local range = {
    start = { line = typo.lnum, character = typo.col },
    ["end"] = { line = typo.end_lnum, character = typo.end_col },
  }
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = range,
    context = { diagnostics = { { range = range, message = typo.message, code = typo.user_data.lsp.code } } },
  }
  local reply = client.request_sync("textDocument/codeAction", params, 10000, buf)
  assert(reply and reply.result, "no code actions: " .. vim.inspect(reply))
  local action = reply.result[1]
  out.action = action.title
  vim.lsp.util.apply_workspace_edit(action.edit, client.offset_encoding)
  wait("the fix to be read", function() return not has("plan::unknown_dependency") end)
  out.fixed = held()
end)

step("rename", function()
  local line = vim.fn.search("id: search", "nw") - 1
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = line, character = 12 },
    newName = "gather",
  }
  local reply = client.request_sync("textDocument/rename", params, 10000, buf)
  vim.lsp.util.apply_workspace_edit(reply.result, client.offset_encoding)
  vim.cmd("write")
  caught_up()
  local refs = client.request_sync("textDocument/references", {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = line, character = 12 },
    context = { includeDeclaration = true },
  }, 10000, buf)
  out.references = #refs.result
  out.renamed = held()
end)

step("finish", finish)
