/*
 * lua_informer.h — core.informer: shared informers against an API server,
 * from Lua (specs, tools; the controller runtime builds on the same C).
 *
 *   local env = core.informer.env{ kubeconfig = PATH [, context = NAME] }
 *   local inf = env:informer{ kind = "v1/ConfigMap" [, namespace =]
 *       [, labels = "a=b" | {a="b"}] [, fields = "metadata.name=x"]
 *       [, shard = "shardRange(object.metadata.uid, '0x…', '0x…')"]  -- KEP-5866
 *       [, keep_managed_fields, resync, page_size, idle_timeout,
 *          min_watch_timeout, max_watch_timeout, backoff_base, backoff_max]
 *       [, on_add = fn(obj, in_initial_list), on_update = fn(old, new),
 *          on_delete = fn(obj, final_state_unknown)] }
 *   inf:has_synced()  inf:len()  inf:get(key)  inf:list([namespace])  inf:keys()
 *   inf:by_index(name, value)  inf:add_index(name, fn)  inf:resource_version()
 *   inf:resource()  inf:stats()  inf:last_error()  inf:release()
 *   inf:set_shard(text | nil) → true | nil, err (moves the shared informer: relists)
 *   inf:key()  (the shared informer's key)
 *   env:count()  env:close()
 *
 * Objects are core.store Objects (read-only, shared with the cache).
 * Handlers and index functions run on a thread anchored by the env while
 * the loop runs (core.loop.run_until); an error in a handler is logged.
 * Two informer{} calls with the same kind, namespace and selectors share
 * one informer (env:count() shows it); each handle adds its own handlers
 * and must be released (release() or garbage collection).
 */
#ifndef LUNA_LUA_INFORMER_H
#define LUNA_LUA_INFORMER_H

#include <lua.h>

void luna_lua_informer_register(lua_State *L);

#endif
