-- The README's "Your first controller" walk-through, run as written: the
-- files are the blocks README.md and docs/authoring.md mark with
-- `<!-- walkthrough: FILE -->` (a file shown in both must be the same), so
-- the docs cannot drift from what luna does.  Its steps: `luna test` passes
-- the spec, `luna run --shadow --dev-server --seed demo.yaml` logs the
-- shadow write docs/authoring.md shows, and `make deploy-sync`'s script
-- puts the controller, not its spec, into the ConfigMap.
local helpers = require("helpers")

local DOCS = { "README.md", "docs/authoring.md" }

-- { ["hello.lua"] = text, ... } from every marked block of the docs.
local function walkthrough_files()
  local files, where = {}, {}
  for _, doc in ipairs(DOCS) do
    local text = assert(helpers.read_file(doc))
    for name, body in text:gmatch("<!%-%- walkthrough: ([%w_.%-]+) %-%->\n```%w*\n(.-)```\n") do
      if files[name] then
        assert.equal(files[name], body, name .. " differs between " .. where[name] .. " and " .. doc)
      end
      files[name], where[name] = body, doc
    end
  end
  return files
end

describe("the first-controller walk-through", function()
  local dir, files

  before_each(function()
    files = walkthrough_files()
    dir = helpers.tmpdir()
    for name, body in pairs(files) do helpers.write_file(dir .. "/" .. name, body) end
  end)

  it("shows the controller, its spec and the seed, the same wherever shown", function()
    for _, name in ipairs { "hello.lua", "hello_test.lua", "demo.yaml" } do
      assert.is_not_nil(files[name], name .. " has no marked block in " .. table.concat(DOCS, " or "))
    end
    assert.matches("<!%-%- walkthrough: hello.lua %-%->", helpers.read_file("README.md"))
  end)

  it("passes luna test", function()
    local luna = helpers.luna
    if luna:sub(1, 1) ~= "/" then luna = helpers.run("pwd"):gsub("\n$", "") .. "/" .. luna end
    local out, rc = helpers.run("cd " .. dir .. " && " .. luna .. " test .")
    assert.equal(0, rc, out)
    assert.matches("ok +hello greets a labelled ConfigMap, and only that", out)
    assert.matches("1 passed, 0 failed, 0 pending", out)
  end)

  -- { key = value } of a log line's `key=value` fields (a value may be a
  -- quoted string with escapes); luna writes them in no fixed order.
  local function log_fields(line)
    local fields, i = {}, 1
    while true do
      local s, e, key = line:find("([%a_][%w_]*)=", i)
      if not s then return fields end
      local value
      if line:sub(e + 1, e + 1) == '"' then
        local j = e + 2
        while line:sub(j, j) ~= '"' do j = j + (line:sub(j, j) == "\\" and 2 or 1) end
        value, i = line:sub(e + 1, j), j + 1
      else
        value = line:match("^%S*", e + 1)
        i = e + 1 + #value
      end
      fields[key] = value
    end
  end

  it("logs in shadow mode the write docs/authoring.md shows, and nothing else", function()
    local doc = helpers.read_file("docs/authoring.md")
    local shown = assert(doc:match("\nINFO shadow write (controller=hello [^\n]*)\n"),
      "docs/authoring.md shows no shadow write line")
    local want = log_fields(shown)
    want.reconcile_id = nil -- varies
    assert.equal("patch", want.verb)
    local p = helpers.spawn { helpers.luna, "run", "--shadow", "--dev-server", "--seed", dir .. "/demo.yaml",
      "--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0", dir }
    local ok, err = pcall(function()
      -- a message holding '=' or '"' is quoted (docs/operations.md, "Logs")
      p:expect('WARN "shadow mode: every write is sent as a server%-side dry run', 20)
      local line = p:expect("INFO shadow write controller=hello ", 20)
      local have = log_fields(line:match("INFO shadow write (.*)$"))
      have.reconcile_id = nil
      assert.same(want, have)
      p:expect("INFO greeted controller=hello key=default/demo", 20)
    end)
    p:stop()
    assert(ok, err)
    assert.equal(0, p.status, p:drain(0))
    local out = table.concat(p.out, "\n")
    assert.is_nil(out:find("reconcile failed", 1, true), out)
    local _, writes = out:gsub("shadow write ", "")
    assert.equal(1, writes, out)
  end)

  it("deploys the controller, not its spec, through make deploy-sync's script", function()
    -- The script's shell and tools are not built with ASan: no preload for them.
    local out, rc = helpers.run("env -u LD_PRELOAD -u ASAN_OPTIONS -u UBSAN_OPTIONS deploy/sync-controllers.sh " .. dir)
    assert.equal(0, rc, out)
    local k = assert(helpers.read_file(dir .. "/kustomization.yaml"))
    assert.matches("\n  %- hello%.lua\n", k)
    assert.is_nil(k:find("hello_test", 1, true), k)
  end)
end)
