/*
 * runtime/rbac_sources.h — the static half of `luna rbac` (docs/deploy.md):
 * what a controllers directory declares it watches, read without
 * connecting to any API server.
 *
 *   core.controller_sources(lib, dir) → controllers | nil, message
 *     controllers: { { name =, file =, sources = { { role = "watch" |
 *       "owns" | "watches", kind = "apps/v1/Deployment" (as written),
 *       group =, version =, kind_name =, namespace = (nil: all),
 *       metadata_only = bool }, ... } }, ... } in load order.
 *
 *   core.webhook_sources(lib, dir) → webhooks | nil, message
 *     the admission webhooks DIR declares, for `luna webhooks manifest`
 *     (lua/luna/webhooks_cli.lua): each declaration as lua/luna/webhook.lua
 *     checked it (defaults filled in), without its function.
 *
 * Uses: controller/loader (the directory is loaded exactly as `luna run`
 * loads it: same sandbox, same spec validation, same refusal of a broken
 * file), api/api (the script API, installed with no client, as the
 * runtime does before it has connected), controller/spec.
 *
 * Runs in the state of `luna test`/`luna rbac` (host/main.c), before and
 * without any event loop.  Ownership: the controllers' state is made and
 * closed inside the call; the answer is a fresh Lua table.
 */
#ifndef LUNA_RBAC_SOURCES_H
#define LUNA_RBAC_SOURCES_H

#include <lua.h>

/* Adds controller_sources and webhook_sources to the table on top of L's stack. */
void luna_lua_rbac_sources_register(lua_State *L);

#endif
