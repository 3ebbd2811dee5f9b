/* api/log.c — see api/log.h. */
#include "api/log.h"

#include <lauxlib.h>
#include <string.h>

#include "base/log.h"
#include "controller/controller.h"

#define MAX_FIELDS 24

static int luna_lua_log_log(lua_State *L)
{
    int level = luna_log_level_parse(luaL_checkstring(L, 1));
    if (level < 0)
        return luaL_argerror(L, 1, "debug, info, warn or error");
    const char *msg = luaL_checkstring(L, 2);
    if (!luna_log_enabled((enum luna_log_level)level))
        return 0;
    const char *pairs[2 * MAX_FIELDS];
    int n = 0;
    struct luna_reconcile *r = luna_reconcile_of(L);
    if (r) {
        pairs[2 * n] = "controller";
        pairs[2 * n++ + 1] = luna_controller_name(luna_reconcile_controller(r));
        pairs[2 * n] = "key";
        pairs[2 * n++ + 1] = luna_reconcile_key(r);
        pairs[2 * n] = "reconcile_id";
        pairs[2 * n++ + 1] = luna_reconcile_id(r);
        const char *key = luna_reconcile_key(r);
        const char *slash = strchr(key, '/');
        if (slash) {
            lua_pushlstring(L, key, (size_t)(slash - key)); /* kept on the stack */
            pairs[2 * n] = "namespace";
            pairs[2 * n++ + 1] = lua_tostring(L, -1);
        }
        pairs[2 * n] = "name";
        pairs[2 * n++ + 1] = slash ? slash + 1 : key;
    }
    int attached = n;
    if (lua_istable(L, 3)) {
        lua_newtable(L); /* the values as strings, kept alive until logged */
        int strs = lua_gettop(L);
        for (lua_pushnil(L); lua_next(L, 3) && n < MAX_FIELDS; lua_pop(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING)
                continue;
            lua_pushvalue(L, -2);
            lua_getglobal(L, "tostring");
            lua_pushvalue(L, -3);
            lua_call(L, 1, 1);
            lua_rawset(L, strs);
            lua_pushvalue(L, -2);
            lua_rawget(L, strs);
            /* A field the script sets itself replaces the attached one. */
            const char *k = lua_tostring(L, -3), *v = lua_tostring(L, -1);
            int j;
            for (j = 0; j < attached; j++)
                if (strcmp(pairs[2 * j], k) == 0)
                    break;
            if (j < attached) {
                pairs[2 * j + 1] = v;
            } else {
                pairs[2 * n] = k;
                pairs[2 * n++ + 1] = v;
            }
            lua_pop(L, 1);
        }
    }
    luna_log_pairs((enum luna_log_level)level, msg, pairs, n);
    return 0;
}

void luna_lua_log_register(lua_State *L)
{
    lua_pushcfunction(L, luna_lua_log_log);
    lua_setfield(L, -2, "log");
}
