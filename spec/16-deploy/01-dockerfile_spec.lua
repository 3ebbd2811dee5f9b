-- The Dockerfile's shape: a Debian bookworm build stage, a bookworm-slim
-- runtime stage that runs luna as a non-root numeric user from
-- /etc/luna/controllers, and a build context without build output.
local helpers = require("helpers")
local support = require("16-deploy.support")

local text = assert(helpers.read_file("Dockerfile"), "no Dockerfile")
local instructions = support.parse_dockerfile(text)
local stages = support.stages(instructions)

local function last(stage, cmd)
  local found
  for _, ins in ipairs(stage.instructions) do
    if ins.cmd == cmd then found = ins end
  end
  return found
end

describe("Dockerfile reader", function()
  it("joins continued lines, drops comments and keeps line numbers", function()
    local list = support.parse_dockerfile(table.concat({
      "# syntax comment",
      "FROM debian:bookworm AS build",
      "",
      "RUN apt-get update \\",
      "  # a comment inside the continuation",
      " && apt-get install -y make",
      "run echo hi",
    }, "\n"))
    assert.same({ "FROM", "RUN", "RUN" }, { list[1].cmd, list[2].cmd, list[3].cmd })
    assert.equal(2, list[1].line)
    assert.equal(4, list[2].line)
    assert.equal("apt-get update   && apt-get install -y make", list[2].args)
    local cmds = support.run_commands(list[2].args)
    assert.same({ "apt-get", "update" }, { cmds[1][1], cmds[1][2] })
    assert.same({ "apt-get", "install", "-y", "make" }, { cmds[2][1], cmds[2][2], cmds[2][3], cmds[2][4] })
  end)

  it("rejects a file that ends inside a continued line", function()
    assert.has_error(function() support.parse_dockerfile("FROM x\nRUN a \\") end,
      "Dockerfile ends inside a continued line (line 2)")
  end)

  it("reads apt-get install packages and options of a stage", function()
    local st = support.stages(support.parse_dockerfile(
      "FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y --no-install-recommends a b \\\n c && rm -rf x"))
    local pkgs, installs = support.apt_installs(st[1])
    assert.same({ "a", "b", "c" }, pkgs)
    assert.is_true(installs[1].options["--no-install-recommends"])
  end)
end)

describe("Dockerfile", function()
  it("has exactly two stages: build on debian:bookworm, runtime on debian:bookworm-slim", function()
    assert.equal(2, #stages)
    assert.equal("debian:bookworm", stages[1].from)
    assert.equal("build", stages[1].name)
    assert.equal("debian:bookworm-slim", stages[2].from)
  end)

  it("names every base image with an explicit tag other than latest", function()
    for _, ins in ipairs(instructions) do
      if ins.cmd == "FROM" then
        local image = support.words(ins.args)[1]
        assert.matches("^[%w%.%-/]+:[%w%.%-_]+$", image, nil, "FROM without a tag at line " .. ins.line)
        assert.is_nil(image:match(":latest$"), "FROM ...:latest at line " .. ins.line)
      end
    end
  end)

  it("installs Debian packages only with --no-install-recommends and removes the apt lists", function()
    for _, st in ipairs(stages) do
      local _, installs = support.apt_installs(st)
      assert.is_true(#installs > 0, "stage " .. st.from .. " installs nothing")
      for _, inst in ipairs(installs) do
        assert.is_true(inst.options["--no-install-recommends"] == true,
          "apt-get install without --no-install-recommends at line " .. inst.line)
        assert.is_true(inst.options["-y"] == true, "apt-get install without -y at line " .. inst.line)
      end
      -- every RUN that updates the lists also removes them
      for _, ins in ipairs(st.instructions) do
        if ins.cmd == "RUN" and ins.args:find("apt-get update", 1, true) then
          assert.truthy(ins.args:find("rm -rf /var/lib/apt/lists/*", 1, true),
            "apt lists left in the layer of line " .. ins.line)
        end
      end
    end
  end)

  it("runs the runtime stage as the numeric non-root user 65532 it creates", function()
    local user = last(stages[2], "USER")
    assert.truthy(user, "runtime stage has no USER")
    assert.equal("65532:65532", user.args)
    local run = table.concat((function()
      local l = {}
      for _, ins in ipairs(stages[2].instructions) do if ins.cmd == "RUN" then l[#l + 1] = ins.args end end
      return l
    end)(), "\n")
    assert.matches("groupadd [^\n]*%-%-gid 65532", run)
    assert.matches("useradd [^\n]*%-%-uid 65532 %-%-gid 65532", run)
    -- nothing after USER may switch back
    local after = false
    for _, ins in ipairs(stages[2].instructions) do
      if ins == user then after = true elseif after then assert.not_equal("USER", ins.cmd) end
    end
  end)

  it("runs `luna run` on /etc/luna/controllers in exec form", function()
    local ep = support.exec_form(last(stages[2], "ENTRYPOINT").args)
    assert.same({ "/usr/local/bin/luna", "run" }, ep)
    local cmd = support.exec_form(last(stages[2], "CMD").args)
    assert.truthy(cmd, "CMD is not in exec form")
    assert.equal("/etc/luna/controllers", cmd[#cmd])
  end)

  it("copies only the build stage's install tree into the runtime stage", function()
    local copies = {}
    for _, ins in ipairs(stages[2].instructions) do
      if ins.cmd == "COPY" or ins.cmd == "ADD" then copies[#copies + 1] = ins end
    end
    assert.equal(1, #copies)
    assert.equal("COPY", copies[1].cmd)
    assert.equal("--from=build /out/ /", copies[1].args)
  end)

  it("keeps build output and git metadata out of the build context", function()
    local ignore = assert(helpers.read_file(".dockerignore"), "no .dockerignore")
    local entries = {}
    for line in ignore:gmatch("[^\n]+") do
      if not line:match("^%s*#") then entries[line:gsub("/$", "")] = true end
    end
    assert.is_true(entries["build"] == true, ".dockerignore lacks build")
    assert.is_true(entries[".git"] == true, ".dockerignore lacks .git")
    -- and nothing the build stage copies is ignored
    for _, ins in ipairs(stages[1].instructions) do
      if ins.cmd == "COPY" then
        local src = support.words(ins.args)[1]:gsub("/$", "")
        assert.is_nil(entries[src], src .. " is copied but ignored")
      end
    end
  end)
end)
