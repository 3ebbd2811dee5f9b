/* lua_selector.h — core.selector; see lua_selector.c for the Lua API. */
#ifndef LUNA_LUA_SELECTOR_H
#define LUNA_LUA_SELECTOR_H

#include <lua.h>

void luna_lua_selector_register(lua_State *L);

#endif
