-- `luna run --dev-server` (what `make run` does without KUBECONFIG): the
-- example controllers against an embedded dev server seeded with demos.
local helpers = require("helpers")
local cjson = require("cjson")

local function get(url)
  local out, rc = helpers.run("env -u LD_PRELOAD curl -s " .. url)
  assert(rc == 0, out)
  return cjson.decode(out)
end

describe("luna run --dev-server", function()
  it("reconciles the demo objects and cleans up on SIGTERM", function()
    local p = helpers.spawn({ helpers.luna, "run", "--log-level", "debug", "--dev-server",
      "--metrics-bind-address=0", "--health-probe-bind-address=0",
      "--seed", "deploy/crd-widgets.yaml", "--seed", "deploy/demo-objects.yaml", "controllers" })
    finally(function() p:stop() end)
    local _, url, kubeconfig = p:expect("dev server listening url=(%S+) kubeconfig=(%S+)", 20)
    -- each controller does its part, in whatever order
    local want = { "mirrored controller=configmap%-mirror", "rolled deployment controller=secret%-checksum",
                   "reconcile done controller=widget" }
    local deadline0 = helpers.now() + 20
    while #want > 0 do
      local line = p:read_line(math.max(0, deadline0 - helpers.now()))
      assert(line, "missing: " .. table.concat(want, ", ") .. "\n" .. table.concat(p.out, "\n"))
      for i = #want, 1, -1 do
        if line:find(want[i]) then table.remove(want, i) end
      end
    end
    -- the demo's results are visible through the server luna embeds
    local deadline = helpers.now() + 10
    local copy
    repeat
      copy = get(url .. "/api/v1/namespaces/demo-a/configmaps/settings")
    until copy.kind == "ConfigMap" or helpers.now() > deadline
    assert.equal("blue", copy.data.color)
    assert.is_not_nil(helpers.read_file(kubeconfig))
    p:kill()
    assert.equal(0, p:wait(20))
    assert.is_nil(helpers.read_file(kubeconfig), "the temporary kubeconfig is removed")
    p:stop()
  end)

  it("names a seed it cannot load and what is wrong with it, and exits 1", function()
    local dir = helpers.tmpdir()
    helpers.write_file(dir .. "/demo.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\n" ..
      "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
    -- a YAML bomb: nine levels of nine aliases
    local bomb = { "a0: &a0 [x, x, x, x, x, x, x, x, x]" }
    for i = 1, 9 do
      local refs = {}
      for _ = 1, 9 do refs[#refs + 1] = "*a" .. (i - 1) end
      bomb[#bomb + 1] = ("a%d: &a%d [%s]"):format(i, i, table.concat(refs, ", "))
    end
    helpers.write_file(dir .. "/bomb.yaml", table.concat(bomb, "\n") .. "\n")
    for file, why in pairs({ ["demo.yaml"] = "document 2: no resource for example%.com/v1 Widget",
                             ["bomb.yaml"] = "excessive aliasing",
                             ["missing.yaml"] = "cannot open: No such file or directory" }) do
      local out, rc = helpers.run(helpers.luna .. " run --dev-server --metrics-bind-address=0 " ..
        "--health-probe-bind-address=0 --seed " .. dir .. "/" .. file .. " controllers")
      assert.equal(1, rc, out)
      assert.matches('seed failed seed=[^ ]*' .. file:gsub("%.", "%%.") .. ' error="[^"]*' .. why, out)
      assert.not_matches("kubeconfig", out)
    end
  end)

  it("rejects --seed without --dev-server", function()
    local out, rc = helpers.run(helpers.luna .. " run --seed x.yaml controllers")
    assert.equal(2, rc)
    assert.matches("%-%-seed needs %-%-dev%-server", out)
  end)

  it("stops cleanly while clients are watching", function()
    local srv = helpers.spawn({ helpers.luna, "dev-server", "--listen", "127.0.0.1:0" })
    local _, url = srv:expect("listening on (http%S+)", 10)
    -- -D -: the response head on stdout, so the watch is known to be open
    local watch = helpers.spawn({ "env", "-u", "LD_PRELOAD", "curl", "-sN", "-D", "-",
      url .. "/api/v1/configmaps?watch=1" })
    watch:expect("^HTTP/1%.1 200", 10)
    srv:kill()
    assert.equal(0, srv:wait(10))
    watch:stop()
    srv:stop()
  end)
end)
