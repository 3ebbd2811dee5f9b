-- The image run as deploy/'s Deployment runs it: uid 65532, a read-only
-- root filesystem, no capabilities, a tmpfs at /tmp, the service account
-- mounted where the kubelet mounts it, KUBERNETES_SERVICE_HOST/PORT set,
-- scripts from a ConfigMap volume. luna must take the in-cluster path,
-- reconcile, answer its probes over the container network, and exit 0 on
-- `docker stop`.
local C = require("17-container.support")

local skip = C.skip_reason()

describe("the image run as the Deployment runs it #container", function()
  if skip then
    pending(skip)
    return
  end

  local api, pod

  setup(function()
    api = C.apiserver()
    api:make_objects(3)
    pod = C.pod(api, C.configmap({ ["recorder.lua"] = C.recorder(api.ns, "v1") }))
    pod:await("caches synced", 60)
  end)

  teardown(function()
    if api then api:stop() end
  end)

  it("loads its configuration in-cluster: service-account token and CA, pod namespace", function()
    local rec = pod:await("kubeconfig loaded", 5)
    assert.equal("in-cluster", rec.source)
    assert.equal(("https://%s:%s"):format(api.service_host, api.port), rec.server)
    assert.equal(api.ns, rec.namespace)
    assert.equal("token-file", rec.auth)
    -- the CA was used, not the system roots
    assert.equal(0, pod:count("in%-cluster CA not loaded"))
  end)

  it("reconciles every object through the API server", function()
    C.wait(function() return api:all_stamped("v1", 3) end, 60, "3 objects stamped v1")
    -- each object's reconcile logged its end, without an error
    C.wait(function()
      local keys = {}
      for _, r in ipairs(pod:records("ct end")) do keys[r.key] = true end
      return keys[api.ns .. "/ct-1"] and keys[api.ns .. "/ct-2"] and keys[api.ns .. "/ct-3"]
    end, 10, "ct end for every object")
    for _, r in ipairs(pod:records("ct end")) do assert.equal("true", r.ok, pod:dump()) end
  end)

  it("runs as uid 65532 with no capabilities, no privilege escalation, a read-only root", function()
    local status = C.must(("docker exec %s cat /proc/1/status"):format(C.quote(pod.name)))
    assert.matches("\nUid:%s+65532%s+65532%s+65532%s+65532\n", status)
    assert.matches("\nGid:%s+65532%s+65532", status)
    for _, set in ipairs({ "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" }) do
      assert.matches("\n" .. set .. ":%s+0000000000000000\n", status)
    end
    assert.matches("\nNoNewPrivs:%s+1\n", status)
    local out, rc = C.sh(("docker exec %s touch /usr/local/bin/x"):format(C.quote(pod.name)))
    assert.not_equal(0, rc)
    assert.matches("Read%-only file system", out)
    -- /tmp is the one writable place (a tmpfs, as the emptyDir)
    assert.equal(0, select(2, C.sh(("docker exec %s touch /tmp/x"):format(C.quote(pod.name)))))
    local mounts = C.must(("docker exec %s cat /proc/mounts"):format(C.quote(pod.name)))
    assert.matches("\ntmpfs /tmp tmpfs rw,", mounts)
    assert.matches(" / %S+ ro,", mounts)
  end)

  it("carries luna and its libraries on the slim base, nothing of the build", function()
    local function inside(cmd)
      return C.must(("docker run --rm --entrypoint sh %s -c %s"):format(C.quote(C.image), C.quote(cmd)))
    end
    -- as Debian's slim images: no documentation but copyright files, no
    -- man or info pages, and a dpkg filter keeping them out
    assert.equal("", inside("find /usr/share/doc -type f ! -name copyright; "
      .. "find /usr/share/man /usr/share/info -type f 2>/dev/null"))
    assert.matches("path%-exclude /usr/share/doc/%*", inside("cat /etc/dpkg/dpkg.cfg.d/*"))
    -- only what `luna run` needs under /usr/local, no compiler, no apt lists
    local files = {}
    for f in inside("find /usr/local -type f | LC_ALL=C sort"):gmatch("[^\n]+") do files[#files + 1] = f end
    local want = { "/usr/local/bin/luna" }
    for name in C.must("cd lua/luna && LC_ALL=C ls -1 *.lua stubs/*.lua"):gmatch("[^\n]+") do
      want[#want + 1] = "/usr/local/share/lua/5.1/luna/" .. name
    end
    table.sort(want)
    assert.same(want, files)
    assert.equal("", inside("ls /usr/bin/cc /usr/bin/gcc /usr/bin/make 2>/dev/null; ls /var/lib/apt/lists | grep -v '^partial$' || true"))
  end)

  it("answers liveness and readiness probes over the container network", function()
    local spec = C.pod_spec().container
    local function port_of(probe)
      local p = probe.httpGet.port
      if type(p) == "number" then return p end
      for _, cp in ipairs(spec.ports) do if cp.name == p then return cp.containerPort end end
    end
    for _, probe in ipairs({ spec.livenessProbe, spec.readinessProbe }) do
      local code, body = pod:http(port_of(probe), probe.httpGet.path)
      assert.equal(200, code, probe.httpGet.path .. ": " .. body)
    end
    local code, body = pod:http(port_of(spec.readinessProbe), "/readyz?verbose")
    assert.equal(200, code)
    assert.matches("%[%+%]informers%-synced ok", body)
    assert.matches("%[%+%]leader%-or%-standby ok", body)
  end)

  it("exits 0 on docker stop, within the grace period", function()
    local code, took = pod:stop()
    assert.equal(0, code, pod:dump())
    assert.is_true(took < pod.grace, ("docker stop took %.1fs"):format(took))
    pod:await("shutdown requested signal=SIGTERM", 1)
    pod:await("shutdown complete", 1)
  end)
end)
