/*
 * script/sort.h — table.sort for the sandbox: a heapsort of our own that
 * counts its comparisons against the watchdog.
 *
 *   sort(t [, less])
 *
 * LuaJIT's table.sort runs in one C call: with the default order it never
 * returns to the interpreter, so the instruction hook cannot stop it, and
 * sorting the few million numbers a 128 MiB heap holds takes seconds.
 * Here, without an order function (or with a C one), every comparison
 * counts as one instruction of the running guard (luna_watchdog_charge,
 * every LUNA_SORT_CHARGE comparisons), so the budgets stop it like a loop
 * in Lua: numbers are sorted in a copy on the Lua heap (under the memory
 * cap), other values by a heapsort in place (O(n log n) worst case; not
 * stable, like LuaJIT's; raw reads and writes of t[1] .. t[#t]; `<` may
 * run __lt; no "invalid order function" error).  With an order function
 * written in Lua, LuaJIT's own sort runs: each comparison runs Lua
 * instructions, which the hook counts, so it is bounded too.  Before it
 * calls any Lua it checks the C-stack guard (luna_watchdog_check_cstack).
 *
 * Uses: watchdog.  Runs on the loop thread (or in a spec's state).
 */
#ifndef LUNA_SORT_H
#define LUNA_SORT_H

#include <lua.h>

#define LUNA_SORT_CHARGE 4096

/* Sets sort in the table on top of L's stack. */
void luna_sort_register(lua_State *L);

#endif
