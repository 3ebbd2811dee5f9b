-- busted output handler: the usual terminal output, then one plain line
-- "N passed, N failed, N skipped" computed from busted's own counts (errors
-- count as failures).  The same line goes to $LUNA_SUMMARY_FILE so .ci/run
-- can repeat it as its last line.
return function(options)
  local busted = require("busted")
  local term = os.getenv("CI") and "plainTerminal" or "utfTerminal"
  local handler = require("busted.outputHandlers." .. term)(options)

  local function on_suite_end()
    local failed = handler.failuresCount + handler.errorsCount
    local line = string.format("%d passed, %d failed, %d skipped",
      handler.successesCount, failed, handler.pendingsCount)
    io.write("\n", line, "\n")
    io.flush()
    local path = os.getenv("LUNA_SUMMARY_FILE")
    if path then
      local f = io.open(path, "w")
      if f then f:write(line, "\n"); f:close() end
    end
    return nil, true
  end

  busted.subscribe({ "suite", "end" }, on_suite_end)
  return handler
end
