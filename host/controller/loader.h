/*
 * controller/loader.h — a LuaJIT state that hosts controller scripts.
 *
 * Uses: LuaJIT, lua/lua_core (the script-facing `luna.core`, preloaded).
 * Runs on the loop thread.
 *
 * A state has the standard libraries, package.path pointing at luna's Lua
 * library (so `require "luna"` finds lua/luna/init.lua), `luna.core`
 * preloaded (version, json, crypto; core.runtime once lua_runtime installs
 * it; none of the spec-only bindings), a watchdog (watchdog.h: JIT compiler off, instruction/time
 * budgets, heap cap; default settings until luna_watchdog_configure) and
 * the script sandbox (script/sandbox.h).  The state is made by
 * luna_watchdog_newstate, so it has memory accounts (a LuaJIT that refuses
 * custom allocators gets luaL_newstate, the heap cap alone, and one
 * warning).  Loading a controller file runs it in
 * its own sandboxed environment, inside a watchdog guard ("controller
 * file") charged to a new memory account named by the file's path; it must
 * return the value of `luna.controller{...}`.  Errors
 * (syntax, runtime at load, a watchdog stop, invalid spec) come back as
 * LUNA_ELUA with "file:line: message" and the traceback in err.  Only the
 * controller files are sandboxed: luna's own Lua library runs with the
 * state's real globals.
 *
 * `luna run` loads each controller file into a state of its own
 * (controller/generation.h); `luna rbac` loads a directory into one.
 *
 * Ownership: luna_loader_new returns a state owned by the caller, closed with
 * lua_close().  Loaded controller tables stay in the state's registry, in
 * the array `luna.controllers` (in load order), until the state is closed.
 */
#ifndef LUNA_LOADER_H
#define LUNA_LOADER_H

#include <stdbool.h>

#include <lua.h>

#include "base/error.h"

/* Finds the directory holding luna/init.lua: $LUNA_LUA_DIR, then paths
 * relative to the executable (build tree, then install prefix).  Returns 0
 * and writes the path (borrowed, static) to *dir, or LUNA_ENOTFOUND. */
int luna_loader_find_lib(const char *argv0, const char **dir, luna_error *err);

/* New state with package.path = lib_dir/?.lua;lib_dir/?/init.lua, the
 * watchdog and the sandbox.  NULL (and err set) only when out of memory. */
lua_State *luna_loader_new(const char *lib_dir, luna_error *err);

/* Loads every *.lua file directly in dir but *_test.lua (specs for `luna
 * test`) and *.mod.lua (modules controllers require), in name order.
 * Every file is tried; each failure is logged ("controller load failed",
 * file, error) and recorded (luna_loader_failure).  Returns the number of
 * files loaded; or, when a file failed and require_all is set or no file
 * loaded, the first failure's code (with the count of failures in err's
 * message).  A directory with no controller file is an error. */
int luna_loader_load_dir(lua_State *L, const char *dir, bool require_all, luna_error *err);

/* luna_loader_load_dir's walk, for a caller that loads each file its own
 * way (controller/generation.c: one state per file): load(ud, path, err)
 * for every controller file of dir in name order, 0 when it loaded, else
 * a negative code with err set; the failure is logged ("controller load
 * failed") and handed to failed(ud, file, message).  Returns what
 * luna_loader_load_dir returns. */
int luna_loader_each_file(const char *dir, bool require_all,
                          int (*load)(void *ud, const char *path, luna_error *err),
                          void (*failed)(void *ud, const char *file, const char *msg), void *ud,
                          luna_error *err);

/* Loads the controller file at path into L (luna_loader_load_dir does it
 * for each file): 0, or LUNA_ELUA with "file:line: message" in err. */
int luna_loader_load_file(lua_State *L, const char *path, luna_error *err);

/* The files luna_loader_load_dir could not load, in name order: their
 * count, and failure i's (1-based) path and error message (borrowed from
 * the state; LUNA_ENOTFOUND if i is out of range). */
int luna_loader_failure_count(lua_State *L);
int luna_loader_failure(lua_State *L, int i, const char **file, const char **error);

/* Admission webhooks (lua/luna/webhook.lua, docs/webhooks.md): a file
 * may also return luna.webhooks{...} (webhooks only, no controller), and a
 * controller may carry `webhooks`.  The loader keeps every declaration of
 * the files that loaded, in load order, in the state's registry; a path
 * (/validate/NAME, /mutate/NAME) declared twice fails the second file.
 * Count, and push declaration i (1-based; the private table of
 * luna.webhook: name, type, path, fn, failure_policy, timeout_seconds ...)
 * or LUNA_ENOTFOUND (nothing pushed). */
int luna_loader_webhook_count(lua_State *L);
int luna_loader_push_webhook(lua_State *L, int i);
/* The memory account of the file webhook i was declared in (its calls are
 * charged there, as its controller's reconciles are), or 0. */
unsigned luna_loader_webhook_account(lua_State *L, int i);

/* Number of controllers loaded so far. */
int luna_loader_count(lua_State *L);

/* The file controller i (1-based, load order) came from and the hex
 * SHA-256 of that file's bytes at load time, or, when the file required
 * modules of the controllers directory while loading, a SHA-256 over the
 * file's digest and each module's path and digest (so editing a module
 * changes the controllers that use it); both borrowed from the state.
 * LUNA_ENOTFOUND if i is out of range. */
int luna_loader_source(lua_State *L, int i, const char **file, const char **sha256);

/* The watchdog memory account controller i's file ran in (what it keeps
 * at module level is charged there; its controller takes it over), or 0
 * (the host's) when the state has no accounts or i is out of range. */
unsigned luna_loader_account(lua_State *L, int i);

#endif
