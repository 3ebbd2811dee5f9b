/*
 * script/sandbox.h — the environment controller scripts run in.
 *
 * Uses: LuaJIT, random (each realm's math.random), the watchdog (print
 * names the controller, key and reconcile id its guard carries), log.
 * Knows nothing of controllers.  Runs on the loop thread.
 *
 * Every controller file (and every module it requires from the controllers
 * directory) runs with its own environment, set with setfenv on its chunk,
 * so files cannot see or clobber each other's globals.  An environment
 * holds exactly the globals listed in docs/isolation.md:
 *   - base: assert error next pcall xpcall rawequal rawget select tonumber
 *     tostring type unpack _VERSION, and sandboxed getmetatable
 *     setmetatable rawset pairs ipairs print load loadstring require _G;
 *   - libraries (read-only): string (no dump), table, math (the realm's,
 *     below), bit, coroutine, os (time clock date difftime getenv), debug
 *     (traceback).
 * Nothing else: no io, dofile, loadfile, getfenv, setfenv, collectgarbage,
 * newproxy, module, package, jit, ffi, os.exit/execute/remove/rename/
 * tmpname/setlocale, or the rest of debug.
 *
 * Rules:
 *   - strict globals: reading an undefined global raises "undefined global
 *     'x'"; assigning any global raises (scripts use locals);
 *   - read-only tables: the libraries above and every luna module a script
 *     requires are views of a snapshot taken at the first require; writing
 *     a field, rawset and setmetatable on them raise; pairs/ipairs work on
 *     them (the sandbox's pairs and ipairs know views), `#` and next() see
 *     an empty table;
 *   - require(name): "luna" and the public helpers (luna.meta,
 *     luna.finalizers, luna.conditions, luna.events, luna.errors,
 *     luna.time, luna.predicates) as read-only views; "luna.core" as a
 *     view of { version, json = { encode, decode, array, object,
 *     is_array, is_object, null }, crypto }; the libraries above by name;
 *     any other `a.b.c` name loads DIR/a.b.c.mod.lua, else DIR/a/b/c.lua
 *     (DIR: the directory given when the controller file was loaded, for
 *     the modules it requires too; both existing is an error), once per
 *     realm, in its own environment;
 *   - realms: each file luna_sandbox_loadfile loads (a controller file)
 *     starts a realm, which the modules it requires join: the module
 *     instances (a module required twice in a realm is one instance, in
 *     two realms two) and the realm's own math, whose random and
 *     randomseed use a generator of the realm's (script/random.h).  No
 *     table, function or upvalue a script can write is shared between
 *     realms: the read-only views are the only things they have in common;
 *   - load/loadstring take text chunks only (strings, no binary bytecode);
 *     the chunk gets the calling file's environment (or the table passed as
 *     load's 4th argument);
 *   - getmetatable returns only metatables scripts set themselves (or a
 *     __metatable field): the host's and the library's stay out of reach;
 *   - coroutine.resume refuses the host's coroutines (reconciles, the
 *     callback thread): a script cannot resume a reconcile waiting for the
 *     API (and hand it a forged answer);
 *   - xpcall's message handler is skipped (the message goes through as is)
 *     when the watchdog raised the error: LuaJIT runs handlers with the
 *     hook marked active, where a looping handler could not be stopped;
 *     pcall and xpcall stay yieldable (the API works inside them);
 *   - print writes one log line at info level: the arguments through
 *     tostring, joined with spaces, with controller, key, reconcile_id
 *     (when known) and source (file:line).
 *
 * Ownership: everything lives in the Lua state (registry), freed by
 * lua_close.
 */
#ifndef LUNA_SANDBOX_H
#define LUNA_SANDBOX_H

#include <lua.h>

#include "base/error.h"

/* Builds the shared parts (read-only libraries, the string metatable
 * without dump) once per state.  Needs the standard libraries opened. */
int luna_sandbox_install(lua_State *L, luna_error *err);

/* Loads luna's own Lua library (the modules scripts may require, and the
 * view of luna.core) with the real require, in a protected call outside
 * any watchdog guard.  The host runs it before the first script, so the
 * library's load time is never charged to a script's budget, and a script
 * stopped by its watchdog can never leave a half-loaded luna module
 * ("loop or previous error loading module") for the files after it.
 * Idempotent.  Returns 0, or LUNA_ELUA with the message. */
int luna_sandbox_preload(lua_State *L, luna_error *err);

/* Loads the file at path as a text chunk (a binary chunk is refused) and
 * gives it a fresh environment in a new realm, whose require finds modules
 * under dir.
 * Pushes the function and returns 0, or returns LUNA_ELUA with the
 * message ("path:line: ...") and pushes nothing. */
int luna_sandbox_loadfile(lua_State *L, const char *path, const char *dir, luna_error *err);

/* Calls fn(ud, path, type) for every module a script may require (the
 * luna modules and luna.core) and, recursively, every string-keyed field
 * of what require gives the script ("luna.get", "function"; type is Lua's
 * type name), each table once.  The spec of `luna stubs` checks the
 * editor definitions against this.  0, or LUNA_ELUA (err set). */
int luna_sandbox_list_api(lua_State *L, void (*fn)(void *ud, const char *path, const char *type),
                              void *ud, luna_error *err);

/* Marks the coroutine at the top of L's stack (not popped) as the host's:
 * the sandbox's coroutine.resume refuses it.  A no-op without a sandbox. */
void luna_sandbox_protect_top(lua_State *L);

/* Dependency tracking (one at a time): between begin and end, the path of
 * every module from the controllers directory that require is asked for
 * (loaded then or before) is recorded once.  end pushes the list (a table
 * of paths in first-require order) and stops tracking.  Never raise. */
void luna_sandbox_deps_begin(lua_State *L);
void luna_sandbox_deps_end(lua_State *L);

#endif
