-- The Lua paths a benchmark or tool run by plain luajit needs (busted gets
-- them from .busted): luna's Lua library, spec/ (helpers, support), and the
-- luna.core module of the build variant in LUNA_BUILD (default: build, the
-- release build `make bench` uses).  Returns that build directory.
--
--   package.path = "spec/?.lua;" .. package.path
--   local build = require("support.bootstrap")
local build = os.getenv("LUNA_BUILD") or "build"
package.path = "lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
package.cpath = build .. "/lua/?.so;" .. package.cpath
return build
