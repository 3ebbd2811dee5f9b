/*
 * lua_ratelimit.h — core.ratelimit: rate limiters from Lua, and the parser
 * every binding uses for a rate limiter description.
 *
 *   core.ratelimit.new{ kind = K, clock = "real"|"fake", ...numbers }
 *     K = "default" (the default when kind is absent):
 *           base_delay = 0.005, max_delay = 1000, qps = 10, burst = 100
 *         "exponential": base_delay, max_delay
 *         "bucket":      qps, burst
 *         "fast_slow":   fast_delay, slow_delay, max_fast_attempts (required)
 *         "max_of":      { child, child, ... } in the array part, each a
 *                        table as above without clock
 *     Unknown fields, wrong types, and bad numbers (negative or infinite
 *     delays, qps <= 0, burst not an integer >= 1) raise.  Returns a
 *     limiter object:
 *   rl:when(key)          the delay in seconds (records a failure)
 *   rl:forget(key)        resets key
 *   rl:num_requeues(key)  failures recorded for key
 *   rl:advance(seconds)   moves a fake clock forward (raises on a real one)
 *   rl:now()              the limiter's clock reading
 *
 * Keys are strings without NUL bytes (anything else raises).  Runs on the
 * loop thread.  The object owns its limiter and clock; __gc frees them.
 */
#ifndef LUNA_LUA_RATELIMIT_H
#define LUNA_LUA_RATELIMIT_H

#include <lua.h>
#include <stdbool.h>

#include "queue/ratelimit.h"

void luna_lua_ratelimit_register(lua_State *L);

#define LUNA_LUA_RATELIMIT_MAX_NODES 32

/* Storage for a parsed description: node[0] is the root; max_of children
 * point into the same array. */
struct luna_lua_ratelimit_nodes {
    struct luna_ratelimit_config node[LUNA_LUA_RATELIMIT_MAX_NODES];
    size_t n;
};

/* Parses the description table at idx into nodes and returns the root.
 * `extra` lists further field names allowed at the top level (NULL-ended,
 * or NULL); they are not read.  May raise (misuse: unknown field, wrong
 * type, unknown kind, too many nodes); numbers are checked later by
 * luna_ratelimit_new. */
const struct luna_ratelimit_config *
luna_lua_ratelimit_check_config(lua_State *L, int idx,
                                struct luna_lua_ratelimit_nodes *nodes,
                                const char *const *extra);

/* The field `clock` of the table at idx: true for "fake", false for "real"
 * or absent.  May raise on anything else. */
bool luna_lua_ratelimit_check_clock(lua_State *L, int idx);

/* The key argument at idx: a string without NUL bytes.  May raise. */
const char *luna_lua_ratelimit_check_key(lua_State *L, int idx);

#endif
