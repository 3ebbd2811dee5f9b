/*
 * lua_json.h — core.json: JSON <-> Lua values, over host/base/json.h.
 *
 *   core.json.decode(s [, opts])   value, or nil, err
 *   core.json.encode(v [, opts])   string, or nil, err
 *   core.json.decoder([opts])      incremental decoder: d:feed(chunk), d:finish()
 *   core.json.null                 the value of JSON null
 *   core.json.array([t])           marks t (or a new table) as a JSON array
 *   core.json.object([t])          marks t (or a new table) as a JSON object
 *   core.json.array_mt, core.json.object_mt   the two marker metatables
 *   core.json.is_array(v), core.json.is_object(v)
 *
 * opts: max_depth (default and upper bound 1000); for decode, bigint =
 * "error" (default) or "double" (an integer past 64 bits becomes the
 * nearest double: how cache reads decode); and for decode/decoder
 * max_size (bytes, default unlimited) and, for decoder, multiple = true (a
 * stream of values such as a watch stream).
 *
 * Mapping (decode → Lua → encode):
 *   object  → table (no metatable)       → object
 *   array   → table with array_mt         → array
 *   string  → string (valid UTF-8; \u0000 gives a NUL byte)
 *   integer in [-2^53, 2^53]      → number               → digits, no point
 *   integer in [-2^63, 2^63) else → int64_t cdata        → exact digits
 *   integer in [2^63, 2^64)       → uint64_t cdata       → exact digits
 *   larger integer                → error (never a silently rounded double)
 *   fraction / exponent, "-0"     → number (double)
 *   true/false → boolean; null → core.json.null (a NULL light userdata, the
 *   same value as cjson.null).
 * Encoding a Lua number: NaN and ±inf fail; an integral value with
 * |v| <= 2^53 is written as an integer ("1", not "1.0"; -0 as "-0"); any
 * other value with the fewest %g digits that read back to the same double
 * (1e+20, 0.1, 5e-324).  Integers beyond 2^53 are exact only as
 * int64_t/uint64_t cdata (e.g. 2^60 as 2LL^60).
 * Tables: array_mt → array (keys must be exactly 1..n); object_mt → object
 * (keys must be strings); unmarked: empty → {}, keys exactly 1..n → array,
 * all keys strings → object, anything else fails.  Tables are read raw
 * (metamethods ignored).  A top-level nil encodes as null.
 *
 * Errors: decode returns nil, err on any bad input (malformed, truncated,
 * trailing garbage, bad escape, unpaired surrogate escape, invalid UTF-8,
 * too deep, too large); err.reason is "InvalidJSON" and err.message names
 * the byte offset.  encode returns nil, err (reason "InvalidValue", message
 * naming the path such as $.spec.items[2]) for any value it cannot write:
 * functions, threads, userdata, non-NULL light userdata, other cdata, NaN,
 * infinity, non-string keys, mixed or holey tables, cycles, too deep,
 * invalid UTF-8.  Only a wrong argument type for opts raises.  encode
 * builds its text with the state's own allocator (counted and capped by the
 * watchdog: script/watchdog.h, "Counted C memory"): text that would pass
 * the cap fails as it grows, with reason "OutOfMemory" (and the running
 * guard stopped for memory).  A decode input over 1 MiB is parsed by a
 * decoder of its own, whose buffers go with it.
 *
 * Runs on the loop thread.
 */
#ifndef LUNA_LUA_JSON_H
#define LUNA_LUA_JSON_H

#include <lua.h>

#include "base/error.h"
#include "base/json.h"

/* Adds core.json to the table on top of the stack. */
void luna_lua_json_register(lua_State *L);

/* Pushes the Lua value of the JSON document json[0..len) (mapping above,
 * except that an integer past 64 bits becomes the nearest double, as the
 * API server's own decoding makes it: this is how the host hands cached
 * objects to scripts, and one such object must not make every read of
 * the cache fail) and returns 0; or pushes nothing and returns a negative code with err
 * filled.  json is borrowed for the call.  May raise only when Lua runs out
 * of memory. */
int luna_lua_json_push(lua_State *L, const char *json, size_t len,
                       luna_error *err);
/* luna_lua_json_push's fast reader alone: pushes the value and returns 0
 * when it could read json[0..len) (integers of at most 15 digits, no
 * fraction or exponent, nesting that fits the Lua stack; the result is
 * the same as the full parser's), or pushes nothing and returns -1 (the
 * full parser is then needed).  Trusts json to be valid UTF-8, as cached
 * objects are (their informer validated them): for bytes from anywhere
 * else use core.json.decode.  May raise only when Lua runs out of memory.
 * Strings of at most 32 bytes come from a cache of the state's (512 of
 * them at most, with their bytes: about 40 KiB of Lua heap, owned by a
 * userdata in the registry and freed with the state): the same string
 * values, without interning them again on every read. */
int luna_lua_json_read_cached(lua_State *L, const char *json, size_t len);


#endif
