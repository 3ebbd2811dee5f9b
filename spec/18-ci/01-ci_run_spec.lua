-- .ci/run: which suites it runs (fuzz-smoke a step among them), how it sums their summary files into the
-- last line "N passed, N failed", and when it fails.  Runs a copy of the
-- script in a scratch tree with `make` and `docker` replaced by stand-ins
-- that write the summary lines and exit codes each case asks for.
local helpers = require("helpers")

local FAKE_MAKE = [[#!/usr/bin/env bash
# stand-in for make: FAKE_<TARGET>_LINE is the summary line to write,
# FAKE_<TARGET>_RC the exit code; FAKE_HAS_CONTAINER says whether the
# test-container target exists (for make -n).
echo "make $*" >> calls.log
if [ "$1" = "-n" ]; then [ -n "${FAKE_HAS_CONTAINER:-}" ]; exit $?; fi
t=$(echo "$1" | tr 'a-z-' 'A-Z_')
case $1 in
  test) dir=build/test ;;
  test-kube) dir=build/test-kube ;;
  test-container) dir=build/test-container ;;
  *) dir= ;;
esac
line_var=FAKE_${t}_LINE rc_var=FAKE_${t}_RC
if [ -n "$dir" ] && [ -n "${!line_var:-}" ]; then
  mkdir -p "$dir" && echo "${!line_var}" > "$dir/summary.txt"
fi
exit "${!rc_var:-0}"
]]

local FAKE_DOCKER = [[#!/usr/bin/env bash
exit "${FAKE_DOCKER_RC:-1}"
]]

-- Runs .ci/run in a scratch tree with env (a table); returns its output,
-- exit code, last line and the make calls it made.
local function ci(env)
  local root = helpers.tmpdir()
  os.execute("mkdir -p " .. root .. "/.ci " .. root .. "/bin")
  helpers.write_file(root .. "/.ci/run", assert(helpers.read_file(".ci/run")))
  helpers.write_file(root .. "/bin/make", FAKE_MAKE)
  helpers.write_file(root .. "/bin/docker", FAKE_DOCKER)
  os.execute("chmod +x " .. root .. "/.ci/run " .. root .. "/bin/make " .. root .. "/bin/docker")
  -- a summary file left from an earlier run must not count
  os.execute("mkdir -p " .. root .. "/build/test-kube && echo '99 passed, 0 failed, 0 skipped' > " ..
             root .. "/build/test-kube/summary.txt")
  local vars = {}
  for k, v in pairs(env) do vars[#vars + 1] = k .. "='" .. v .. "'" end
  local out, rc = helpers.run("cd " .. root .. " && env -u LD_PRELOAD PATH=" .. root .. "/bin:$PATH " ..
    table.concat(vars, " ") .. " bash .ci/run")
  local last = out:match("([^\n]*)\n?$")
  return out, rc, last, helpers.read_file(root .. "/calls.log") or ""
end

describe(".ci/run", function()
  it("runs deps, test, kube, test-kube and sums the suites into the last line", function()
    local out, rc, last, calls = ci{ FAKE_TEST_LINE = "10 passed, 0 failed, 1 skipped",
                                     FAKE_TEST_KUBE_LINE = "5 passed, 0 failed, 2 skipped" }
    assert.equal(0, rc, out)
    assert.equal("15 passed, 0 failed", last)
    assert.equal("make deps\nmake test\nmake fuzz-smoke\nmake kube\nmake test-kube\nmake -n test-container\n", calls)
    assert.matches("test%-container skipped: this tree has no test%-container target", out)
    for _, part in ipairs({ "deps", "test", "kube", "test%-kube" }) do
      assert.matches("\n" .. part .. "%s+%d+s", out)
    end
  end)

  it("adds failures across suites and exits non-zero", function()
    local out, rc, last = ci{ FAKE_TEST_LINE = "3 passed, 2 failed, 0 skipped", FAKE_TEST_RC = "2",
                              FAKE_TEST_KUBE_LINE = "4 passed, 1 failed, 0 skipped",
                              FAKE_TEST_KUBE_RC = "2" }
    assert.equal(1, rc, out)
    assert.equal("7 passed, 3 failed", last)
    assert.matches("failed: test test%-kube", out)
  end)

  it("names each failed spec from the summary files just before the last line", function()
    local out, rc, last = ci{
      FAKE_TEST_LINE = "FAILED spec/a_spec.lua:12 a thing works: expected 1\n3 passed, 1 failed, 0 skipped",
      FAKE_TEST_RC = "2",
      FAKE_TEST_KUBE_LINE = "FAILED spec/b_spec.lua:7 b holds: timed out\n4 passed, 1 failed, 0 skipped",
      FAKE_TEST_KUBE_RC = "2" }
    assert.equal(1, rc, out)
    assert.equal("7 passed, 2 failed", last)
    local tail = out:match("::: failed specs\n(.*)$")
    assert.truthy(tail, out)
    assert.equal("test: FAILED spec/a_spec.lua:12 a thing works: expected 1\n" ..
                 "test-kube: FAILED spec/b_spec.lua:7 b holds: timed out\n7 passed, 2 failed\n", tail)
  end)

  it("counts a suite that never reported as one failure, not an old summary file", function()
    -- make test-kube dies before busted writes its line: the 99 left over
    -- from an earlier run must not be counted
    local out, rc, last = ci{ FAKE_TEST_LINE = "10 passed, 0 failed, 0 skipped",
                              FAKE_TEST_KUBE_RC = "2" }
    assert.equal(1, rc, out)
    assert.equal("10 passed, 1 failed", last)
  end)

  it("counts a make that fails after every spec passed as one failure", function()
    local out, rc, last = ci{ FAKE_TEST_LINE = "10 passed, 0 failed, 0 skipped", FAKE_TEST_RC = "2",
                              FAKE_TEST_KUBE_LINE = "1 passed, 0 failed, 0 skipped" }
    assert.equal(1, rc, out)
    assert.equal("11 passed, 1 failed", last)
  end)

  it("counts a control plane that does not build as one failure and skips its suite", function()
    local out, rc, last, calls = ci{ FAKE_TEST_LINE = "10 passed, 0 failed, 0 skipped",
                                     FAKE_KUBE_RC = "2" }
    assert.equal(1, rc, out)
    assert.equal("10 passed, 1 failed", last)
    assert.is_nil(calls:find("make test-kube", 1, true))
    assert.matches("test%-kube skipped: the control plane did not build", out)
  end)

  it("counts a failed fuzz smoke run as one failure and still runs the other suites", function()
    local out, rc, last, calls = ci{ FAKE_TEST_LINE = "2 passed, 0 failed, 0 skipped",
                                     FAKE_FUZZ_SMOKE_RC = "1",
                                     FAKE_TEST_KUBE_LINE = "3 passed, 0 failed, 0 skipped" }
    assert.equal(1, rc, out)
    assert.equal("5 passed, 1 failed", last)
    assert.matches("failed: fuzz%-smoke", out)
    assert.truthy(calls:find("make test-kube", 1, true))
  end)

  it("counts a failed make deps and still runs the suites", function()
    local out, rc, last = ci{ FAKE_DEPS_RC = "1", FAKE_TEST_LINE = "2 passed, 0 failed, 0 skipped",
                              FAKE_TEST_KUBE_LINE = "3 passed, 0 failed, 0 skipped" }
    assert.equal(1, rc, out)
    assert.equal("5 passed, 1 failed", last)
  end)

  it("runs test-container when the target exists and a Docker engine answers", function()
    local base = { FAKE_TEST_LINE = "1 passed, 0 failed, 0 skipped",
                   FAKE_TEST_KUBE_LINE = "1 passed, 0 failed, 0 skipped", FAKE_HAS_CONTAINER = "1",
                   FAKE_TEST_CONTAINER_LINE = "4 passed, 0 failed, 0 skipped" }
    local out, rc, last, calls = ci(base)
    assert.equal(0, rc, out)
    assert.matches("test%-container skipped: no Docker engine answers", out)
    assert.equal("2 passed, 0 failed", last)
    assert.is_nil(calls:find("make test-container", 1, true))
    base.FAKE_DOCKER_RC = "0"
    out, rc, last, calls = ci(base)
    assert.equal(0, rc, out)
    assert.equal("6 passed, 0 failed", last)
    assert.truthy(calls:find("make test-container", 1, true))
  end)
end)
