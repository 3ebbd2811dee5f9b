-- What an unauthenticated or malformed request can make the dev server
-- hold, bounded as kube-apiserver bounds it: authentication and the
-- declared length are checked on the headers, before any body byte is
-- read; bodies in flight have a total bound (429 past it); two framings
-- are refused (400, connection closed); and labels, annotations and
-- ConfigMap keys are validated with apimachinery's messages.
local client = require("support.apiserver_client")
local raw = require("support.raw_http")
local helpers = require("helpers")
local cjson = require("cjson")

local MAX_BODY = 3 * 1024 * 1024

local function port_of(srv) return tonumber(srv.url:match(":(%d+)$")) end

local function hwm_kib(srv)
  local status = helpers.read_file("/proc/" .. srv.proc.pid .. "/status")
  return tonumber(status:match("VmHWM:%s*(%d+)"))
end

local function head(method, path, headers)
  return method .. " " .. path .. " HTTP/1.1\r\nHost: 127.0.0.1\r\n" ..
         table.concat(headers, "\r\n") .. "\r\n\r\n"
end

describe("dev server request bounds", function()
  if client.dev_only("raw sockets to the dev server, its process's memory") then return end

  describe("with --token", function()
    local srv
    before_each(function()
      srv = client.start{ args = { "--token", "T" }, no_namespace = true,
                          headers = { "Authorization: Bearer T" } }
    end)
    after_each(function() srv:stop() end)

    it("answers 401 on the headers, before the body is sent", function()
      local conns = {}
      for i = 1, 8 do
        conns[i] = raw.connect(port_of(srv))
        assert.is_true(conns[i]:send(head("POST", "/api/v1/namespaces/default/configmaps",
          { "Content-Type: application/json", "Content-Length: " .. MAX_BODY })))
      end
      for i, c in ipairs(conns) do
        local code, got = c:response(10)
        assert(code == 401, "upload " .. i .. ": no 401 before its body: " .. tostring(got))
        assert.matches('"reason":"Unauthorized"', got)
        assert.is_true(c:closed(10), "upload " .. i .. ": connection left open after the 401")
        c:close()
      end
      -- the token still works
      assert.equal(200, (srv:request("GET", "/api/v1/namespaces")))
    end)

    it("never holds the bodies of unauthenticated uploads (VmHWM)", function()
      local before = hwm_kib(srv)
      local n, block = 24, string.rep("x", 64 * 1024)
      local conns = {}
      for i = 1, n do
        conns[i] = raw.connect(port_of(srv))
        conns[i]:send(head("POST", "/api/v1/namespaces/default/configmaps",
          { "Content-Type: application/json", "Content-Length: " .. MAX_BODY }))
      end
      -- interleaved, so that a server reading bodies would hold all of them at once
      local open = n
      for _ = 1, MAX_BODY / #block do
        if open == 0 then break end
        for _, c in ipairs(conns) do
          if not c.gone and not c:send(block) then c.gone = true open = open - 1 end
        end
      end
      for i, c in ipairs(conns) do
        local code, got = c:response(20)
        assert(code == 401, "upload " .. i .. ": " .. tostring(code) .. " " .. tostring(got))
        c:close()
      end
      local grown = (hwm_kib(srv) - before) / 1024
      -- 24 bodies of 3 MiB held at once would be 72 MiB and more
      assert(grown < 24, ("the dev server's peak RSS grew %.1f MiB for %d refused uploads")
        :format(grown, n))
    end)
  end)

  describe("without a token", function()
    local srv
    before_each(function() srv = client.start{ no_namespace = true } end)
    after_each(function() srv:stop() end)

    it("refuses a declared length over 3 MiB with 413 without reading the body", function()
      local c = raw.connect(port_of(srv))
      c:send(head("POST", "/api/v1/namespaces/default/configmaps",
        { "Content-Type: application/json", "Content-Length: " .. (MAX_BODY + 1) }))
      local code, got = c:response(10)
      assert(code == 413, "no 413 before the body: " .. tostring(got))
      assert.matches("Request entity too large: limit is 3145728", got, 1, true)
      assert.is_true(c:closed(10))
      c:close()
    end)

    it("bounds the request bodies in flight at 64 MiB, refusing more with 429", function()
      local conns = {}
      for i = 1, 30 do
        conns[i] = raw.connect(port_of(srv))
        conns[i]:send(head("POST", "/api/v1/namespaces/default/configmaps",
          { "Content-Type: application/json", "Content-Length: " .. MAX_BODY }))
      end
      -- 3 MiB each: 21 fit in 64 MiB, the other 9 are refused at once
      local held, refused
      helpers.eventually(function()
        held, refused = {}, nil
        for _, c in ipairs(conns) do
          local code, got = c:response(0)
          if code then
            assert(code == 429, tostring(got))
            refused = refused or got
          else
            held[#held + 1] = c
          end
        end
        return #held <= 21
      end, 20, "9 of 30 uploads of 3 MiB refused")
      assert(refused, "30 uploads of 3 MiB held at once, none refused")
      assert.equal(21, #held)
      local status = cjson.decode(refused:match("\r\n\r\n(.*)$"))
      assert.equal("TooManyRequests", status.reason)
      assert.equal("Too many requests, please try again later.", status.message)
      assert.matches("\r\nRetry%-After: 1\r\n", refused)
      -- one held upload finishes: its room is free again
      local body = cjson.encode({ apiVersion = "v1", kind = "ConfigMap",
        metadata = { name = "big" }, data = { k = "v" } })
      assert.is_true(held[1]:send(body .. string.rep(" ", MAX_BODY - #body)))
      local code, got = held[1]:response(20)
      assert(code == 404 or code == 201, tostring(got))   -- no namespace "default" needed
      local c = raw.connect(port_of(srv))
      c:send(head("POST", "/api/v1/namespaces/default/configmaps",
        { "Content-Type: application/json", "Content-Length: " .. MAX_BODY }))
      assert.is_nil(c:response(0.5), "refused although an upload ended")
      for _, h in ipairs(conns) do h:close() end
      c:close()
      assert.equal(200, (srv:request("GET", "/api/v1/namespaces")))
    end)

    local function configmap_json()
      return cjson.encode({ apiVersion = "v1", kind = "ConfigMap",
        metadata = { name = "smuggled-" .. math.random(1e6) }, data = { k = "v" } })
    end

    it("refuses two differing Content-Lengths with 400 and closes", function()
      local body = configmap_json()
      local c = raw.connect(port_of(srv))
      c:send(head("POST", "/api/v1/namespaces/default/configmaps",
        { "Content-Type: application/json", "Content-Length: " .. #body,
          "Content-Length: " .. (#body + 1) }) .. body)
      local code, got = c:response(10)
      assert(code == 400, tostring(got))
      assert.matches("400 Bad Request: http: message cannot contain multiple Content-Length " ..
        'headers; got ["' .. #body .. '" "' .. (#body + 1) .. '"]', got, 1, true)
      assert.is_true(c:closed(10))
      c:close()
    end)

    it("refuses Content-Length beside Transfer-Encoding with 400 and closes", function()
      local body = configmap_json()
      local c = raw.connect(port_of(srv))
      c:send(head("POST", "/api/v1/namespaces/default/configmaps",
        { "Content-Type: application/json", "Content-Length: " .. #body,
          "Transfer-Encoding: chunked" }) ..
        ("%x\r\n%s\r\n0\r\n\r\n"):format(#body, body))
      local code, got = c:response(10)
      assert(code == 400, tostring(got))
      assert.matches("400 Bad Request: ", got, 1, true)
      assert.is_true(c:closed(10))
      c:close()
    end)

    it("takes two equal Content-Lengths as one, as Go's net/http does", function()
      assert.equal(201, (srv:request("POST", "/api/v1/namespaces",
        { apiVersion = "v1", kind = "Namespace", metadata = { name = "eq" } })))
      local body = configmap_json()
      local c = raw.connect(port_of(srv))
      c:send(head("POST", "/api/v1/namespaces/eq/configmaps",
        { "Content-Type: application/json", "Content-Length: " .. #body,
          "Content-Length: " .. #body }) .. body)
      local code, got = c:response(10)
      assert(code == 201, tostring(got))
      c:close()
    end)
  end)
end)

describe("validation of labels, annotations and ConfigMap data", function()
  local srv
  setup(function() srv = client.start() end)
  teardown(function() srv:stop() end)

  local QNAME = "must consist of alphanumeric characters, '-', '_' or '.', and must start and " ..
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex " ..
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"

  local function cm(name, extra)
    local o = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = name } }
    for k, v in pairs(extra or {}) do
      if k == "labels" or k == "annotations" then o.metadata[k] = v else o[k] = v end
    end
    return o
  end

  local function refused(code, name, extra, message)
    local got_code, st, rawbody = srv:request("POST", srv:ns_path("configmaps"), cm(name, extra))
    assert(got_code == code, tostring(got_code) .. " " .. tostring(rawbody))
    assert.equal(message, st.message)
    assert.equal(404, (srv:request("GET", srv:ns_path("configmaps", name))))
    return st
  end

  it("refuses a label key that is not a qualified name (422)", function()
    local st = refused(422, "x", { labels = { ["bad key!"] = "v" } },
      'ConfigMap "x" is invalid: metadata.labels: Invalid value: "bad key!": name part ' .. QNAME)
    assert.equal("Invalid", st.reason)
    assert.equal("metadata.labels", st.details.causes[1].field)
    assert.equal("FieldValueInvalid", st.details.causes[1].reason)
  end)

  it("refuses a label key whose name part is over 63 characters or prefix is not a DNS subdomain", function()
    local long = string.rep("a", 64)
    refused(422, "x1", { labels = { [long] = "v" } }, 'ConfigMap "x1" is invalid: metadata.labels: ' ..
      'Invalid value: "' .. long .. '": name part must be no more than 63 bytes')
    refused(422, "x2", { labels = { ["Example.com/app"] = "v" } }, 'ConfigMap "x2" is invalid: ' ..
      'metadata.labels: Invalid value: "Example.com/app": prefix part a lowercase RFC 1123 ' ..
      "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must " ..
      "start and end with an alphanumeric character (e.g. 'example.com', regex used for " ..
      "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
  end)

  it("refuses a label value that is not a valid label value (422)", function()
    refused(422, "x3", { labels = { app = "-web" } }, 'ConfigMap "x3" is invalid: metadata.labels: ' ..
      "Invalid value: \"-web\": a valid label must be an empty string or consist of alphanumeric " ..
      "characters, '-', '_' or '.', and must start and end with an alphanumeric character " ..
      "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is " ..
      "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
  end)

  it("refuses an annotation key that is not a qualified name, and annotations over 256 KiB", function()
    refused(422, "x4", { annotations = { ["a b"] = "v" } }, 'ConfigMap "x4" is invalid: ' ..
      'metadata.annotations: Invalid value: "a b": name part ' .. QNAME)
    local st = refused(422, "x5", { annotations = { big = string.rep("v", 256 * 1024) } },
      'ConfigMap "x5" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes')
    assert.equal("FieldValueTooLong", st.details.causes[1].reason)
  end)

  it("refuses non-string ConfigMap data and non-base64 binaryData (400, as decoding does)", function()
    refused(400, "x6", { data = { a = 1 } }, 'ConfigMap in version "v1" cannot be handled as a ' ..
      "ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string")
    refused(400, "x7", { binaryData = { a = "not base64!" } }, 'ConfigMap in version "v1" cannot ' ..
      "be handled as a ConfigMap: illegal base64 data at input byte 3")
  end)

  it("refuses ConfigMap keys that are not config keys (422)", function()
    refused(422, "x8", { data = { ["a key"] = "v" } }, 'ConfigMap "x8" is invalid: data[a key]: ' ..
      "Invalid value: \"a key\": a valid config key must consist of alphanumeric characters, " ..
      "'-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for " ..
      "validation is '[-._a-zA-Z0-9]+')")
  end)

  it("accepts what kube accepts: prefixed keys, mixed case, empty values, base64", function()
    local code, _, rawbody = srv:request("POST", srv:ns_path("configmaps"), cm("ok", {
      labels = { ["example.com/App_1"] = "v1.2-x_Y", empty = "" },
      annotations = { ["Example.COM/Note"] = "anything at all\n" },
      data = { ["key.name"] = "v", KEY_NAME = "w" }, binaryData = { b = "aGk=" } }))
    assert(code == 201, tostring(code) .. " " .. tostring(rawbody))
  end)

  it("validates updates and patches too", function()
    srv:create_cm("upd")
    local code, st = srv:request("PATCH", srv:ns_path("configmaps", "upd"),
      { metadata = { labels = { ["no/good/key"] = "v" } } },
      { content_type = "application/merge-patch+json" })
    assert.equal(422, code)
    assert.matches('^ConfigMap "upd" is invalid: metadata.labels: Invalid value: "no/good/key": ' ..
      "a valid label key must consist", st.message)
    local _, cur = srv:request("GET", srv:ns_path("configmaps", "upd"))
    cur.metadata.labels = { ok = "bad value!" }
    code = srv:request("PUT", srv:ns_path("configmaps", "upd"), cur)
    assert.equal(422, code)
    local _, after = srv:request("GET", srv:ns_path("configmaps", "upd"))
    assert.is_nil(after.metadata.labels)
  end)
end)
