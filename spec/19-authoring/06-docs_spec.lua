-- The docs say what luna does (issue 30, item 7).  Every ```sh and
-- ```console block of README.md and docs/*.md that can run offline is run
-- in a temporary directory (holding the walk-through's files and copies of
-- deploy/ and controllers/, with this build's `luna` first on PATH) and
-- must exit 0; a ```console block's `$ ` lines are the commands and the
-- lines after one are output that must appear, in order (numbers may
-- differ).  The blocks that cannot run here are listed below, each with its
-- reason, and the list is checked both ways, so it cannot grow unnoticed.
-- Then the claims that are facts about other files: ports, the image's
-- build steps and ENTRYPOINT, the dev server's kinds, the kit's API.
local helpers = require("helpers")
local cjson = require("cjson")

-- file -> the first command line of each block that is not run, and why.
local SKIPPED = {
  ["README.md"] = {
    ["make deps   # installs the Debian packages (apt-get; run as root)"] =
      "installs packages as root; `make run` runs until stopped; `make test` takes 17+ minutes",
    ["make image"] = "builds a Docker image and deploys it to a cluster",
  },
  ["docs/authoring.md"] = {
    ["cp hello.lua hello_test.lua controllers/  # the spec stays out of the ConfigMap"] =
      "builds a Docker image and deploys it to a cluster",
    ["$ luna run --shadow --dev-server --seed demo.yaml ."] =
      "runs until stopped: 03-walkthrough_spec.lua runs it and checks its shadow write",
  },
  ["docs/container.md"] = {
    ["make image                                  # luna:0.1.0"] = "Docker and a cluster",
    ["docker run --rm --read-only --tmpfs /tmp -p 8443:8443 -p 8081:8081 \\"] =
      "Docker; spec/17-container runs the image the same way",
    ["kubectl create clusterrolebinding luna-metrics-reader \\"] = "a cluster",
    ["kubectl create clusterrolebinding luna-admin-ops --clusterrole=luna-admin \\"] = "a cluster",
  },
  ["docs/deploy.md"] = {
    ["docker build -t registry.example.com/luna:0.1.0 . && docker push registry.example.com/luna:0.1.0"] =
      "Docker and a registry",
    ["luna rbac controllers                      # print the role"] =
      "names DIR and crds.yaml as placeholders; spec/19-authoring/04-rbac_spec.lua runs each form",
  },
  ["docs/team-controllers.md"] = {
    ["cp onboarding/* backup/* controllers/    # specs too: `luna rbac` runs them; the ConfigMap takes the scripts"] =
      "a cluster: spec/16-deploy/08-team_controllers_kube_spec.lua runs both controllers with that role",
  },
  ["docs/sharding.md"] = {
    ["POD_NAME=web-0 luna run --shards --leader-election-namespace=luna controllers/"] = "a cluster",
  },
}
local NSKIPPED = 12 -- grows only with an entry above, and its reason

-- Tools a runnable block may need that a machine may lack: such a block is
-- reported pending there, not failed.
local OPTIONAL_TOOLS = { kubectl = true }

local function doc_files()
  local files = { "README.md" }
  local out = helpers.run("LC_ALL=C ls -1 docs/*.md")
  for f in out:gmatch("[^\n]+") do files[#files + 1] = f end
  return files
end

-- { file, line, lang, lines, text, first } for every ```sh / ```console block.
local function blocks()
  local list = {}
  for _, file in ipairs(doc_files()) do
    local text = assert(helpers.read_file(file))
    local n, open = 0, nil
    for line in (text .. "\n"):gmatch("([^\n]*)\n") do
      n = n + 1
      if open and line:match("^```%s*$") then
        open.first = open.lines[1] or ""
        open.text = table.concat(open.lines, "\n") .. "\n"
        if open.lang == "sh" or open.lang == "console" then list[#list + 1] = open end
        open = nil
      elseif open then
        open.lines[#open.lines + 1] = line
      elseif line:match("^```") then
        open = { file = file, line = n + 1, lang = line:match("^```(%w*)"), lines = {} }
      end
    end
  end
  return list
end

-- console: { { cmd = "...", out = { lines } }, ... }
local function console_steps(b)
  local steps, cur = {}, nil
  local i = 1
  while i <= #b.lines do
    local l = b.lines[i]
    if l:match("^%$ ") then
      local cmd = l:sub(3)
      while cmd:match("\\$") and i < #b.lines do
        i = i + 1
        cmd = cmd .. "\n" .. b.lines[i]
      end
      cur = { cmd = cmd, out = {} }
      steps[#steps + 1] = cur
    elseif cur and l ~= "" then
      cur.out[#cur.out + 1] = l
    end
    i = i + 1
  end
  return steps
end

local function mask(s) return (s:gsub("%d+", "0")) end

-- The temporary directory a block runs in, and the PATH with `luna`.
local function workdir()
  local dir = helpers.tmpdir()
  local bin = helpers.tmpdir()
  local exe = helpers.luna:sub(1, 1) == "/" and helpers.luna or (os.getenv("PWD") .. "/" .. helpers.luna)
  assert(helpers.run(("ln -s '%s' '%s/luna' && cp -r deploy controllers '%s/'"):format(exe, bin, dir)))
  -- the walk-through's files, as README.md and docs/authoring.md show them
  for _, doc in ipairs({ "README.md", "docs/authoring.md" }) do
    local text = assert(helpers.read_file(doc))
    for name, body in text:gmatch("<!%-%- walkthrough: ([%w_.%-]+) %-%->\n```%w*\n(.-)```\n") do
      helpers.write_file(dir .. "/" .. name, body)
    end
  end
  -- docs/team-controllers.md's controllers, in their directories
  for path, body in pairs(require("support.doc_examples").files()) do
    helpers.run("mkdir -p '" .. dir .. "/" .. path:match("^([^/]+)/") .. "'")
    helpers.write_file(dir .. "/" .. path, body)
  end
  return dir, bin
end

local function sh(dir, bin, script)
  local f = dir .. "/.block.sh"
  helpers.write_file(f, "set -e\n" .. script)
  return helpers.run(("cd '%s' && env -u LD_PRELOAD PATH='%s':\"$PATH\" KUBECONFIG= sh '%s'"):format(dir, bin, f))
end

local function commands_of(b)
  if b.lang == "console" then
    local cmds = {}
    for _, s in ipairs(console_steps(b)) do cmds[#cmds + 1] = s.cmd end
    return cmds
  end
  return { b.text }
end

-- The first tool an OPTIONAL_TOOLS entry names that is missing, or nil.
local function missing_tool(b)
  for _, c in ipairs(commands_of(b)) do
    for tool in pairs(OPTIONAL_TOOLS) do
      if c:find("%f[%w]" .. tool .. "%f[%W]") then
        local _, rc = helpers.run("command -v " .. tool .. " >/dev/null")
        if rc ~= 0 then return tool end
      end
    end
  end
end

describe("the docs' command blocks", function()
  local all = blocks()

  it("are run or skipped for a reason; the skipped list is exact", function()
    local seen, nskipped = {}, 0
    for _, b in ipairs(all) do
      local reason = SKIPPED[b.file] and SKIPPED[b.file][b.first]
      if reason then
        nskipped = nskipped + 1
        seen[b.file .. "\0" .. b.first] = true
      end
    end
    for file, entries in pairs(SKIPPED) do
      for first in pairs(entries) do
        assert.is_true(seen[file .. "\0" .. first] ~= nil,
          ("SKIPPED names a block that is not there: %s: %s"):format(file, first))
      end
    end
    assert.equal(NSKIPPED, nskipped)
    assert.is_true(#all - nskipped >= 3, "fewer than 3 blocks run")
  end)

  for _, b in ipairs(all) do
    local reason = SKIPPED[b.file] and SKIPPED[b.file][b.first]
    if not reason then
      it(("%s:%d runs as shown: %s"):format(b.file, b.line, b.first), function()
        local tool = missing_tool(b)
        if tool then return pending(tool .. " is not installed") end
        local dir, bin = workdir()
        if b.lang == "sh" then
          local out, rc = sh(dir, bin, b.text)
          assert.equal(0, rc, out)
          return
        end
        local steps = console_steps(b)
        assert.is_true(#steps > 0, "a console block without a `$ ` line")
        for _, s in ipairs(steps) do
          local out, rc = sh(dir, bin, s.cmd .. "\n")
          assert.equal(0, rc, ("$ %s\n%s"):format(s.cmd, out))
          local got = mask(out)
          local at = 1
          for _, want in ipairs(s.out) do
            local i, j = got:find(mask(want), at, true)
            assert.is_not_nil(i, ("$ %s: no line %q (in order) in:\n%s"):format(s.cmd, want, out))
            at = j + 1
          end
        end
      end)
    end
  end
end)

describe("the docs' facts", function()
  it("docs/deploy.md: /metrics is HTTPS on the port the Deployment exposes", function()
    local doc = assert(helpers.read_file("docs/deploy.md"))
    local dep = assert(helpers.read_file("deploy/deployment.yaml"))
    local port = assert(dep:match("%- name: metrics%s+containerPort: (%d+)"), "no metrics port")
    assert.matches("metrics on port `metrics` %(HTTPS, " .. port .. "%f[%D]", doc)
    assert.is_nil(doc:find("(8080)", 1, true))
  end)

  it("docs/deploy.md: the image's build steps are the Dockerfile's", function()
    local doc = assert(helpers.read_file("docs/deploy.md"))
    local intro = assert(doc:match("^.-\n\n(.-)\n\n"))
    local dockerfile = assert(helpers.read_file("Dockerfile"))
    local steps = {}
    for line in dockerfile:gmatch("[^\n]+") do
      if not line:match("^%s*#") then
        for cmd in line:gmatch("make [^&\\\n]+") do
          cmd = cmd:gsub("%s+$", ""):gsub('%-j"%$%(nproc%)" ', "")
          steps[#steps + 1] = cmd
        end
      end
    end
    assert.is_true(#steps >= 3, "Dockerfile: " .. #steps .. " make commands")
    local in_doc = {}
    for cmd in intro:gmatch("`(make [^`]+)`") do in_doc[#in_doc + 1] = cmd end
    assert.same(steps, in_doc)
  end)

  it("docs/container.md: the ENTRYPOINT is `luna run`, so only its flags follow", function()
    local doc = assert(helpers.read_file("docs/container.md"))
    local entry = assert(helpers.read_file("Dockerfile"):match("\nENTRYPOINT (%b[])"))
    assert.matches("ENTRYPOINT " .. entry:gsub("%p", "%%%0"), doc)
    -- the mistake it warns of fails as it says
    local quoted = assert(doc:match("fails with `([^`]+)`"), "no quoted error")
    local out, rc = helpers.run(helpers.luna .. " run run /etc/luna/controllers")
    assert.equal(2, rc, out)
    assert.matches(quoted, out, 1, true)
  end)

  it("docs/deploy.md: binding a role needs `bind` on it", function()
    local doc = assert(helpers.read_file("docs/deploy.md"))
    assert.matches("`bind`", doc, 1, true)
    assert.matches("RoleBindings", doc, 1, true)
  end)

  it("README.md: the dev server's kinds are the generated table's, which it serves", function()
    local readme = assert(helpers.read_file("README.md"))
    local para = assert(readme:match("\n## The dev server\n.-\nAn in%-memory(.-)\n\n"))
    assert.is_nil(para:find("the core kinds", 1, true))
    -- the README points at the generated table rather than keeping a list
    local TABLE = "host/devserver/devserver_resources.c"
    assert.matches("(" .. TABLE .. ")", para, 1, true)
    local table_src = assert(helpers.read_file(TABLE))
    assert.matches("GENERATED by `make resources`", table_src:sub(1, 200), 1, true)
    local p = helpers.spawn({ helpers.luna, "dev-server", "--listen", "127.0.0.1:0" })
    local _, url = p:expect("listening on (http://%S+)", 20)
    local body = helpers.run("env -u LD_PRELOAD curl -s -f --max-time 10 " .. url .. "/api/v1")
    p:stop()
    local kinds = {}
    for _, r in ipairs(cjson.decode(body).resources) do
      if not r.name:find("/", 1, true) then kinds[#kinds + 1] = r.kind end
    end
    assert.is_true(#kinds >= 5)
    for _, k in ipairs(kinds) do
      assert.matches('"' .. k .. '"', table_src, 1, true, TABLE .. " does not name v1 " .. k)
    end
  end)

  it("docs/authoring.md: the kit's table names every env method and start option", function()
    local src = assert(helpers.read_file("lua/luna/testing.lua"))
    local doc = assert(helpers.read_file("docs/authoring.md"))
    local kit = assert(doc:match("\n### The kit\n(.-)\n### "), "no kit section")
    local INTERNAL = { command = "the control channel itself, under env:status and the rest" }
    for m in src:gmatch("\nfunction Env:([%a][%w_]*)%(") do
      if not INTERNAL[m] then assert.matches("`env:" .. m .. "%(", kit, nil, false, "env:" .. m) end
    end
    local start = assert(src:match("\nfunction testing%.start%(opts%)(.-)\nend\n"))
    local opts = {}
    for o in start:gmatch("opts%.([%a_]+)") do opts[o] = true end
    for o in pairs(opts) do
      assert.matches("\n  " .. o .. " = ", kit, nil, false, "testing.start option " .. o)
    end
  end)
end)
