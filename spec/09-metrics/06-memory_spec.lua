-- Memory: registries, families, series, function series, runtime sets,
-- workqueue exports and health state are all released, whatever order they
-- go in — checked with LeakSanitizer in child processes and with ASan in process.
local helpers = require("helpers")
local core = require("luna.core")


describe("metrics memory", function()
  it("C API: references, release callbacks and every freeing order (LeakSanitizer)", function()
    local out, rc = helpers.run_leak_checked(helpers.fixtures .. "/metrics_c")
    assert.equal(0, rc, out)
    assert.matches("metrics_c: all ok", out)
    assert.not_matches("LeakSanitizer", out)
  end)

  it("Lua objects: __gc frees everything in any order (LeakSanitizer)", function()
    local script = [[
      local core = require("luna.core")
      for round = 1, 3 do
        local reg = core.metrics.new()
        local c = reg:counter{ name = "c_total", labels = { "a", "b" } }
        local h = reg:histogram{ name = "h", labels = { "a" }, buckets = { 1, 2, 3 } }
        local g = reg:gauge{ name = "g", labels = { "a" } }
        local keep = {}
        for i = 1, 2000 do
          c:labels("x" .. i % 7, "y" .. i):inc()
          h:labels("x" .. i % 13):observe(i % 5)
          if i % 100 == 0 then
            keep[#keep + 1] = g:func(function() return i end, "f" .. i)
          end
        end
        c:remove_matching("a", "x3")
        g:remove("f100")
        local rt = core.metrics.runtime(reg)
        local ctl = rt:controller("ctl" .. round, 2)
        ctl:script("sha")
        rt:informer("v1/Pod", function() return 1 end)
        rt:lua_state("main")
        rt:rest_request(200, "GET", "h")
        local q = core.workqueue.new{ clock = "fake", name = "q" }
        core.metrics.export_workqueue(reg, q)
        q:add("k"); q:get()
        local q2 = core.workqueue.new{ clock = "fake", name = "q2" }
        core.metrics.export_workqueue(reg, q2):detach()
        assert(#reg:render() > 0)
        local hs = core.health.new{ clock = round == 2 and "real" or "fake" }
        hs:set("a", false, "x")
        hs:render("readyz", { verbose = true })
        if round == 1 then c:unregister() end
        if round == 3 then reg = nil end -- the registry goes while handles live
        collectgarbage()
      end
      collectgarbage(); collectgarbage()
      core.loop.run(0.01)
      print("script done")
    ]]
    local file = helpers.write_file(helpers.tmpdir() .. "/leak.lua", script)
    local out, rc = helpers.run_leak_checked(string.format("LUA_CPATH='%s/lua/?.so' luajit %s",
      helpers.build, file))
    assert.equal(0, rc, out)
    assert.matches("script done", out)
    assert.not_matches("LeakSanitizer", out)
  end)

  it("keeps function series working across many collections", function()
    local reg = core.metrics.new()
    local g = reg:gauge{ name = "g", labels = { "i" } }
    for i = 1, 200 do
      g:func(function() return i end, tostring(i)) -- handles dropped at once
      if i % 50 == 0 then collectgarbage() end
    end
    collectgarbage()
    local text = reg:render()
    assert.matches('g{i="137"} 137\n', text, 1, true)
    assert.equal(200, g:count())
  end)
end)
