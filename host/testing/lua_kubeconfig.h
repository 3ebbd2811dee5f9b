/*
 * lua_kubeconfig.h — core.kubeconfig: load a kubeconfig from Lua (specs,
 * tools).  Never reads the process environment: what the CLI takes from
 * the environment is passed explicitly in `env`.
 *
 *   core.kubeconfig.load{ path=, context=, env={ KUBECONFIG=, HOME=,
 *       KUBERNETES_SERVICE_HOST=, KUBERNETES_SERVICE_PORT=, POD_NAMESPACE=,
 *       LUNA_SERVICEACCOUNT_DIR= }, serviceaccount_dir=, exec_timeout= }
 *     -> cfg, or nil, err ({code, reason, message}); unknown option or env
 *        names and wrong types raise.
 *   cfg.source, .context, .cluster, .user, .server, .namespace, .ca_file,
 *   .ca_data, .client_cert_file, .client_cert_data, .client_key_file,
 *   .client_key_data, .insecure, .tls_server_name, .proxy_url, .auth
 *     (unset ones are nil; *_data are byte strings; auth is the kind name)
 *   cfg:credentials([now]) -> { token=, username=, password=,
 *       client_cert_data=, client_key_data=, client_cert_file=,
 *       client_key_file=, generation= }, or nil, err.  `now` (seconds since
 *       the epoch) replaces the wall clock for expiry decisions.
 *   cfg:invalidate([generation])   after a 401 (default: any generation)
 *   cfg:exec_runs()                how many times the exec plugin ran
 *
 * cfg is a userdata owning a struct luna_kubeconfig, freed by __gc.
 */
#ifndef LUNA_LUA_KUBECONFIG_H
#define LUNA_LUA_KUBECONFIG_H

#include <lua.h>

void luna_lua_kubeconfig_register(lua_State *L);

#endif
