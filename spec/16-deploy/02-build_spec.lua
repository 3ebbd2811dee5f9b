-- The Dockerfile's build stage builds the way the Makefile does: it runs make
-- targets (never compiler commands of its own), installs the Makefile's
-- build packages through `make deps-build`, and those packages supply every
-- header, library and pkg-config file the build reads. Without a Docker
-- engine, the stage is replayed in an empty directory holding only what it
-- COPYs.
local helpers = require("helpers")
local support = require("16-deploy.support")

local stages = support.stages(support.parse_dockerfile(assert(helpers.read_file("Dockerfile"))))
local build = stages[1]

-- The make commands of the build stage, options such as -j dropped.
local function make_commands()
  local list = {}
  for _, c in ipairs(support.stage_commands(build)) do
    if c[1] == "make" then
      local args = {}
      for i = 2, #c do
        if not c[i]:match("^%-") then args[#args + 1] = c[i] end
      end
      list[#list + 1] = table.concat(args, " ")
    end
  end
  return list
end

describe("Dockerfile build stage", function()
  it("runs only make, and apt-get just to install make itself", function()
    for _, c in ipairs(support.stage_commands(build)) do
      local ok = c[1] == "make" or c[1] == "apt-get"
        or (c[1] == "rm" and c[2] == "-rf" and c[3] == "/var/lib/apt/lists/*" and #c == 3)
      assert.is_true(ok, ("line %d runs %q: build commands belong in the Makefile"):format(
        c.line, table.concat(c, " ")))
    end
    local packages = support.apt_installs(build)
    assert.same({ "make" }, packages)
  end)

  it("installs the build packages, builds and installs with the Makefile's targets", function()
    assert.same({ "deps-build", "build/luna", "install-runtime PREFIX=/usr/local DESTDIR=/out" },
      make_commands())
  end)

  it("uses make targets that exist", function()
    for _, target in ipairs({ "deps-build", "build/luna", "install-runtime" }) do
      local out, rc = support.sh("make -n " .. target .. " >/dev/null")
      assert.equal(0, rc, "make -n " .. target .. ": " .. out)
    end
  end)
end)

describe("make deps-build", function()
  local deb_pkgs = support.words(support.make_var("DEB_PKGS"))
  local build_pkgs = support.words(support.make_var("DEB_BUILD_PKGS"))

  it("installs DEB_BUILD_PKGS: the part of DEB_PKGS the build needs", function()
    local out = support.must("make -n deps-build")
    local listed = out:match("for p in ([^;]*);")
    assert.truthy(listed, "make -n deps-build shows no package loop:\n" .. out)
    assert.same(build_pkgs, support.words(listed))
    local all = support.set(deb_pkgs)
    for _, p in ipairs(build_pkgs) do assert.is_true(all[p] == true, p .. " is not in DEB_PKGS") end
    local set = support.set(build_pkgs)
    assert.is_true(set["build-essential"] == true and set["pkg-config"] == true,
      "DEB_BUILD_PKGS lacks build-essential or pkg-config")
  end)

  it("brings every header, library and .pc file the build reads", function()
    local closure = support.closure(build_pkgs)
    local files = {}

    -- headers, including the compiler's and libc's
    local dep = support.must("cc " .. support.make_var("BASE_CFLAGS") .. " -M host/*.c host/*/*.c")
    for path in dep:gsub("\\\n", " "):gmatch("%s(/%S+)") do files[path] = "header" end

    -- libraries named on the link lines
    local libs = support.make_var("EXE_LIBS") .. " " .. support.make_var("MOD_LIBS")
    for name in libs:gmatch("%-l(%S+)") do
      -- as the linker searches: the shared library, else the static one
      local path = support.must("cc -print-file-name=lib" .. name .. ".so"):gsub("%s+$", "")
      if not path:match("^/") then
        path = support.must("cc -print-file-name=lib" .. name .. ".a"):gsub("%s+$", "")
      end
      assert.matches("^/", path, nil, "the linker cannot find -l" .. name)
      files[path] = "library -l" .. name
    end

    -- pkg-config files of PKGS and everything they require
    local pending, seen = support.words(support.make_var("PKGS")), {}
    while #pending > 0 do
      local mod = table.remove(pending)
      if not seen[mod] then
        seen[mod] = true
        local path = support.must("pkg-config --path " .. mod):gsub("%s+$", "")
        files[path] = "pkg-config " .. mod
        local req = support.must("pkg-config --print-requires --print-requires-private " .. mod)
        for r in req:gmatch("([%w%.%+%-_]+)[^\n]*") do pending[#pending + 1] = r end
      end
    end

    local paths = support.sorted_keys(files)
    assert.is_true(#paths > 20, "found only " .. #paths .. " system files")
    local owners, missing = support.owners(paths)
    assert.same({}, missing)
    local uncovered = {}
    for _, p in ipairs(paths) do
      if not closure[owners[p]] then
        uncovered[#uncovered + 1] = ("%s (%s) from %s"):format(p, files[p], owners[p])
      end
    end
    assert.same({}, uncovered, "add these packages to DEB_PKGS and keep them out of DEB_NOBUILD_PKGS")
  end)
end)

describe("the build stage replayed without Docker", function()
  local ctx, out

  setup(function()
    ctx = helpers.tmpdir()
    local src = ctx .. "/src"
    local workdir
    for _, ins in ipairs(build.instructions) do
      if ins.cmd == "WORKDIR" then workdir = ins.args end
      if ins.cmd == "COPY" then
        local w = support.words(ins.args)
        assert(#w == 2 and not w[1]:match("^%-%-"), "unexpected COPY " .. ins.args)
        assert(workdir == "/src", "COPY before WORKDIR /src")
        -- Docker's rules: a directory's contents go into the destination
        -- directory; a file goes into it when the destination ends in '/'.
        local from, dest = w[1]:gsub("/$", ""), src .. "/" .. w[2]
        support.must(("mkdir -p %s && if [ -d %s ]; then cp -R %s/. %s/; else cp %s %s; fi"):format(
          support.quote(dest), support.quote(from), support.quote(from), support.quote(dest),
          support.quote(from), support.quote(dest)))
      end
    end
    out = ctx .. "/out"
    -- the stage's own make commands, with DESTDIR moved into the tmpdir
    for _, args in ipairs(make_commands()) do
      if args ~= "deps-build" then
        support.must(("make -s -C %s %s"):format(support.quote(src),
          args:gsub("DESTDIR=/out", "DESTDIR=" .. out)))
      end
    end
  end)

  it("installs the entrypoint luna from the copied sources alone", function()
    local f = io.open(out .. "/usr/local/bin/luna", "rb")
    assert.truthy(f, "no /usr/local/bin/luna in the install tree")
    f:close()
    local v = support.must(out .. "/usr/local/bin/luna --version")
    assert.equal("luna " .. support.make_var("VERSION") .. "\n", v)
  end)

  it("installs only what `luna run` needs: a stripped executable and the Lua library", function()
    local files = support.must(("cd %s && find . -type f | LC_ALL=C sort"):format(support.quote(out)))
    local expect = { "./usr/local/bin/luna" }
    -- the library, with the editor definitions `luna stubs` copies out
    for name in support.must("cd lua/luna && LC_ALL=C ls -1 *.lua stubs/*.lua"):gmatch("[^\n]+") do
      expect[#expect + 1] = "./usr/local/share/lua/5.1/luna/" .. name
    end
    table.sort(expect)
    assert.same(expect, support.words(files))
    -- no static symbol table and no DWARF: the image carries neither
    local sections = support.must("readelf -S -W " .. support.quote(out .. "/usr/local/bin/luna"))
    assert.is_nil(sections:find("%.symtab"), "luna is not stripped")
    assert.is_nil(sections:find("%.debug_info"), "luna carries debug information")
    assert.truthy(sections:find("%.dynsym"), "no dynamic symbols: readelf output unexpected")
  end)

  it("installs a luna that finds its Lua library in the image layout", function()
    local dir = helpers.tmpdir()
    helpers.write_file(dir .. "/demo.lua", [[
local luna = require "luna"
return luna.controller { name = "demo", watch = "v1/ConfigMap", reconcile = function() end }
]])
    local log = support.sh(("cd / && unset LUNA_LUA_DIR && HOME=%s KUBECONFIG=%s/none timeout 20 %s/usr/local/bin/luna run %s"):format(
      dir, dir, out, dir))
    assert.is_nil(log:find("cannot find luna's Lua library", 1, true), log)
    assert.matches("controllers loaded[^\n]*count=1", log)
  end)
end)
