/* lua_kubeconfig.c — see lua_kubeconfig.h. */
#include "testing/lua_kubeconfig.h"

#include <stdbool.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>

#include "base/url.h"
#include "client/kubeconfig.h"
#include "lua/lua_util.h"

#define KUBECONFIG_MT "luna.kubeconfig"

struct lua_kubeconfig {
    struct luna_kubeconfig *cfg;
};

static struct luna_kubeconfig *check_cfg(lua_State *L, int idx)
{
    struct lua_kubeconfig *ud = luaL_checkudata(L, idx, KUBECONFIG_MT);
    if (!ud->cfg)
        luaL_error(L, "kubeconfig is not loaded");
    return ud->cfg;
}

/* Raises on a key of the table at idx that is not in allowed. */
static void check_keys(lua_State *L, int idx, const char *what, const char *const *allowed)
{
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "%s: keys must be strings", what);
        const char *key = lua_tostring(L, -1);
        bool ok = false;
        for (int i = 0; allowed[i]; i++)
            if (strcmp(key, allowed[i]) == 0)
                ok = true;
        if (!ok)
            luaL_error(L, "%s: unknown option '%s'", what, key);
    }
}

/* May raise (wrong option types); holds no malloc'd memory until the load. */
static int luna_lua_kubeconfig_load(lua_State *L)
{
    static const char *const opts_keys[] = { "path", "context", "env", "serviceaccount_dir",
                                             "exec_timeout", NULL };
    static const char *const env_keys[] = { "KUBECONFIG", "HOME", "KUBERNETES_SERVICE_HOST",
                                            "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE",
                                            "LUNA_SERVICEACCOUNT_DIR", NULL };
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    check_keys(L, 1, "kubeconfig.load", opts_keys);
    struct luna_kubeconfig_options o = { 0 };
    o.path = luna_lua_opt_string_field(L, 1, "path", NULL);
    o.context = luna_lua_opt_string_field(L, 1, "context", NULL);
    o.serviceaccount_dir = luna_lua_opt_string_field(L, 1, "serviceaccount_dir", NULL);
    o.exec_timeout = luna_lua_opt_number_field(L, 1, "exec_timeout", 0);
    lua_getfield(L, 1, "env"); /* index 2, keeps the strings alive */
    if (!lua_isnil(L, 2)) {
        luaL_argcheck(L, lua_istable(L, 2), 1, "env must be a table");
        check_keys(L, 2, "kubeconfig.load env", env_keys);
        o.kubeconfig_env = luna_lua_opt_string_field(L, 2, "KUBECONFIG", NULL);
        o.home = luna_lua_opt_string_field(L, 2, "HOME", NULL);
        o.service_host = luna_lua_opt_string_field(L, 2, "KUBERNETES_SERVICE_HOST", NULL);
        o.service_port = luna_lua_opt_string_field(L, 2, "KUBERNETES_SERVICE_PORT", NULL);
        o.pod_namespace = luna_lua_opt_string_field(L, 2, "POD_NAMESPACE", NULL);
        if (!o.serviceaccount_dir)
            o.serviceaccount_dir = luna_lua_opt_string_field(L, 2, "LUNA_SERVICEACCOUNT_DIR", NULL);
    }
    /* Allocate the userdata first so nothing can raise after the load. */
    struct lua_kubeconfig *ud = lua_newuserdata(L, sizeof *ud);
    ud->cfg = NULL;
    luaL_getmetatable(L, KUBECONFIG_MT);
    lua_setmetatable(L, -2);
    luna_error err = { 0 };
    int rc = luna_kubeconfig_load(&o, &ud->cfg, &err);
    if (rc < 0)
        return luna_lua_push_error(L, luna_errcode_name(rc), err.msg, rc);
    return 1;
}

static void push_opt_string(lua_State *L, const char *s)
{
    if (s)
        lua_pushstring(L, s);
    else
        lua_pushnil(L);
}

static void push_opt_bytes(lua_State *L, const unsigned char *s, size_t len)
{
    if (s)
        lua_pushlstring(L, (const char *)s, len);
    else
        lua_pushnil(L);
}

static int luna_lua_kubeconfig_credentials(lua_State *L)
{
    struct luna_kubeconfig *cfg = check_cfg(L, 1);
    time_t now = lua_isnoneornil(L, 2) ? time(NULL) : (time_t)luaL_checknumber(L, 2);
    struct luna_credentials c;
    luna_error err = { 0 };
    int rc = luna_kubeconfig_credentials_at(cfg, now, &c, &err);
    if (rc < 0)
        return luna_lua_push_error(L, luna_errcode_name(rc), err.msg, rc);
    lua_createtable(L, 0, 8);
    push_opt_string(L, c.token);
    lua_setfield(L, -2, "token");
    push_opt_string(L, c.username);
    lua_setfield(L, -2, "username");
    push_opt_string(L, c.password);
    lua_setfield(L, -2, "password");
    push_opt_bytes(L, c.client_cert_data, c.client_cert_data_len);
    lua_setfield(L, -2, "client_cert_data");
    push_opt_bytes(L, c.client_key_data, c.client_key_data_len);
    lua_setfield(L, -2, "client_key_data");
    push_opt_string(L, c.client_cert_file);
    lua_setfield(L, -2, "client_cert_file");
    push_opt_string(L, c.client_key_file);
    lua_setfield(L, -2, "client_key_file");
    lua_pushinteger(L, (lua_Integer)c.generation);
    lua_setfield(L, -2, "generation");
    return 1;
}

static int luna_lua_kubeconfig_invalidate(lua_State *L)
{
    struct luna_kubeconfig *cfg = check_cfg(L, 1);
    lua_Integer gen = luaL_optinteger(L, 2, 0);
    luaL_argcheck(L, gen >= 0, 2, "generation must be >= 0");
    luna_kubeconfig_invalidate(cfg, (unsigned)gen);
    return 0;
}

static int luna_lua_kubeconfig_exec_runs(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)luna_kubeconfig_exec_runs(check_cfg(L, 1)));
    return 1;
}

static int luna_lua_kubeconfig_index(lua_State *L)
{
    struct luna_kubeconfig *cfg = check_cfg(L, 1);
    const char *key = luaL_checkstring(L, 2);
    /* methods */
    lua_getmetatable(L, 1);
    lua_getfield(L, -1, "methods");
    lua_getfield(L, -1, key);
    if (!lua_isnil(L, -1))
        return 1;
    lua_pop(L, 3);
    if (strcmp(key, "source") == 0) push_opt_string(L, cfg->source);
    else if (strcmp(key, "context") == 0) push_opt_string(L, cfg->context);
    else if (strcmp(key, "cluster") == 0) push_opt_string(L, cfg->cluster);
    else if (strcmp(key, "user") == 0) push_opt_string(L, cfg->user);
    else if (strcmp(key, "server") == 0) push_opt_string(L, cfg->server);
    else if (strcmp(key, "namespace") == 0) push_opt_string(L, cfg->namespace);
    else if (strcmp(key, "ca_file") == 0) push_opt_string(L, cfg->ca_file);
    else if (strcmp(key, "ca_data") == 0) push_opt_bytes(L, cfg->ca_data, cfg->ca_data_len);
    else if (strcmp(key, "client_cert_file") == 0) push_opt_string(L, cfg->client_cert_file);
    else if (strcmp(key, "client_cert_data") == 0)
        push_opt_bytes(L, cfg->client_cert_data, cfg->client_cert_data_len);
    else if (strcmp(key, "client_key_file") == 0) push_opt_string(L, cfg->client_key_file);
    else if (strcmp(key, "client_key_data") == 0)
        push_opt_bytes(L, cfg->client_key_data, cfg->client_key_data_len);
    else if (strcmp(key, "insecure") == 0) lua_pushboolean(L, cfg->insecure);
    else if (strcmp(key, "tls_server_name") == 0) push_opt_string(L, cfg->tls_server_name);
    else if (strcmp(key, "proxy_url") == 0) push_opt_string(L, cfg->proxy_url);
    else if (strcmp(key, "auth") == 0) lua_pushstring(L, luna_auth_kind_name(cfg->auth));
    else return luaL_error(L, "kubeconfig has no field '%s'", key);
    return 1;
}

static int luna_lua_kubeconfig_gc(lua_State *L)
{
    struct lua_kubeconfig *ud = luaL_checkudata(L, 1, KUBECONFIG_MT);
    luna_kubeconfig_free(ud->cfg);
    ud->cfg = NULL;
    return 0;
}

static int luna_lua_kubeconfig_tostring(lua_State *L)
{
    struct luna_kubeconfig *cfg = check_cfg(L, 1);
    char server[512];
    lua_pushfstring(L, "kubeconfig (%s, server %s, auth %s)", cfg->source,
                    luna_url_redact_buf(cfg->server, server, sizeof server),
                    luna_auth_kind_name(cfg->auth));
    return 1;
}

void luna_lua_kubeconfig_register(lua_State *L)
{
    static const luaL_Reg methods[] = {
        { "credentials", luna_lua_kubeconfig_credentials },
        { "invalidate", luna_lua_kubeconfig_invalidate },
        { "exec_runs", luna_lua_kubeconfig_exec_runs },
        { NULL, NULL },
    };
    static const luaL_Reg funcs[] = {
        { "load", luna_lua_kubeconfig_load },
        { NULL, NULL },
    };
    if (luaL_newmetatable(L, KUBECONFIG_MT)) {
        lua_pushcfunction(L, luna_lua_kubeconfig_index);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, luna_lua_kubeconfig_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, luna_lua_kubeconfig_tostring);
        lua_setfield(L, -2, "__tostring");
        lua_newtable(L);
        for (const luaL_Reg *m = methods; m->name; m++) {
            lua_pushcfunction(L, m->func);
            lua_setfield(L, -2, m->name);
        }
        lua_setfield(L, -2, "methods");
    }
    lua_pop(L, 1);
    luna_lua_register_table(L, "kubeconfig", funcs);
}
