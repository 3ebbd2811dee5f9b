-- A strict parser for the Prometheus text exposition format 0.0.4, used by
-- the spec/09-metrics specs to read what the registry renders back into
-- values.  It raises (with the line number) on anything a Prometheus
-- server would reject or that the format forbids:
--
--   * lines other than "# HELP name text", "# TYPE name type", other
--     comments, blank lines and samples; a last line without "\n";
--   * escapes other than \\ and \n in HELP, \\ \" \n in label values;
--   * names that are not [a-zA-Z_:][a-zA-Z0-9_:]*, label names that are not
--     [a-zA-Z_][a-zA-Z0-9_]*, repeated label names;
--   * values that are not floats, "+Inf", "-Inf" or "NaN";
--   * a second HELP or TYPE for one family, a TYPE after its samples, a
--     family whose samples are not contiguous, a repeated series;
--   * samples that do not belong to the family's type (histograms: only
--     _bucket with an "le" label, _sum and _count).
--
-- parse(text) returns { families = { [name] = family }, order = { names } }
-- where family = { name, help, type, samples = { { name, labels, value,
-- line } } } and labels is a table label -> value.
-- check_histograms(parsed) checks every histogram series: buckets in
-- increasing le order ending in +Inf, cumulative counts, +Inf == _count.
-- get(parsed, series_name, labels) returns the value of that series (nil if
-- absent); labels must match exactly.
local M = {}

local function fail(lineno, msg, line)
  error(string.format("exposition line %d: %s: %q", lineno, msg, line or ""), 0)
end

local function unescape(s, allowed, lineno, line)
  return (s:gsub("\\(.)", function(c)
    if c == "\\" then return "\\" end
    if c == "n" then return "\n" end
    if c == '"' and allowed == "label" then return '"' end
    fail(lineno, "bad escape \\" .. c, line)
  end))
end

local function parse_float(s, lineno, line)
  if s == "+Inf" then return math.huge end
  if s == "-Inf" then return -math.huge end
  if s == "NaN" then return 0 / 0 end
  if not s:match("^[-+]?%d*%.?%d*[eE]?[-+]?%d*$") or not s:match("%d") then
    fail(lineno, "bad value " .. s, line)
  end
  local v = tonumber(s)
  if not v then fail(lineno, "bad value " .. s, line) end
  return v
end

local METRIC_NAME = "^[a-zA-Z_:][a-zA-Z0-9_:]*$"
local LABEL_NAME = "^[a-zA-Z_][a-zA-Z0-9_]*$"
local TYPES = { counter = true, gauge = true, histogram = true, summary = true, untyped = true }

-- Parses `{a="x",b="y"}` starting at position i of line; returns labels,
-- a canonical key and the position after "}".
local function parse_labels(line, i, lineno)
  local labels, names = {}, {}
  i = i + 1
  if line:sub(i, i) == "}" then return labels, "", i + 1 end
  while true do
    local name, rest = line:match("^([a-zA-Z_][a-zA-Z0-9_]*)=\"()", i)
    if not name then fail(lineno, "bad label at column " .. i, line) end
    if labels[name] then fail(lineno, "repeated label " .. name, line) end
    -- the value runs to the first quote not preceded by an odd number of backslashes
    local j = rest
    local raw = {}
    while true do
      local c = line:sub(j, j)
      if c == "" then fail(lineno, "unterminated label value", line) end
      if c == "\\" then
        raw[#raw + 1] = line:sub(j, j + 1)
        j = j + 2
      elseif c == '"' then
        break
      elseif c == "\n" then
        fail(lineno, "raw newline in label value", line)
      else
        raw[#raw + 1] = c
        j = j + 1
      end
    end
    labels[name] = unescape(table.concat(raw), "label", lineno, line)
    names[#names + 1] = name
    i = j + 1
    local c = line:sub(i, i)
    if c == "}" then i = i + 1; break end
    if c ~= "," then fail(lineno, "expected , or } at column " .. i, line) end
    i = i + 1
  end
  table.sort(names)
  local key = {}
  for _, n in ipairs(names) do key[#key + 1] = n .. "=" .. string.format("%q", labels[n]) end
  return labels, table.concat(key, ","), i
end

local function family_of(parsed, sample_name)
  local f = parsed.families[sample_name]
  if f then return f end
  for _, suffix in ipairs({ "_bucket", "_sum", "_count" }) do
    local stem = sample_name:match("^(.*)" .. suffix .. "$")
    if stem and parsed.families[stem] and parsed.families[stem].type == "histogram" then
      return parsed.families[stem], suffix
    end
  end
end

function M.parse(text)
  assert(type(text) == "string", "parse wants a string")
  if text ~= "" and text:sub(-1) ~= "\n" then
    error("exposition: the last line does not end in a newline", 0)
  end
  local parsed = { families = {}, order = {} }
  local current, closed, seen = nil, {}, {}
  local function family(name, lineno, line)
    if not name:match(METRIC_NAME) then fail(lineno, "bad metric name " .. name, line) end
    local f = parsed.families[name]
    if not f then
      if closed[name] then fail(lineno, "family " .. name .. " is not contiguous", line) end
      f = { name = name, samples = {} }
      parsed.families[name] = f
      parsed.order[#parsed.order + 1] = name
    end
    if current and current ~= f then closed[current.name] = true end
    if closed[name] then fail(lineno, "family " .. name .. " is not contiguous", line) end
    current = f
    return f
  end
  local lineno = 0
  for line in text:gmatch("([^\n]*)\n") do
    lineno = lineno + 1
    if line == "" then
      -- blank lines are allowed
    elseif line:sub(1, 1) == "#" then
      local kind, name, rest = line:match("^# (%u+) (%S+) ?(.*)$")
      if kind == "HELP" then
        local f = family(name, lineno, line)
        if f.help then fail(lineno, "second HELP for " .. name, line) end
        f.help = unescape(rest, "help", lineno, line)
      elseif kind == "TYPE" then
        local f = family(name, lineno, line)
        if f.type then fail(lineno, "second TYPE for " .. name, line) end
        if #f.samples > 0 then fail(lineno, "TYPE after samples of " .. name, line) end
        if not TYPES[rest] then fail(lineno, "unknown type " .. rest, line) end
        f.type = rest
      end
    else
      local name, i = line:match("^([a-zA-Z_:][a-zA-Z0-9_:]*)()")
      if not name then fail(lineno, "bad sample", line) end
      local labels, key = {}, ""
      if line:sub(i, i) == "{" then labels, key, i = parse_labels(line, i, lineno) end
      local value_text, ts = line:match("^ (%S+)( ?%-?%d*)$", i)
      if not value_text then fail(lineno, "bad value part", line) end
      local f, suffix = family_of(parsed, name)
      f = f or family(name, lineno, line)
      if f ~= current then
        if closed[f.name] then fail(lineno, "family " .. f.name .. " is not contiguous", line) end
        family(f.name, lineno, line)
      end
      if f.type == "histogram" then
        if not suffix then fail(lineno, "histogram sample without a suffix", line) end
        if (suffix == "_bucket") ~= (labels.le ~= nil) then
          fail(lineno, "le goes with _bucket and only there", line)
        end
      end
      local series = name .. "{" .. key .. "}"
      if seen[series] then fail(lineno, "repeated series " .. series, line) end
      seen[series] = true
      f.samples[#f.samples + 1] = {
        name = name, labels = labels, value = parse_float(value_text, lineno, line),
        line = line, timestamp = ts ~= "" and ts or nil,
      }
    end
  end
  return parsed
end

local function without(labels, drop)
  local copy, names = {}, {}
  for k, v in pairs(labels) do
    if k ~= drop then copy[k] = v; names[#names + 1] = k end
  end
  table.sort(names)
  local key = {}
  for _, n in ipairs(names) do key[#key + 1] = n .. "=" .. labels[n] end
  return copy, table.concat(key, "\0")
end

function M.check_histograms(parsed)
  for _, name in ipairs(parsed.order) do
    local f = parsed.families[name]
    if f.type == "histogram" then
      local series = {}
      for _, s in ipairs(f.samples) do
        local _, key = without(s.labels, "le")
        series[key] = series[key] or { buckets = {} }
        local h = series[key]
        if s.name == name .. "_bucket" then
          h.buckets[#h.buckets + 1] = { le = tonumber(s.labels.le) or
            (s.labels.le == "+Inf" and math.huge) or error("bad le " .. s.labels.le),
            count = s.value, line = s.line }
        elseif s.name == name .. "_sum" then
          h.sum = s.value
        elseif s.name == name .. "_count" then
          h.count = s.value
        end
      end
      for key, h in pairs(series) do
        local where = name .. "{" .. key:gsub("%z", ",") .. "}"
        assert(h.count, where .. ": no _count")
        assert(h.sum, where .. ": no _sum")
        assert(#h.buckets > 0, where .. ": no buckets")
        for i, b in ipairs(h.buckets) do
          if i > 1 then
            assert(b.le > h.buckets[i - 1].le, where .. ": le not increasing at " .. b.line)
            assert(b.count >= h.buckets[i - 1].count, where .. ": not cumulative at " .. b.line)
          end
        end
        local last = h.buckets[#h.buckets]
        assert(last.le == math.huge, where .. ": the last bucket is not +Inf")
        assert(last.count == h.count, where .. ": +Inf bucket ~= _count")
      end
    end
  end
  return true
end

local function same_labels(a, b)
  for k, v in pairs(a) do if b[k] ~= v then return false end end
  for k, v in pairs(b) do if a[k] ~= v then return false end end
  return true
end

function M.get(parsed, series_name, labels)
  labels = labels or {}
  local f = family_of(parsed, series_name)
  if not f then return nil end
  for _, s in ipairs(f.samples) do
    if s.name == series_name and same_labels(s.labels, labels) then return s.value end
  end
  return nil
end

-- The samples of one series name, in output order.
function M.samples(parsed, series_name)
  local f = family_of(parsed, series_name)
  local out = {}
  if not f then return out end
  for _, s in ipairs(f.samples) do
    if s.name == series_name then out[#out + 1] = s end
  end
  return out
end

return M
