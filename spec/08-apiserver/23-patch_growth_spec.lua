-- A small PATCH cannot make a huge object: kube-apiserver bounds the bytes
-- a JSON patch's "copy" operations add (JSONPatchMaxCopyBytes, 3 MiB, as
-- evanphx/json-patch's AccumulatedCopySizeLimit: the compact JSON of each
-- copied value, summed over the patch) and the operations of one patch
-- (10,000).  A 2 KB patch of copies each doubling the object grew the dev
-- server past 15 GB before; now it is refused as kube refuses it, with
-- the object unchanged.  Merge patches, strategic merge patches and apply
-- have no operation that copies: what they build is no larger than the
-- object and the body (3 MiB, spec 17) together.
local client = require("support.apiserver_client")
local helpers = require("helpers")
local cjson = require("cjson")

local function hwm_kib(srv)
  local status = helpers.read_file("/proc/" .. srv.proc.pid .. "/status")
  return tonumber(status:match("VmHWM:%s*(%d+)"))
end

local JSON_PATCH = { content_type = "application/json-patch+json" }

describe("patch growth", function()
  local srv
  setup(function() srv = client.start() end)
  teardown(function() srv:stop() end)

  local function data_of(name)
    local code, cm = srv:request("GET", srv:ns_path("configmaps", name))
    assert.equal(200, code)
    return cm.data
  end

  it("refuses copies that add over 3 MiB with kube's 422, the object unchanged", function()
    srv:create_cm("grow", { seed = string.rep("s", 1024) })
    -- each copy puts the whole data map inside itself: the object doubles
    -- per operation (64 MiB after 16 of them, without end after more: the
    -- old code was seen past 15 GB); the patch is under 1 KB
    local ops = {}
    for i = 1, 16 do
      ops[i] = { op = "copy", from = "/data", path = "/data/c" .. i }
    end
    local before = not srv.real and hwm_kib(srv)
    local code, st, rawbody = srv:request("PATCH", srv:ns_path("configmaps", "grow"), ops, JSON_PATCH)
    assert(code == 422, tostring(code) .. " " .. tostring(rawbody))
    assert(#cjson.encode(ops) < 1024)
    assert.equal("Invalid", st.reason)
    assert.equal("the server rejected our request due to an error in our request", st.message)
    assert.same({ seed = string.rep("s", 1024) }, data_of("grow"))
    if before then
      local grown = (hwm_kib(srv) - before) / 1024
      assert(grown < 64, ("the dev server's peak RSS grew %.1f MiB for one refused patch"):format(grown))
    end
  end)

  it("counts every copy of the patch, not the object's size", function()
    -- copy then remove, four times over: the object never grows, but the
    -- copies add 3.2 MiB in all (kube counts what was copied, not what stays)
    local big = string.rep("b", 800 * 1024)
    srv:create_cm("sum", { big = big })
    local function rounds(n)
      local ops = {}
      for i = 1, n do
        ops[#ops + 1] = { op = "copy", from = "/data/big", path = "/data/b" .. i }
        ops[#ops + 1] = { op = "remove", path = "/data/b" .. i }
      end
      return ops
    end
    local code, st = srv:request("PATCH", srv:ns_path("configmaps", "sum"), rounds(4), JSON_PATCH)
    assert.equal(422, code)
    assert.equal("the server rejected our request due to an error in our request", st.message)
    -- three rounds (2.4 MiB) are within the bound
    code = srv:request("PATCH", srv:ns_path("configmaps", "sum"), rounds(3), JSON_PATCH)
    assert.equal(200, code)
    assert.same({ big = big }, data_of("sum"))
  end)

  it("applies copy and move chains within the bound", function()
    srv:create_cm("chain", { a = "1" })
    local code, cm = srv:request("PATCH", srv:ns_path("configmaps", "chain"), {
      { op = "copy", from = "/data/a", path = "/data/b" },
      { op = "move", from = "/data/b", path = "/data/c" },
      { op = "copy", from = "/data/c", path = "/data/d" },
      { op = "move", from = "/data/a", path = "/data/e" },
    }, JSON_PATCH)
    assert.equal(200, code)
    assert.same({ c = "1", d = "1", e = "1" }, cm.data)
  end)

  it("refuses a patch of over 10,000 operations with 413", function()
    srv:create_cm("many", { a = "1" })
    local ops = {}
    for i = 1, 10001 do ops[i] = { op = "test", path = "/data/a", value = "1" } end
    local code, st = srv:request("PATCH", srv:ns_path("configmaps", "many"), ops, JSON_PATCH)
    assert.equal(413, code)
    assert.equal("RequestEntityTooLarge", st.reason)
    assert.equal("Request entity too large: The allowed maximum operations in a JSON patch " ..
      "is 10000, got 10001", st.message)
    ops[10001] = nil
    assert.equal(200, (srv:request("PATCH", srv:ns_path("configmaps", "many"), ops, JSON_PATCH)))
  end)
end)
