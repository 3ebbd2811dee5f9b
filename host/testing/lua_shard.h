/*
 * lua_shard.h — core.shard, KEP-5866 shard selectors (base/shard.h), for
 * specs and benches.  64-bit values travel as "0x%016x" strings (a Lua
 * number holds 53 bits).
 *
 *   core.shard.hash(s)                  → "0x…" FNV-1a 64 of s's bytes
 *   core.shard.parse(text)              → { text = canonical, ranges = {
 *                                            { field = "uid"|"namespace",
 *                                              start = "0x…", ["end"] = "0x…" } } }
 *                                         | false (empty text) | nil, message
 *   core.shard.matches(text, ns, uid)   → boolean (raises on a bad selector)
 *   core.shard.split(members, self [, field]) → canonical text | nil, message
 *   core.shard.split_range(i, n)        → start, end   (member i of n, 0-based)
 */
#ifndef LUNA_LUA_SHARD_H
#define LUNA_LUA_SHARD_H

#include <lua.h>

void luna_lua_shard_register(lua_State *L);

#endif
