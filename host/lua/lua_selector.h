/*
 * lua_selector.h — core.selector: Kubernetes label and field selectors
 * (base/selector.h: kube-apiserver's grammar and messages) from Lua, for
 * specs and tools.
 *
 *   core.selector.parse(text [, "labels"|"fields"]) → Selector | nil, err
 *       err: a luna error with code 400, reason "BadRequest" and the
 *       parser's message
 *   Selector:matches({key = value, ...}) → boolean (non-string values are
 *       absent)
 *   tostring(Selector) → the canonical form
 *
 * A Selector owns its parsed selector and frees it in __gc.  Misuse (wrong
 * argument types, an unknown kind) raises.  Runs on any thread that owns
 * the Lua state.
 */
#ifndef LUNA_LUA_SELECTOR_H
#define LUNA_LUA_SELECTOR_H

#include <lua.h>

/* Adds core.selector to the table on top of the stack. */
void luna_lua_selector_register(lua_State *L);

#endif
