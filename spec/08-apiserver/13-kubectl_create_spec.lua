-- kubectl's typed `create` generators (they send protobuf) against the dev
-- server and, when KUBECONFIG names a cluster, against that cluster too,
-- with the real kubectl.  For each generator:
--   * what kubectl means (its own `--dry-run=client -o json` rendering) is
--     in what each server stored, value for value;
--   * with a cluster: every field the dev server stored is what the cluster
--     stored (server-owned metadata aside: uid, resourceVersion, timestamps),
--     and the cluster's managedFields hold the dev server's entries (the
--     cluster's controllers add their own: a Deployment's status writer).
-- The cluster adds defaults the dev server does not (a Deployment's
-- strategy, a Service's clusterIP, a pod template's restartPolicy ...), so
-- the second check goes one way only.
local client = require("support.apiserver_client")
local helpers = require("helpers")
local cjson = require("cjson")

-- Fields each server owns and fills its own way.
local SERVER_OWNED = {
  ["metadata.uid"] = true, ["metadata.resourceVersion"] = true,
  ["metadata.creationTimestamp"] = true, ["metadata.managedFields"] = true,
}

local function is_empty_table(v)
  return type(v) == "table" and next(v) == nil
end

-- Every leaf of `want` (nulls and empty objects say nothing) must be in
-- `got` with the same value; lists must have the same length.  Appends one
-- line per difference to `diffs`.
local function contained(want, got, path, diffs, skip)
  if skip and skip[path] then return end
  if want == cjson.null or is_empty_table(want) then return end
  if type(want) ~= "table" then
    if want ~= got then
      diffs[#diffs + 1] = ("%s: want %s, got %s"):format(path, cjson.encode(want),
        got == nil and "nothing" or cjson.encode(got))
    end
    return
  end
  if type(got) ~= "table" then
    diffs[#diffs + 1] = ("%s: want %s, got %s"):format(path, cjson.encode(want),
      got == nil and "nothing" or cjson.encode(got))
    return
  end
  if #want > 0 and #want ~= #got then
    diffs[#diffs + 1] = ("%s: want %d items, got %d"):format(path, #want, #got)
    return
  end
  for k, v in pairs(want) do
    contained(v, got[k], path == "" and tostring(k) or (path .. "." .. tostring(k)), diffs, skip)
  end
end

local function assert_contained(want, got, what, skip)
  local diffs = {}
  contained(want, got, "", diffs, skip)
  assert(#diffs == 0, what .. ":\n  " .. table.concat(diffs, "\n  ") ..
    "\nwant: " .. cjson.encode(want) .. "\ngot:  " .. cjson.encode(got))
end

-- The managedFields entries, reduced to what both servers promise:
-- "manager operation apiVersion fieldsType subresource" each.
local function managers(obj)
  local out = {}
  for _, e in ipairs(obj.metadata.managedFields or {}) do
    out[#out + 1] = table.concat({ tostring(e.manager), tostring(e.operation),
      tostring(e.apiVersion), tostring(e.fieldsType), tostring(e.subresource or "") }, " ")
  end
  return out
end

-- What each generator is called, whether it is namespaced, and its
-- arguments and `kubectl get` reference given the spec's namespace and dir.
local CASES = {
  { "namespace", false, function(ns)
    return "namespace " .. ns .. "-made", "namespace/" .. ns .. "-made" end },
  { "configmap", true, function(_, dir)
    return "configmap cm --from-literal=a=1 --from-literal=b=two --from-file=blob=" .. dir ..
      "/blob", "configmap/cm" end },
  { "secret generic", true, function(_, dir)
    return "secret generic sec --from-literal=user=admin --from-file=blob=" .. dir .. "/blob",
      "secret/sec" end },
  { "secret docker-registry", true, function()
    return "secret docker-registry reg --docker-server=registry.example --docker-username=u " ..
      "--docker-password=p", "secret/reg" end },
  { "serviceaccount", true, function() return "serviceaccount sa", "serviceaccount/sa" end },
  { "service clusterip", true, function()
    return "service clusterip svc --tcp=80:8080 --tcp=443:https", "service/svc" end },
  { "deployment", true, function()
    return "deployment dep --image=registry.example/app:1 --port=8080 --replicas=2",
      "deployment/dep" end },
  { "job", true, function() return "job job --image=busybox -- echo hi", "job/job" end },
  { "cronjob", true, function()
    return "cronjob cj --image=busybox --schedule='*/5 * * * *' -- date", "cronjob/cj" end },
  { "role", true, function()
    return "role role --verb=get,list --resource=pods,configmaps --resource-name=a", "role/role" end },
  { "rolebinding", true, function(ns)
    return "rolebinding rb --role=role --user=alice --group=devs --serviceaccount=" .. ns .. ":sa",
      "rolebinding/rb" end },
  { "clusterrole", false, function(ns)
    return "clusterrole " .. ns .. "-cr --verb=get,watch --resource=pods",
      "clusterrole/" .. ns .. "-cr" end },
  { "clusterrolebinding", false, function(ns)
    return "clusterrolebinding " .. ns .. "-crb --clusterrole=" .. ns .. "-cr --user=bob",
      "clusterrolebinding/" .. ns .. "-crb" end },
  { "quota", true, function()
    return "quota q --hard=cpu=1,memory=1G,pods=2,services.loadbalancers=0",
      "resourcequota/q" end },
  { "poddisruptionbudget", true, function()
    return "poddisruptionbudget pdb --selector=app=web --min-available=50%", "poddisruptionbudget/pdb" end },
  { "priorityclass", false, function(ns)
    return "priorityclass " .. ns .. "-pc --value=1000 --description=batch --preemption-policy=Never",
      "priorityclass/" .. ns .. "-pc" end },
  { "ingress", true, function()
    return "ingress ing --class=default --rule='foo.example/bar*=svc:8080,tls=cert' " ..
      "--annotation=a=b --default-backend=def:http", "ingress/ing" end },
}

describe("kubectl create generators", function()
  local dev, real, dir, dev_kc, ns
  local cluster_scoped = {}

  setup(function()
    if client.real() then real = client.start() end
    dev = client.start{ dev = true, ns = real and real.ns }
    ns = dev.ns
    dir = helpers.tmpdir()
    dev_kc = dir .. "/kubeconfig"
    helpers.write_file(dev_kc, table.concat({
      "apiVersion: v1", "kind: Config",
      "clusters: [{name: dev, cluster: {server: \"" .. dev.url .. "\"}}]",
      "users: [{name: dev, user: {}}]",
      "contexts: [{name: dev, context: {cluster: dev, user: dev}}]",
      "current-context: dev", "" }, "\n"))
    -- bytes that are not UTF-8: they travel as binaryData / base64 data
    helpers.write_file(dir .. "/blob", "\0\1\2\255\254 binary")
  end)

  teardown(function()
    if real then
      for _, ref in ipairs(cluster_scoped) do
        helpers.run("kubectl delete --wait=false --ignore-not-found " .. ref)
      end
      real:stop()
    end
    dev:stop()
  end)

  -- kubectl with the dev server's kubeconfig, or the cluster's (KUBECONFIG).
  local function kubectl(on_dev, args)
    local prefix = on_dev and ("KUBECONFIG=" .. dev_kc .. " ") or ""
    return helpers.run(prefix .. "kubectl " .. args)
  end

  local function get_json(on_dev, ref, namespaced)
    local out, rc = kubectl(on_dev, "get " .. ref .. (namespaced and (" -n " .. ns) or "") ..
      " -o json --show-managed-fields")
    assert.equal(0, rc, out)
    return cjson.decode(out)
  end

  for _, c in ipairs(CASES) do
    local what, namespaced, make = c[1], c[2], c[3]
    it("kubectl create " .. what .. " stores what kubectl sent", function()
      local args, ref = make(ns, dir)
      -- flags go before a command's `--`
      local head, command = args:match("^(.-)( %-%- .*)$")
      head, command = head or args, command or ""
      local function create(flags)
        return "create " .. head .. (namespaced and (" -n " .. ns) or "") .. flags .. command
      end
      local out, rc = kubectl(true, create(" --dry-run=client -o json"))
      assert.equal(0, rc, out)
      local intended = cjson.decode(out)

      out, rc = kubectl(true, create(""))
      assert.equal(0, rc, out)
      assert.matches(" created", out)
      local on_dev = get_json(true, ref, namespaced)
      assert_contained(intended, on_dev, "the dev server lost or changed what kubectl sent")

      if not real then return end
      if not namespaced then cluster_scoped[#cluster_scoped + 1] = ref end
      out, rc = kubectl(false, create(""))
      assert.equal(0, rc, out)
      local on_real = get_json(false, ref, namespaced)
      assert_contained(intended, on_real, "the cluster lost or changed what kubectl sent")
      assert_contained(on_dev, on_real, "the dev server stored what the cluster did not",
        SERVER_OWNED)
      local real_managers = {}
      for _, m in ipairs(managers(on_real)) do real_managers[m] = true end
      for _, m in ipairs(managers(on_dev)) do
        assert.is_true(real_managers[m] ~= nil, "the cluster has no managedFields entry '" .. m ..
          "' (it has '" .. table.concat(managers(on_real), "', '") .. "')")
      end
      -- and kubectl's own entry is on both or neither (both drop an entry
      -- that owns no field, as for a ServiceAccount with only a name)
      local dev_managers = {}
      for _, m in ipairs(managers(on_dev)) do dev_managers[m] = true end
      for _, m in ipairs(managers(on_real)) do
        if m:match("^kubectl%-create ") then
          assert.is_true(dev_managers[m] ~= nil, "the dev server has no managedFields entry '" ..
            m .. "'")
        end
      end
    end)
  end

  it("compares with a real cluster", function()
    if not real then
      return pending("needs a real cluster: set KUBECONFIG (make test-kube) to compare what " ..
                     "both servers store")
    end
    assert.is_true(real.real)
  end)
end)
