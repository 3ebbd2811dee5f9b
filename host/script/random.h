/*
 * script/random.h — math.random and math.randomseed with a generator per
 * caller, for the sandbox.
 *
 * Uses: nothing but LuaJIT.  Runs on the loop thread (or in a spec's state).
 *
 * LuaJIT keeps one generator per Lua state, behind its math.random: every
 * controller of a reload would draw from, and could seed, the same one, so
 * one controller's math.randomseed(42) would make a neighbour's "random"
 * names predictable, and its draws would change the neighbour's sequence.
 * The sandbox gives each controller file (and the modules it requires) its
 * own pair from luna_lua_random_push: a xoshiro256** generator seeded from
 * the system's entropy (getrandom), so no controller can predict or steer
 * another's numbers.  Lua 5.1's interface:
 *   random()     a number in [0, 1);
 *   random(m)    an integer in [1, m];
 *   random(m, n) an integer in [m, n] ("interval is empty" when m > n);
 *   randomseed(x) restarts this generator from x (the same x, the same
 *   sequence), for the caller's own reproducible runs.
 *
 * Ownership: the generator's state is a userdata shared by the two
 * closures (the Lua state's garbage collector frees it).
 */
#ifndef LUNA_LUA_RANDOM_H
#define LUNA_LUA_RANDOM_H

#include <lua.h>

/* [-0, +2] Pushes random and randomseed of a new generator. */
void luna_lua_random_push(lua_State *L);

#endif
