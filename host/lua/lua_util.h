/*
 * lua_util.h — small helpers shared by the lua_* binding files.
 *
 * Runs on the loop thread.  Functions marked "may raise" can longjmp (they
 * call lua_error or luaL_check*): callers hold no malloc'd memory across them.
 */
#ifndef LUNA_LUA_UTIL_H
#define LUNA_LUA_UTIL_H

#include <lua.h>
#include <lauxlib.h>

#include "base/error.h"

/* Panic function for lua_atpanic: an error outside any protected call is
 * logged at error through luna's logger (LuaJIT's own would write to
 * stderr), then the process aborts. */
int luna_lua_panic(lua_State *L);

/* Message handler for lua_pcall: appends a traceback to the error. */
int luna_lua_traceback(lua_State *L);

/* Calls the function below nargs arguments with a traceback handler.  On
 * error logs "lua callback failed" with `what` and the traceback, pops it,
 * and returns LUNA_ELUA; on success leaves nresults values. */
int luna_lua_pcall(lua_State *L, int nargs, int nresults, const char *what);

/* luna's one error type, in C and Lua alike: a table
 * { reason = <string>, message = <string>, code = <number> } with the
 * metatable registered as "luna.error", whose __tostring is
 * "<reason>: <message>".  Arguments always come in that order (reason,
 * message, code); luna.errors.new (lua/luna/errors.lua) is the same
 * constructor with its arguments checked.  code is the HTTP status, 0 when
 * there was no response, or the LUNA_E* code of a local failure. */

/* Pushes nil and a new error (reason and message copied; NULL message:
 * ""); returns 2 (for `return luna_lua_push_error(...)`). */
/* The fields of a luna error, NULL-terminated: reason, message and code
 * (set here), where (set by lua/luna/api.lua on a failed API call).
 * test_control.c's `api` command reports them for the spec of the editor
 * definitions. */
extern const char *const luna_lua_error_fields[];
int luna_lua_push_error(lua_State *L, const char *reason, const char *message, int code);
/* core.error(reason [, message [, code]]) → error: the constructor for Lua
 * (luna.errors.new checks the arguments, then calls it). */
int luna_lua_error_new(lua_State *L);

/* Sets t[name] = a new table of the functions in funcs, where t is at the
 * top of the stack. */
void luna_lua_register_table(lua_State *L, const char *name, const luaL_Reg *funcs);

/* Registers metatable `name` whose __index is a table of `methods` and
 * whose __gc is gc (NULL: none). */
void luna_lua_new_class(lua_State *L, const char *name, const luaL_Reg *methods,
                        lua_CFunction gc);

/* Registers metatable `name` once (does nothing if it already exists): __index
 * is a table of `methods`, __gc is gc and __tostring is tostring (NULL: none),
 * and __metatable is `name`, so getmetatable() on an object returns the name
 * and setmetatable() on it fails. */
void luna_lua_new_locked_class(lua_State *L, const char *name, const luaL_Reg *methods,
                               lua_CFunction gc, lua_CFunction tostring);

/* Pushes {group=, version=, resource=, kind=, namespaced=, has_status=}. */
struct luna_resource;
void luna_lua_push_resource(lua_State *L, const struct luna_resource *res);

/* Optional field readers on the table at index idx (may raise on a wrong type). */
const char *luna_lua_opt_string_field(lua_State *L, int idx, const char *key,
                                      const char *def);
lua_Number luna_lua_opt_number_field(lua_State *L, int idx, const char *key,
                                     lua_Number def);
int luna_lua_opt_bool_field(lua_State *L, int idx, const char *key, int def);

#endif
