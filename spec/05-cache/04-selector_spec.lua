-- Label and field selectors, with kube-apiserver's grammar and semantics.
local core = require("luna.core")

local function sel(text, kind)
  local s, err = core.selector.parse(text, kind)
  assert(s, err and err.message)
  return s
end

describe("label selector", function()
  local labels = { app = "web", tier = "fe", ["example.com/team"] = "a", n = "5" }

  local cases = {
    { "", true },
    { "app=web", true }, { "app==web", true }, { "app=db", false },
    { "app!=db", true }, { "app!=web", false }, { "missing!=x", true },
    { "app in (web,db)", true }, { "app in (db)", false },
    { "app notin (db)", true }, { "app notin (web)", false }, { "missing notin (x)", true },
    { "app", true }, { "missing", false }, { "!missing", true }, { "!app", false },
    { "app=web,tier=fe", true }, { "app=web,tier=be", false },
    { "example.com/team=a", true },
    { "n>4", true }, { "n>5", false }, { "n<6", true }, { "app>1", false },
    { " app = web , tier in ( fe , be ) ", true },
    { "app=", false }, { "empty=", false },
  }
  for _, c in ipairs(cases) do
    it(("%q matches: %s"):format(c[1], tostring(c[2])), function()
      assert.equal(c[2], sel(c[1]):matches(labels))
    end)
  end

  it("matches an empty value against an empty label", function()
    assert.is_true(sel("flag="):matches({ flag = "" }))
    assert.is_false(sel("flag="):matches({}))
  end)

  it("prints a canonical, sorted form", function()
    assert.equal("a=1,b in (x,y),!c", tostring(sel("b in (y,x,y), !c, a==1")))
    assert.equal("app notin (a,b)", tostring(sel("app notin (b,a)")))
  end)

  local bad = {
    { "app=web,", "expected a requirement after ','" },
    { "app in ()", "values set can't be empty" },
    { "app in (a", "expected ',' or ')'" },
    { "app ~ x", "unknown operator" },
    { "=x", "expected a key" },
    { "-app=x", "invalid key" },
    { "Bad_Prefix/app=x", "invalid key" },
    { "app=" .. string.rep("x", 64), "invalid value" },
    { "app=-x", "invalid value" },
    { "n>x", "need an integer" },
    { "a b", "unknown operator" },
  }
  for _, c in ipairs(bad) do
    it(("rejects %q"):format(c[1]), function()
      local s, err = core.selector.parse(c[1])
      assert.is_nil(s)
      assert.equal("BadRequest", err.reason)
      assert.matches(c[2], err.message, 1, true)
      assert.matches("invalid label selector", err.message, 1, true)
    end)
  end
end)

describe("field selector", function()
  local fields = { ["metadata.name"] = "web", ["metadata.namespace"] = "prod" }

  it("supports =, == and !=", function()
    assert.is_true(sel("metadata.name=web", "fields"):matches(fields))
    assert.is_true(sel("metadata.name==web,metadata.namespace!=dev", "fields"):matches(fields))
    assert.is_false(sel("metadata.namespace!=prod", "fields"):matches(fields))
  end)

  it("rejects set operators and bare keys", function()
    assert.is_nil((core.selector.parse("metadata.name in (a)", "fields")))
    assert.is_nil((core.selector.parse("metadata.name", "fields")))
    assert.is_nil((core.selector.parse("!metadata.name", "fields")))
  end)
end)
