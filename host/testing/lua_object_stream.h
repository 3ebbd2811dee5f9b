/*
 * lua_object_stream.h — core.object_stream: the LIST/WATCH decoder, fed
 * from Lua (specs of malformed, split and truncated input).
 *
 *   local s = core.object_stream.new{ mode = "list"|"watch",
 *                                     keep_managed_fields = false, max_item_bytes = N,
 *                                     shard = "shardRange(...)" }  -- drops other items
 *   s:feed(bytes) → { {type="LISTED"|"ADDED"|"MODIFIED"|"DELETED", object=Object}
 *                   | {type="BOOKMARK", resource_version=}
 *                   | {type="ERROR", code=, reason=, message=} ... }
 *                   or nil, err, events-decoded-before-the-error
 *   s:finish() → true | nil, err      s:reset()
 *   s:list_resource_version()  s:continue_token()  s:remaining()  s:items()
 *   s:filtered() (items the shard dropped)  s:shard_info() (metadata.shardInfo.selector or nil)
 */
#ifndef LUNA_LUA_OBJECT_STREAM_H
#define LUNA_LUA_OBJECT_STREAM_H

#include <lua.h>

void luna_lua_object_stream_register(lua_State *L);

#endif
