/*
 * script/pattern.h — string.find, string.match, string.gmatch and string.gsub
 * for the sandbox: Lua 5.1 patterns, matched by a backtracking matcher of
 * our own that counts its steps against the watchdog.
 *
 *   find(s, pattern [, init [, plain]])   match(s, pattern [, init])
 *   gmatch(s, pattern)                    gsub(s, pattern, repl [, n])
 *
 * Semantics are those of LuaJIT's string library (Lua 5.1 patterns:
 * classes %a %c %d %l %p %s %u %w %x %z and their complements, sets,
 * `*` `+` `-` `?`, anchors, captures and position captures, %1-%9, %bxy,
 * %f[set]); patterns are read by length, so a NUL byte is an ordinary
 * character.  What differs is the cost model: a backtracking pattern such
 * as ("a"):rep(2e4):find(".-.-.-b") takes time cubic in the subject, and
 * LuaJIT's matcher runs it in one C call the instruction hook never
 * interrupts.  Here every step of the matcher (one character tried by a
 * pattern item, one backtrack) counts as one instruction of the running
 * guard (luna_watchdog_charge, every LUNA_PATTERN_CHARGE steps), so the
 * instruction and time budgets stop it like any loop in Lua, with the
 * guard's error ("reconcile exceeded its time budget ...").  A plain
 * find (or a pattern without special characters) uses memmem: linear.
 *
 * The matcher recurses only per pattern item that can backtrack, at most
 * LUNA_PATTERN_MAX_DEPTH deep ("pattern too complex"), and gsub's
 * replacement function or table runs behind the C-stack guard
 * (luna_watchdog_check_cstack).  Results are built in Lua strings, so the
 * memory cap sees them.
 *
 * Uses: watchdog.  Runs on the loop thread (or in a spec's state).
 * Nothing is allocated outside Lua; errors raise (longjmp) with nothing to
 * free.
 */
#ifndef LUNA_PATTERN_H
#define LUNA_PATTERN_H

#include <lua.h>

#define LUNA_PATTERN_CHARGE 4096
#define LUNA_PATTERN_MAX_DEPTH 200
#define LUNA_PATTERN_MAX_CAPTURES 32

/* Sets find, match, gmatch and gsub in the table on top of L's stack. */
void luna_pattern_register(lua_State *L);

#endif
