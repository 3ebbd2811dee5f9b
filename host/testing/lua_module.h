/*
 * lua_module.h — the full `luna.core` Lua C module that busted and the
 * benchmarks load (build/lua/luna/core.so, through plain luajit).
 *
 * luaopen_luna_core builds the script-facing table (lua/lua_core.h:
 * version, json, crypto) and adds every spec-facing binding by calling its
 * luna_lua_<ns>_register(L) with the table on top of the stack: loop,
 * informer, object_stream, store, selector, backoff, ratelimit, workqueue,
 * kubeconfig, http, metrics, health, leader.  The luna executable does not
 * use it: its Lua states preload the script-facing table only
 * (controller/loader.c), so controller scripts cannot reach these bindings.
 */
#ifndef LUNA_LUA_MODULE_H
#define LUNA_LUA_MODULE_H

#include <lua.h>

/* The module's entry point (require "luna.core" from plain luajit). */
int luaopen_luna_core(lua_State *L);

#endif
