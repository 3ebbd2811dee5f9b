-- The runtime stage installs, by name, the Debian package of every shared
-- library luna needs, and nothing else but ca-certificates. What luna needs
-- is read at test time: `ldd build/luna` (the release binary), plus `ldd` of
-- a probe linked with the Makefile's EXE_LIBS and --no-as-needed, because the
-- linker drops a library luna names but does not call yet, which a later
-- change would start calling.
local helpers = require("helpers")
local support = require("16-deploy.support")

-- Packages debian:bookworm-slim already contains, so the runtime stage need
-- not name them: shared-library packages of debootstrap's minbase (Priority
-- required and Essential packages and their dependencies). The spec checks
-- this list against the dpkg database, so a package that is not in minbase
-- cannot hide here.
local IN_BOOKWORM_SLIM = {
  "libc6", "libgcc-s1", "libstdc++6",                         -- C/C++ runtime
  "zlib1g", "libzstd1", "liblzma5", "liblz4-1", "libbz2-1.0", -- compression
  "libgnutls30", "libp11-kit0", "libffi8", "libtasn1-6",      -- apt's TLS stack
  "libnettle8", "libhogweed6", "libgmp10", "libidn2-0", "libunistring2",
  "libgcrypt20", "libgpg-error0", "libxxhash0", "libcrypt1",
  "libselinux1", "libpcre2-8-0", "libsystemd0", "libcap2", "libudev1",
  "libacl1", "libattr1", "libaudit1", "libcap-ng0", "libdb5.3", "libmd0",
  "libseccomp2", "libtinfo6", "libuuid1", "libblkid1", "libmount1",
  "libsmartcols1", "libcom-err2",
}

-- Installed on purpose although luna does not link it: TLS roots for API
-- servers and exec credential endpoints outside the cluster.
local EXTRA = { ["ca-certificates"] = true }

local stages = support.stages(support.parse_dockerfile(assert(helpers.read_file("Dockerfile"))))

describe("runtime stage packages", function()
  local needs       -- package -> the library paths it provides
  local installs    -- set of packages the runtime stage installs

  setup(function()
    support.must("make -s build/luna")
    local probe_dir = helpers.tmpdir()
    helpers.write_file(probe_dir .. "/probe.c", "int main(void) { return 0; }\n")
    support.must(("cc -o %s/probe %s/probe.c -Wl,--no-as-needed %s"):format(
      probe_dir, probe_dir, support.make_var("EXE_LIBS")))
    local paths, seen = {}, {}
    for _, exe in ipairs({ "build/luna", probe_dir .. "/probe" }) do
      for _, p in ipairs(support.ldd(exe)) do
        if not seen[p] then seen[p] = true; paths[#paths + 1] = p end
      end
    end
    local owners, missing = support.owners(paths)
    assert(#missing == 0, "no Debian package owns " .. table.concat(missing, ", "))
    needs = {}
    for _, p in ipairs(paths) do
      local pkg = owners[p]
      needs[pkg] = needs[pkg] or {}
      table.insert(needs[pkg], p)
    end
    installs = support.set((support.apt_installs(stages[2])))
  end)

  it("finds luna's own libraries through ldd and dpkg", function()
    -- the libraries the skeleton already calls; anything else is read from ldd
    for _, pkg in ipairs({ "libluajit-5.1-2", "libev4", "libyaml-0-2", "libc6" }) do
      assert.truthy(needs[pkg], pkg .. " not among " .. table.concat(support.sorted_keys(needs), " "))
    end
  end)

  it("lists in IN_BOOKWORM_SLIM only packages of debootstrap's minbase", function()
    local minbase = support.minbase()
    assert.is_true(minbase["libc6"] and minbase["dpkg"] and not minbase["libcurl4"])
    local wrong = {}
    for _, p in ipairs(IN_BOOKWORM_SLIM) do
      if not minbase[p] then wrong[#wrong + 1] = p end
    end
    assert.same({}, wrong)
  end)

  it("installs the exact package of every library luna needs", function()
    local base = support.set(IN_BOOKWORM_SLIM)
    local absent = {}
    for _, pkg in ipairs(support.sorted_keys(needs)) do
      if not base[pkg] and not installs[pkg] then
        absent[#absent + 1] = pkg .. " (" .. table.concat(needs[pkg], " ") .. ")"
      end
    end
    assert.same({}, absent, "add these to the runtime stage's apt-get install")
  end)

  it("installs no package luna does not need", function()
    local extra = {}
    for _, pkg in ipairs(support.sorted_keys(installs)) do
      if not needs[pkg] and not EXTRA[pkg] then extra[#extra + 1] = pkg end
    end
    assert.same({}, extra, "the runtime stage installs packages no library of luna comes from")
  end)
end)
