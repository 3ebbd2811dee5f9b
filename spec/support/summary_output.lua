-- busted output handler: the usual terminal output, then one plain line
-- "N passed, N failed, N skipped" computed from busted's own counts (errors
-- count as failures).  The same line goes to $LUNA_SUMMARY_FILE so .ci/run
-- can repeat it as its last line.  Each failure's place and name go to that
-- file too, a line each before the count, so CI's tail names what failed
-- even when the run's output is cut.
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
      if f then
        for _, list in ipairs({ handler.failures, handler.errors }) do
          for _, failure in ipairs(list) do
            local trace = failure.trace or {}
            local message = tostring(failure.message or ""):gsub("%s+", " ")
            f:write(string.format("FAILED %s:%s %s: %s\n",
              trace.short_src or "?", trace.currentline or "?",
              failure.name or "?", message:sub(1, 300)))
          end
        end
        f:write(line, "\n")
        f:close()
      end
    end
    return nil, true
  end

  busted.subscribe({ "suite", "end" }, on_suite_end)
  return handler
end
