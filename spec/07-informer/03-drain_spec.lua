-- When an informer drains its DeltaFIFO (host/cache/informer.h): a watch-sized
-- backlog at once inside luna_informer_wake, so an event's reconcile can
-- start before the rest of its watch chunk is parsed; lists in batches from
-- the loop; on_batch_end after each step; never a drain nested in a handler.
local helpers = require("helpers")


describe("informer drain", function()
  it("drains small backlogs in wake, large ones in batches, never nested (C, LeakSanitizer)", function()
    local out, rc = helpers.run_leak_checked(helpers.fixtures .. "/informer_c")
    assert.equal(0, rc, out)
    assert.matches("ok a watch%-sized backlog drains inside wake, then on_batch_end", out)
    assert.matches("ok larger backlogs drain from the loop in batches", out)
    assert.matches("ok a wake inside a handler does not nest a drain", out)
    assert.matches("informer_c: all ok", out)
    assert.not_matches("LeakSanitizer", out)
  end)
end)
