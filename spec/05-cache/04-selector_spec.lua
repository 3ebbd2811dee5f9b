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
    -- "in ()" is the set holding the empty value, as in kube's labels.Parse
    assert.is_true(sel("flag in ()"):matches({ flag = "" }))
    assert.is_false(sel("flag in ()"):matches({ flag = "x" }))
    assert.equal("flag in ()", tostring(sel("flag in ( )")))
  end)

  it("prints a canonical, sorted form", function()
    assert.equal("a=1,b in (x,y),!c", tostring(sel("b in (y,x,y), !c, a==1")))
    assert.equal("app notin (a,b)", tostring(sel("app notin (b,a)")))
  end)

  -- kube-apiserver's messages, word for word (the dev server returns them).
  local function unexpected(expected, text)
    return ("unable to parse requirement: found unexpected token, expected%s in selector %s"):format(expected, text)
  end
  local function bad_key(key)
    return ('unable to parse requirement: key: Invalid value: "%s": name part must consist of ' ..
      "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"):format(key)
  end
  local function bad_value(i, key, value)
    return ('unable to parse requirement: values[%d][%s]: Invalid value: "%s": a valid label must be ' ..
      "an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end " ..
      "with an alphanumeric character"):format(i, key, value)
  end
  local long = string.rep("x", 64)
  local bad = {
    { "app=web,", unexpected(" identifier", "app=web,") },
    { "=x", unexpected(" identifier", "=x") },
    { "app in (a", unexpected(" ',' or ')'", "app in (a") },
    { "app in a", unexpected(": '('", "app in a") },
    { "app ~ x", unexpected(": '=', '!=', '==', 'in', notin'", "app ~ x") },
    { "a b", unexpected(": '=', '!=', '==', 'in', notin'", "a b") },
    { "a=b=c", unexpected(" ','", "a=b=c") },
    { "!a=b", unexpected(" ','", "!a=b") },
    { "-app=x", bad_key("-app") },
    { "Bad_Prefix/app=x", bad_key("Bad_Prefix/app") },
    { "a..b/app=x", bad_key("a..b/app") },
    { "app~x=y", bad_key("app~x") },
    { "app=" .. long, bad_value(0, "app", long) },
    { "app=-x", bad_value(0, "app", "-x") },
    { "app=a~b", bad_value(0, "app", "a~b") },
    { "app in (a, b, -c)", bad_value(2, "app", "-c") },
    { "n>x", "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer" },
    { "n<", "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer" },
    { "n>99999999999999999999", "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer" },
  }
  for _, c in ipairs(bad) do
    it(("rejects %q"):format(c[1]), function()
      local s, err = core.selector.parse(c[1])
      assert.is_nil(s)
      assert.equal("BadRequest", err.reason)
      assert.equal(c[2], err.message)
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

  it("compares a missing field as the empty string", function()
    assert.is_true(sel("spec.nodeName=", "fields"):matches(fields))
    assert.is_false(sel("spec.nodeName!=", "fields"):matches(fields))
    assert.is_true(sel("spec.nodeName!=n1", "fields"):matches(fields))
  end)

  it("unescapes \\, \\= and \\\\ in values and escapes them when printing", function()
    local s = sel([[spec.x=a\,b\=c\\d,metadata.name=web]], "fields")
    assert.is_true(s:matches({ ["spec.x"] = [[a,b=c\d]], ["metadata.name"] = "web" }))
    assert.is_false(s:matches({ ["spec.x"] = [[a\,b\=c\\d]], ["metadata.name"] = "web" }))
    assert.equal([[metadata.name=web,spec.x=a\,b\=c\\d]], tostring(s))
    -- the operator is the first unescaped one; the rest belongs to the value
    assert.is_true(sel([[k\=x=a=b!=c]], "fields"):matches({ ["k\\=x"] = "a=b!=c" }))
  end)

  it("skips empty terms and prints == as =", function()
    assert.equal("a=1,b!=2", tostring(sel(",b!=2,,a==1,", "fields")))
  end)

  it("rejects terms without an operator, with kube's message", function()
    for _, text in ipairs({ "metadata.name in (a)", "metadata.name", "!metadata.name", "a=1,b",
                            [[metadata.name\=x]] }) do
      local s, err = core.selector.parse(text, "fields")
      assert.is_nil(s, text)
      assert.equal("BadRequest", err.reason)
      local term = text:match("([^,]*)$")
      assert.equal(("invalid selector: '%s'; can't understand '%s'"):format(text, term), err.message)
    end
  end)
end)
