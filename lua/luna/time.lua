-- luna.time: wall-clock instants as Kubernetes writes them.
--
-- Kubernetes has two timestamp forms: metav1.Time, RFC 3339 in UTC with
-- whole seconds ("2026-11-21T06:00:00Z": lastTransitionTime,
-- creationTimestamp, core/v1 Event timestamps), and metav1.MicroTime, the
-- same with six fraction digits ("2026-11-21T06:00:00.000000Z": eventTime,
-- series.lastObservedTime).  Every helper that stamps a time takes an
-- optional `now`: nil (the wall clock), a number of seconds since the epoch,
-- or an RFC 3339 string; specs pass it to be deterministic.
--
-- Wrong argument types and malformed strings given as `now` raise (they are
-- programming errors); time.parse returns nil, err for text read from
-- objects.

local util = require("luna.util")
local core = require("luna.core")

local time = {}

-- Seconds since the epoch, with a fraction when the platform gives one
-- (clock_gettime(CLOCK_REALTIME), or the fake clock under `luna test`:
-- base/clock.h's wall clock; in C: an FFI call and its cdata cost
-- ten times as much in the controller state, where the JIT is off).
time.now = core.now

-- Days since 1970-01-01 of the proleptic Gregorian date y-m-d.
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = m > 2 and m - 3 or m + 9
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

local DAYS_IN_MONTH = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }

local function days_in_month(y, m)
  if m == 2 and (y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0)) then return 29 end
  return DAYS_IN_MONTH[m]
end

-- "2026-11-21T06:00:00Z", "2026-11-21T06:00:00.5+01:00" → seconds since the
-- epoch (a number, with the fraction); or nil, message.
function time.parse(s)
  if type(s) ~= "string" then
    return nil, string.format("time must be an RFC 3339 string, got %s", type(s))
  end
  local y, mo, d, h, mi, sec, rest =
    s:match("^(%d%d%d%d)%-(%d%d)%-(%d%d)[Tt](%d%d):(%d%d):(%d%d)(.*)$")
  if not y then
    return nil, string.format("invalid time %q: want RFC 3339 such as 2026-11-21T06:00:00Z", s)
  end
  y, mo, d, h, mi, sec = tonumber(y), tonumber(mo), tonumber(d), tonumber(h), tonumber(mi), tonumber(sec)
  if mo < 1 or mo > 12 or d < 1 or d > days_in_month(y, mo) or h > 23 or mi > 59 or sec > 60 then
    return nil, string.format("invalid time %q: field out of range", s)
  end
  local frac = 0
  local digits, zone = rest:match("^%.(%d+)(.*)$")
  if digits then
    frac = tonumber("0." .. digits)
    rest = zone
  end
  local offset
  if rest == "Z" or rest == "z" then
    offset = 0
  else
    local sign, oh, om = rest:match("^([%+%-])(%d%d):(%d%d)$")
    if not sign or tonumber(oh) > 23 or tonumber(om) > 59 then
      return nil, string.format("invalid time %q: want a zone Z or +hh:mm", s)
    end
    offset = (tonumber(oh) * 60 + tonumber(om)) * 60
    if sign == "-" then offset = -offset end
  end
  return days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset + frac
end

-- now (nil, seconds, or an RFC 3339 string) → seconds.  Raises (at the
-- caller's line) on a wrong type, a non-finite number or a malformed string.
function time.resolve(now)
  local t = type(now)
  if now == nil then return time.now() end
  if t == "number" then
    if now ~= now or now == math.huge or now == -math.huge then
      util.raise("now must be a finite number of seconds")
    end
    return now
  end
  if t == "string" then
    local v, err = time.parse(now)
    if not v then util.raise("now: %s", err) end
    return v
  end
  util.raise("now must be nil, seconds since the epoch or an RFC 3339 string, got %s", t)
end

-- metav1.Time: "2026-11-21T06:00:00Z" (the second, rounded down).
function time.format(now)
  local v = time.resolve(now)
  return os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(v))
end

-- Whole microseconds since the epoch, rounded to the nearest.
function time.micros(now)
  return math.floor(time.resolve(now) * 1e6 + 0.5)
end

-- metav1.MicroTime: "2026-11-21T06:00:00.000000Z".
function time.format_micro(now)
  local us = time.micros(now)
  local s = math.floor(us / 1e6)
  return os.date("!%Y-%m-%dT%H:%M:%S", s) .. string.format(".%06dZ", us - s * 1e6)
end

return time
