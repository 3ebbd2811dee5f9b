-- The tree's shape.  host/ is layered (docs/internals.md): a folder
-- includes only from the layers below it, the dev server only from base/
-- (it is its own archive, linked into `luna` only), and nothing in the core
-- includes the dev server.  The luna executable's Lua states get the
-- script-facing luna.core only: the spec-only bindings are not even linked
-- into it.  spec/ areas, and the specs in each, are numbered without
-- collisions.  Every relative link in README.md and docs/ leads to a file
-- in the tree.
local helpers = require("helpers")

-- Lower rank = lower layer.  A file may include its own folder and any
-- folder of a lower rank.
local RANK = { base = 0, client = 1, cache = 2, queue = 3, lua = 4, script = 5, serve = 6,
               cluster = 7, controller = 8, api = 9, runtime = 10, testing = 11 }

-- Tools run without the ASan runtime `make test` preloads into busted.
local function sh(cmd)
  return helpers.run("env -u LD_PRELOAD -u ASAN_OPTIONS " .. cmd)
end

local function sources()
  local out, rc = sh("find host -name '*.[ch]'")
  assert.equal(0, rc, out)
  local files = {}
  for path in out:gmatch("[^\n]+") do files[#files + 1] = path end
  table.sort(files)
  return files
end

-- Every `#include "dir/file.h"` of a file: { line = n, dir = "dir", text = ... }.
local function includes(path)
  local list, n = {}, 0
  for line in assert(io.open(path)):lines() do
    n = n + 1
    local target = line:match('^%s*#%s*include%s+"([^"]+)"')
    if target then
      list[#list + 1] = { line = n, dir = target:match("^([^/]+)/"), text = target }
    end
  end
  return list
end

-- Why `from` (a folder of host/, or "main") may not include `to`, or nil.
local function violation(from, to)
  if not to then return "include without a layer folder" end
  if from == to then return nil end
  if from == "main" then return to == "testing" and "main.c uses the spec-only bindings" or nil end
  if from == "devserver" then
    return to ~= "base" and "the dev server depends on base/ only" or nil
  end
  if to == "devserver" then return "the core does not include the dev server" end
  if not RANK[from] or not RANK[to] then return "unknown layer" end
  if RANK[to] > RANK[from] then return "upward include" end
  return nil
end

describe("host/ layering", function()
  it("has every source file in a layer folder", function()
    for _, path in ipairs(sources()) do
      local dir = path:match("^host/([^/]+)/")
      assert(path == "host/main.c" or RANK[dir] or dir == "devserver",
             path .. " is not in a layer folder")
    end
  end)

  it("includes only downward", function()
    local bad = {}
    local checked = 0
    for _, path in ipairs(sources()) do
      local from = path == "host/main.c" and "main" or path:match("^host/([^/]+)/")
      for _, inc in ipairs(includes(path)) do
        checked = checked + 1
        local why = violation(from, inc.dir)
        if why then bad[#bad + 1] = ("%s:%d: %s (%s)"):format(path, inc.line, inc.text, why) end
      end
    end
    assert(checked > 300, "too few includes found: " .. checked)
    assert(#bad == 0, "layering violations:\n" .. table.concat(bad, "\n"))
  end)

  it("rejects the kinds of include it is there to catch", function()
    assert.truthy(violation("runtime", "testing"))
    assert.truthy(violation("script", "controller"))
    assert.truthy(violation("controller", "api"))
    assert.truthy(violation("serve", "runtime"))
    assert.truthy(violation("base", "client"))
    assert.truthy(violation("cache", "devserver"))
    assert.truthy(violation("devserver", "runtime"))
    assert.truthy(violation("main", "testing"))
    assert.is_nil(violation("runtime", "lua"))
    assert.is_nil(violation("devserver", "base"))
    assert.is_nil(violation("main", "devserver"))
  end)
end)

-- Include circles between the files of one folder.  A module is a file
-- pair (x.c + x.h); a module includes another if either of its files
-- includes the other's header.  A private header (`x_impl.h`) makes the
-- files that include it one unit with x (they divide one concept).  The
-- dev server's modules all share its state (devserver_state.h embeds their
-- structs), so there only direct pairs (a includes b's header and b a's)
-- count.  Returns the circles found, each as "a -> b -> ... -> a".
local function circles(files)
  local unit = {}
  local function module_of(path) return (path:gsub("%.[ch]$", "")) end
  for _, path in ipairs(files) do
    local m = module_of(path)
    unit[m] = unit[m] or m:match("^(.*)_impl$") or m
    for _, inc in ipairs(includes(path)) do
      local base = inc.text:match("^(.*)_impl%.h$")
      if base then unit[m] = "host/" .. base end
    end
  end
  local function u(m) return unit[m] or m end
  local edges, direct = {}, {}
  for _, path in ipairs(files) do
    local from = u(module_of(path))
    for _, inc in ipairs(includes(path)) do
      local to = u("host/" .. inc.text:gsub("%.h$", ""))
      if to ~= from then
        edges[from] = edges[from] or {}
        edges[from][to] = true
        direct[from .. " " .. to] = true
      end
    end
  end
  local found = {}
  local names = {}
  for m in pairs(edges) do names[#names + 1] = m end
  table.sort(names)
  for _, start in ipairs(names) do
    if start:match("^host/devserver/") then
      for to in pairs(edges[start]) do
        if start < to and direct[to .. " " .. start] and not to:match("devserver_state$")
           and not start:match("devserver_state$") then
          found[#found + 1] = start .. " -> " .. to .. " -> " .. start
        end
      end
    else
      -- depth-first search for a path back to start through larger names,
      -- so each circle is reported once, from its smallest module
      local path, on = { start }, { [start] = true }
      local function dfs(m)
        for to in pairs(edges[m] or {}) do
          if to == start and #path > 1 then
            found[#found + 1] = table.concat(path, " -> ") .. " -> " .. start
          elseif to > start and not on[to] then
            on[to] = true
            path[#path + 1] = to
            dfs(to)
            path[#path] = nil
            on[to] = nil
          end
        end
      end
      dfs(start)
    end
  end
  table.sort(found)
  return found
end

describe("host/ include circles", function()
  it("has none between the files of a folder", function()
    local found = circles(sources())
    assert(#found == 0, "include circles:\n" .. table.concat(found, "\n"))
  end)

  it("finds the circles it is there to catch", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir .. "/host/a " .. dir .. "/host/devserver"))
    local function write(path, text)
      local f = assert(io.open(dir .. "/" .. path, "w"))
      f:write(text)
      f:close()
    end
    write("host/a/x.c", '#include "a/x.h"\n#include "a/y.h"\n')
    write("host/a/x.h", "")
    write("host/a/y.c", '#include "a/y.h"\n#include "a/z.h"\n')
    write("host/a/y.h", "")
    write("host/a/z.h", '#include "a/x.h"\n')
    write("host/a/p.c", '#include "a/p_impl.h"\n')
    write("host/a/p_impl.h", '#include "a/q.h"\n')
    write("host/a/q.c", '#include "a/p_impl.h"\n')
    write("host/a/q.h", "")
    write("host/devserver/d1.c", '#include "devserver/d2.h"\n')
    write("host/devserver/d1.h", "")
    write("host/devserver/d2.c", '#include "devserver/d1.h"\n')
    write("host/devserver/d2.h", "")
    local files = {}
    for _, p in ipairs{ "host/a/x.c", "host/a/x.h", "host/a/y.c", "host/a/y.h", "host/a/z.h",
                        "host/a/p.c", "host/a/p_impl.h", "host/a/q.c", "host/a/q.h",
                        "host/devserver/d1.c", "host/devserver/d1.h", "host/devserver/d2.c",
                        "host/devserver/d2.h" } do
      files[#files + 1] = p
    end
    -- includes() reads paths relative to the working directory
    local real_open = io.open
    io.open = function(path, mode)
      if path:match("^host/") then return real_open(dir .. "/" .. path, mode) end
      return real_open(path, mode)
    end
    local ok, result = pcall(circles, files)
    io.open = real_open
    os.execute("rm -rf " .. dir)
    assert(ok, result)
    assert.same({ "host/a/x -> host/a/y -> host/a/z -> host/a/x",
                  "host/devserver/d1 -> host/devserver/d2 -> host/devserver/d1" }, result)
  end)
end)

describe("the luna executable", function()
  it("does not contain the spec-only Lua bindings", function()
    local out, rc = sh("nm " .. helpers.luna)
    assert.equal(0, rc, out)
    local function defines(sym) return out:find(" T " .. sym .. "\n", 1, true) ~= nil end
    -- what it must contain, so an empty or stripped symbol table cannot pass
    assert(defines("luna_lua_core_push"), "luna lacks the script-facing luna.core")
    assert(defines("luna_lua_json_register"), "luna lacks core.json")
    for _, sym in ipairs{ "luaopen_luna_core", "luna_lua_loop_register",
                          "luna_lua_informer_register", "luna_lua_http_register",
                          "luna_lua_workqueue_register", "luna_lua_metrics_register",
                          "luna_lua_leader_register", "luna_lua_kubeconfig_register" } do
      assert(not defines(sym), "luna links the spec-only " .. sym)
    end
  end)
end)

describe("spec/ numbering", function()
  -- NN prefixes of names directly in dir (every entry starting with digits)
  local function prefixes(dir)
    local out, rc = sh("ls -1 " .. dir)
    assert.equal(0, rc, out)
    local seen, dups, n = {}, {}, 0
    for name in out:gmatch("[^\n]+") do
      local nn = name:match("^(%d+)%-")
      if nn then
        n = n + 1
        if seen[nn] then dups[#dups + 1] = dir .. "/" .. seen[nn] .. " and " .. name end
        seen[nn] = name
      end
    end
    return n, dups
  end

  it("gives every area and every spec in an area its own number", function()
    local n, dups = prefixes("spec")
    assert(n >= 16, "too few areas found: " .. n)
    local out = sh("ls -1d spec/[0-9]*/")
    for dir in out:gmatch("[^\n]+") do
      local _, d = prefixes(dir:gsub("/$", ""))
      for _, x in ipairs(d) do dups[#dups + 1] = x end
    end
    assert(#dups == 0, "numbers used twice:\n" .. table.concat(dups, "\n"))
  end)
end)

describe("the documentation", function()
  it("links only to files a clone has", function()
    local out = sh("ls -1 README.md docs/*.md lua/luna/*.md")
    local bad, checked = {}, 0
    for page in out:gmatch("[^\n]+") do
      local dir = page:match("^(.*)/[^/]+$") or "."
      local text = assert(helpers.read_file(page))
      for target in text:gmatch("%]%(([^)%s]+)%)") do
        local path = target:gsub("#.*$", "")
        if path ~= "" and not path:match("^%a+://") and not path:match("^mailto:") then
          checked = checked + 1
          local f = io.open(dir .. "/" .. path, "r")
          if f then f:close() else bad[#bad + 1] = page .. ": " .. target end
        end
      end
    end
    assert(checked > 20, "too few links found: " .. checked)
    assert(#bad == 0, "links to files a clone does not have:\n" .. table.concat(bad, "\n"))
  end)
end)
