-- LIST: selectors, namespaces, paging with a consistent snapshot, resourceVersion semantics.
--
-- The spec is not the only writer: a real cluster's controller-manager puts
-- a kube-root-ca.crt ConfigMap into every namespace.  Assertions are about
-- the ConfigMaps this spec made (OWN); what else a list holds only counts
-- where the spec can know it (page sizes against the list's own counts).
local client = require("support.apiserver_client")

local OWN = { a = true, b = true, c = true, d = true, aa = true, later = true }

local function names(list)
  local out = {}
  for _, it in ipairs(list.items) do out[#out + 1] = it.metadata.name end
  table.sort(out)
  return table.concat(out, ",")
end

-- The names of the items this spec created, sorted.
local function own(list)
  local out = {}
  for _, it in ipairs(list.items) do
    if OWN[it.metadata.name] then out[#out + 1] = it.metadata.name end
  end
  table.sort(out)
  return table.concat(out, ",")
end

local function esc(s)
  return (s:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

describe("apiserver LIST", function()
  local srv
  setup(function()
    srv = client.start()
    srv:create_cm("a", nil, { app = "web", tier = "front" })
    srv:create_cm("b", nil, { app = "web", tier = "back" })
    srv:create_cm("c", nil, { app = "db" })
    srv:create_cm("d", nil, nil)
  end)
  teardown(function() srv:stop() end)

  local function list(query)
    local code, l = srv:request("GET", srv:ns_path("configmaps") .. (query or ""))
    assert.equal(200, code, query)
    return l
  end

  it("returns a typed list with its own resourceVersion", function()
    local l = list()
    assert.equal("ConfigMapList", l.kind)
    assert.equal("v1", l.apiVersion)
    assert.matches("^%d+$", l.metadata.resourceVersion)
    assert.equal("a,b,c,d", own(l))
  end)

  it("applies every label selector operator", function()
    local cases = {
      { "app=web", "a,b" }, { "app==web", "a,b" }, { "app!=web", "c,d" },
      { "app in (web,db)", "a,b,c" }, { "app notin (web)", "c,d" },
      { "tier", "a,b" }, { "!tier", "c,d" }, { "app=web,tier=back", "b" },
    }
    for _, c in ipairs(cases) do
      assert.equal(c[2], own(list("?labelSelector=" .. esc(c[1]))), c[1])
    end
  end)

  it("accepts '+' for spaces in the query, as Go clients send it", function()
    assert.equal("a,b,c", own(list("?labelSelector=app+in+(web,db)")))
  end)

  it("rejects an invalid label selector with 400", function()
    for _, bad in ipairs({ "app in web", "a=b=c", "-bad=x", "app=(x" }) do
      local code, st = srv:request("GET", srv:ns_path("configmaps") .. "?labelSelector=" .. esc(bad))
      assert.equal(400, code, bad)
      assert.equal("BadRequest", st.reason)
    end
  end)

  it("rejects an invalid label value with kube's message", function()
    local code, st = srv:request("GET", srv:ns_path("configmaps") .. "?labelSelector=" .. esc("app=-x"))
    assert.equal(400, code)
    assert.equal("BadRequest", st.reason)
    -- kube-apiserver appends examples and the regex; the dev server stops here
    local want = 'unable to parse requirement: values[0][app]: Invalid value: "-x": a valid label must be ' ..
      "an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end " ..
      "with an alphanumeric character"
    assert.equal(1, st.message:find(want, 1, true), st.message)
  end)

  it("applies field selectors on metadata.name and metadata.namespace", function()
    assert.equal("b", names(list("?fieldSelector=metadata.name%3Db")))
    assert.equal("a,c,d", own(list("?fieldSelector=metadata.name!%3Db")))
    local code, l = srv:request("GET", "/api/v1/configmaps?fieldSelector=metadata.namespace%3D" .. srv.ns)
    assert.equal(200, code)
    assert.equal("a,b,c,d", own(l))
    for _, it in ipairs(l.items) do assert.equal(srv.ns, it.metadata.namespace) end
  end)

  it("rejects an unsupported field selector with 400 naming the field", function()
    -- the wording differs between versions and types; the field name is in all of them
    for _, res in ipairs({ "configmaps", "secrets" }) do
      local code, st = srv:request("GET", srv:ns_path(res) .. "?fieldSelector=data.k%3Dv")
      assert.equal(400, code, res)
      assert.equal("BadRequest", st.reason, res)
      assert.equal(400, st.code, res)
      assert.matches("data%.k", st.message, 1, false, res)
    end
  end)

  it("unescapes \\, and \\= in field selector values", function()
    for _, t in ipairs({ "luna.dev/a=b,c", "luna.dev/other" }) do
      local code = srv:request("POST", srv:ns_path("secrets"), { apiVersion = "v1", kind = "Secret",
        metadata = { name = (t:gsub("[^%w]", "-")) }, type = t })
      assert.equal(201, code, t)
    end
    local code, l = srv:request("GET", srv:ns_path("secrets") .. "?fieldSelector=" .. esc([[type=luna.dev/a\=b\,c]]))
    assert.equal(200, code)
    assert.equal("luna-dev-a-b-c", names(l))
    code, l = srv:request("GET", srv:ns_path("secrets") .. "?fieldSelector=" ..
      esc([[type!=luna.dev/a\=b\,c,type!=Opaque,type!=kubernetes.io/service-account-token]]))
    assert.equal(200, code)
    assert.equal("luna-dev-other", names(l))
  end)

  it("lists across namespaces on the cluster-wide path", function()
    local code, l = srv:request("GET", "/api/v1/configmaps?labelSelector=app%3Dweb")
    assert.equal(200, code)
    local mine = 0
    for _, it in ipairs(l.items) do if it.metadata.namespace == srv.ns then mine = mine + 1 end end
    assert.equal(2, mine)
  end)

  it("pages with limit and continue over a consistent snapshot", function()
    local l1 = list("?limit=2")
    assert.equal(2, #l1.items)
    assert.is_string(l1.metadata.continue)
    local remaining = l1.metadata.remainingItemCount
    assert.is_true(remaining >= 2, "c and d are still to come") -- and whatever else is there
    -- writes after the first page are not seen by the continued list
    srv:create_cm("aa")
    local cm = srv:request("DELETE", srv:ns_path("configmaps", "d"))
    assert.equal(200, cm)
    local l2 = list("?limit=" .. remaining .. "&continue=" .. esc(l1.metadata.continue))
    assert.equal(remaining, #l2.items)
    assert.equal("a,b", names(l1)) -- keys in order: a and b come first
    assert.equal("c,d", own(l2))
    assert.equal(l1.metadata.resourceVersion, l2.metadata.resourceVersion)
    assert.is_nil(l2.metadata.continue)
    -- a fresh list sees the new state
    assert.equal("a,aa,b,c", own(list()))
  end)

  it("rejects a malformed continue token with 400", function()
    local code, st = srv:request("GET", srv:ns_path("configmaps") .. "?limit=1&continue=notatoken")
    assert.equal(400, code)
    assert.equal("BadRequest", st.reason)
  end)

  it("serves an exact resourceVersion from history", function()
    local before = list()
    local rv = before.metadata.resourceVersion
    srv:create_cm("later")
    local code, l = srv:request("GET", srv:ns_path("configmaps") ..
      "?resourceVersion=" .. rv .. "&resourceVersionMatch=Exact")
    assert.equal(200, code)
    assert.equal(rv, l.metadata.resourceVersion)
    assert.equal(names(before), names(l))
    local nl = list("?resourceVersion=" .. rv .. "&resourceVersionMatch=NotOlderThan")
    assert.is_true(tonumber(nl.metadata.resourceVersion) > tonumber(rv))
    assert.matches("later", names(nl))
  end)

  it("answers a resourceVersion from the future with 504 Timeout", function()
    local code, st = srv:request("GET", srv:ns_path("configmaps") ..
      "?resourceVersion=999999999999&resourceVersionMatch=NotOlderThan")
    assert.equal(504, code)
    assert.equal("Timeout", st.reason)
    assert.matches("Too large resource version", st.message)
  end)

  it("validates resourceVersionMatch", function()
    local code, st = srv:request("GET", srv:ns_path("configmaps") .. "?resourceVersionMatch=Exact")
    assert.equal(422, code)
    assert.equal("Invalid", st.reason)
    local code2 = srv:request("GET", srv:ns_path("configmaps") ..
      "?resourceVersion=0&resourceVersionMatch=Exact")
    assert.equal(422, code2)
  end)

  it("serves resourceVersion=0", function()
    local l = list("?resourceVersion=0")
    assert.matches("^%d+$", l.metadata.resourceVersion)
    assert.is_true(#l.items >= 4)
  end)
end)

describe("apiserver LIST history #devonly", function()
  if client.dev_only("--history N (how far back a LIST or WATCH may start) cannot be set on " ..
                     "kube-apiserver") then return end
  local srv
  setup(function() srv = client.start({ args = { "--history", "3" } }) end)
  teardown(function() srv:stop() end)

  it("answers 410 Expired to an exact or continued list older than the history", function()
    for i = 1, 3 do srv:create_cm("x" .. i) end
    local _, l1 = srv:request("GET", srv:ns_path("configmaps") .. "?limit=1")
    local rv = l1.metadata.resourceVersion
    for i = 4, 9 do srv:create_cm("x" .. i) end
    local code, st = srv:request("GET", srv:ns_path("configmaps") ..
      "?resourceVersion=" .. rv .. "&resourceVersionMatch=Exact")
    assert.equal(410, code)
    assert.equal("Expired", st.reason)
    local code2, st2 = srv:request("GET", srv:ns_path("configmaps") .. "?limit=1&continue=" ..
      l1.metadata.continue)
    assert.equal(410, code2)
    assert.equal("Expired", st2.reason)
  end)
end)
