/* api/log.c — see api/log.h. */
#include "api/log.h"

#include <lauxlib.h>
#include <string.h>

#include "base/log.h"
#include "controller/controller.h"
#include "script/watchdog.h"

/* Attached pairs: controller, key, reconcile_id, namespace, name. */
#define ATTACHED_MAX 5
#define HOST_FIELDS_MAX (LUNA_LOG_PAIRS_MAX - ATTACHED_MAX)

/* [-0, +1] t[k] as a string (tostring of any value), kept alive in the
 * table at index strs. */
static const char *field_string(lua_State *L, int strs, int value, size_t *len)
{
    lua_getglobal(L, "tostring");
    lua_pushvalue(L, value);
    lua_call(L, 1, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "'tostring' must return a string to 'luna.log'");
    lua_pushvalue(L, -1);
    lua_rawseti(L, strs, (int)lua_objlen(L, strs) + 1);
    return lua_tolstring(L, -1, len);
}

/* core.runtime.log(level, msg [, fields [, host_fields]]): fields are the
 * script's (written where they cannot pass for the host's, log.h);
 * host_fields are luna's own Lua library's (the shadow write line), which
 * replace an attached pair of the same name. */
static int luna_api_log_log(lua_State *L)
{
    int level = luna_log_level_parse(luaL_checkstring(L, 1));
    if (level < 0)
        return luaL_argerror(L, 1, "debug, info, warn or error");
    size_t msg_len;
    const char *msg = luaL_checklstring(L, 2, &msg_len);
    if (!lua_isnoneornil(L, 3))
        luaL_checktype(L, 3, LUA_TTABLE);
    if (!lua_isnoneornil(L, 4))
        luaL_checktype(L, 4, LUA_TTABLE);
    if (!luna_log_enabled((enum luna_log_level)level))
        return 0;
    lua_settop(L, 4);
    luna_watchdog_check_cstack(L); /* a __tostring may log again */
    lua_newtable(L); /* every string handed to the writer, kept alive until it returns */
    int strs = lua_gettop(L);
    const char *pairs[2 * LUNA_LOG_PAIRS_MAX];
    int n = 0;
    struct luna_reconcile *r;
    struct luna_controller *c = luna_controller_current(L, &r);
    if (r) {
        pairs[2 * n] = "controller";
        pairs[2 * n++ + 1] = luna_controller_name(c);
        pairs[2 * n] = "key";
        pairs[2 * n++ + 1] = luna_reconcile_key(r);
        pairs[2 * n] = "reconcile_id";
        pairs[2 * n++ + 1] = luna_reconcile_id(r);
        const char *key = luna_reconcile_key(r);
        const char *slash = strchr(key, '/');
        if (slash) {
            lua_pushlstring(L, key, (size_t)(slash - key));
            lua_rawseti(L, strs, (int)lua_objlen(L, strs) + 1);
            lua_rawgeti(L, strs, (int)lua_objlen(L, strs));
            pairs[2 * n] = "namespace";
            pairs[2 * n++ + 1] = lua_tostring(L, -1);
            lua_pop(L, 1);
        }
        pairs[2 * n] = "name";
        pairs[2 * n++ + 1] = slash ? slash + 1 : key;
    }
    int attached = n;
    if (lua_istable(L, 4)) {
        int extra = 0;
        for (lua_pushnil(L); lua_next(L, 4); lua_pop(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING)
                continue;
            if (extra++ == HOST_FIELDS_MAX)
                return luaL_error(L, "luna.log: at most %d host fields", HOST_FIELDS_MAX);
            const char *k = lua_tostring(L, -2);
            const char *v = field_string(L, strs, lua_gettop(L), NULL);
            lua_pop(L, 1);
            int j;
            for (j = 0; j < attached; j++)
                if (strcmp(pairs[2 * j], k) == 0)
                    break;
            if (j == attached)
                j = n++;
            /* a number or boolean is marked as one (base/log.h) */
            int t = lua_type(L, -1);
            if (t == LUA_TNUMBER || t == LUA_TBOOLEAN) {
                lua_pushfstring(L, "%s%s", t == LUA_TNUMBER ? LUNA_LOG_NUM("") : LUNA_LOG_BOOL(""),
                                k);
                lua_rawseti(L, strs, (int)lua_objlen(L, strs) + 1);
                lua_rawgeti(L, strs, (int)lua_objlen(L, strs));
                k = lua_tostring(L, -1);
                lua_pop(L, 1);
            }
            pairs[2 * j] = k;
            pairs[2 * j + 1] = v;
        }
    }
    struct luna_log_field fields[LUNA_LOG_FIELDS_MAX];
    int nf = 0;
    if (lua_istable(L, 3)) {
        for (lua_pushnil(L); lua_next(L, 3); lua_pop(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING)
                continue;
            if (nf == LUNA_LOG_FIELDS_MAX)
                return luaL_error(L, "luna.log: at most %d fields", LUNA_LOG_FIELDS_MAX);
            struct luna_log_field *f = &fields[nf++];
            /* the key kept too: a __tostring may empty the table */
            lua_pushvalue(L, -2);
            lua_rawseti(L, strs, (int)lua_objlen(L, strs) + 1);
            f->key = lua_tolstring(L, -2, &f->key_len);
            int t = lua_type(L, -1);
            f->type = t == LUA_TNUMBER    ? LUNA_LOG_TYPE_NUMBER
                      : t == LUA_TBOOLEAN ? LUNA_LOG_TYPE_BOOL
                                          : LUNA_LOG_TYPE_STRING;
            f->value = field_string(L, strs, lua_gettop(L), &f->value_len);
            lua_pop(L, 1);
        }
    }
    luna_log_record((enum luna_log_level)level, msg, msg_len, pairs, n, fields, nf);
    return 0;
}

void luna_api_log_register(lua_State *L)
{
    lua_pushcfunction(L, luna_api_log_log);
    lua_setfield(L, -2, "log");
}
