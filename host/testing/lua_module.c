/* lua_module.c — see lua_module.h. */
#include "testing/lua_module.h"

#include <dlfcn.h>
#include <lauxlib.h>

#include "lua/lua_core.h"
#include "lua/lua_json.h"
#include "lua/lua_selector.h"
#include "testing/lua_backoff.h"
#include "testing/lua_cron.h"
#include "testing/lua_health.h"
#include "testing/lua_http.h"
#include "testing/lua_informer.h"
#include "testing/lua_kubeconfig.h"
#include "testing/lua_leader.h"
#include "testing/lua_loop.h"
#include "testing/lua_metrics.h"
#include "testing/lua_runtime_metrics.h"
#include "testing/lua_workqueue_export.h"
#include "testing/lua_object_stream.h"
#include "controller/spec.h"
#include "script/pattern.h"
#include "script/sort.h"
#include "testing/lua_ratelimit.h"
#include "testing/lua_shard.h"
#include "testing/lua_store.h"
#include "testing/lua_workqueue.h"

/* luajit dlcloses C modules when its state closes, but libcurl and libev
 * keep process-wide state (handlers, atexit hooks) pointing into this
 * module: keep it mapped until the process exits. */
static void pin_module(void)
{
    Dl_info info;
    if (dladdr((void *)luaopen_luna_core, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

/* core.cache_decode(s) -> value, fast | nil, message: the table a lister
 * get makes of cached JSON bytes s (luna_lua_json_push), and whether its
 * fast reader made it, for the specs that hold it to core.json.decode. */
static int luna_lua_cache_decode(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    if (luna_lua_json_read_cached(L, s, len) == 0) {
        lua_pushboolean(L, 1);
        return 2;
    }
    luna_error err;
    if (luna_lua_json_push(L, s, len, &err) < 0) {
        lua_pushnil(L);
        lua_pushstring(L, err.msg);
        return 2;
    }
    lua_pushboolean(L, 0);
    return 2;
}

int luaopen_luna_core(lua_State *L)
{
    pin_module();
    luna_lua_core_push(L);
    luna_lua_loop_register(L);
    luna_lua_informer_register(L);
    luna_lua_object_stream_register(L);
    luna_lua_store_register(L);
    luna_lua_selector_register(L);
    luna_lua_backoff_register(L);
    luna_lua_cron_register(L);
    luna_lua_shard_register(L);
    luna_lua_ratelimit_register(L);
    luna_lua_workqueue_register(L);
    luna_lua_kubeconfig_register(L);
    luna_lua_http_register(L);
    luna_lua_metrics_register(L);
    lua_getfield(L, -1, "metrics");
    luna_lua_runtime_metrics_register(L);
    luna_lua_workqueue_export_register(L);
    lua_pop(L, 1);
    luna_lua_health_register(L);
    luna_lua_leader_register(L);
    luna_lua_controller_spec_register(L);
    lua_pushcfunction(L, luna_lua_cache_decode);
    lua_setfield(L, -2, "cache_decode");
    lua_newtable(L); /* core.pattern: the sandbox's matcher, for specs */
    luna_pattern_register(L);
    luna_sort_register(L);
    lua_setfield(L, -2, "pattern");
    return 1;
}
