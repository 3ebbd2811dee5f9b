/*
 * lua_http.h — core.http: the HTTP client and the NDJSON framer from Lua.
 *
 * Uses http (one process-wide client on luna_loop(), created on first use)
 * and ndjson.  Runs on the loop thread.  Callbacks fire while the loop runs
 * (core.loop.run / run_until, helpers.eventually, or the host's loop).
 *
 *   core.http.request{
 *     url = "https://...",            -- required, http or https
 *     method = "GET",                 -- default GET
 *     headers = { ["Content-Type"] = "application/json" },  -- name -> string
 *     body = "...",                   -- request body (any bytes)
 *     bearer_token = "...",           -- sent as Authorization: Bearer; never logged
 *     tls = { ca_file=, ca_pem=, cert_file=, cert_pem=, key_file=, key_pem=,
 *             insecure = false },     -- *_pem are PEM bytes and win over *_file
 *     timeout = s,                    -- whole request; default none
 *     connect_timeout = s,            -- DNS + TCP + TLS; default 30
 *     idle_timeout = s,               -- fail if no byte arrives for s; default none
 *     max_body = bytes,               -- response body cap (whole mode default 64 MiB,
 *                                     --   streamed modes: none unless given)
 *     max_line = bytes,               -- on_line: one line's cap (default 16 MiB)
 *     max_request_body = bytes,       -- request body cap (default 8 MiB)
 *     on_headers = fn(status, headers),
 *     on_chunk = fn(data),            -- streamed: each piece of body, or
 *     on_line = fn(line),             -- streamed NDJSON: each complete non-empty
 *                                     --   line; neither: body collected whole
 *     on_done = fn(resp, err),        -- exactly once unless canceled
 *   }  --> handle, or nil, err (bad URL/header: InvalidRequest; body too big: TooBig)
 *
 *   handle:cancel()   stops the request: no callback runs after it returns;
 *                     true if it was in flight, false if it had ended
 *   core.http.active() number of requests of this Lua state in flight
 *
 *   resp = { status = 200, headers = { ["content-type"] = "..." },  -- names
 *            body = "..." (whole mode only), http_version = "1.1" | "2" }
 *            -- lowercased; repeated headers joined with ", "
 *   err  = { code = 0, reason = "Timeout" | "IdleTimeout" | "ConnectionFailed" |
 *            "HostNotFound" | "TLSError" | "TooBig" | "Truncated" |
 *            "ProtocolError" | "CallbackFailed" | ..., message = "GET URL: ..." }
 *   on_done gets (resp, nil) for every HTTP status (4xx/5xx included) and
 *   (nil, err) when the transfer failed.  A raising on_headers/on_chunk/
 *   on_line stops the request (CallbackFailed; the traceback is logged);
 *   a raising on_done is logged.  Callbacks may start and cancel requests.
 *
 *   core.http.ndjson{ on_line = fn(line), max_line = bytes }  --> framer
 *   framer:feed(data)  true, or nil, err (TooBig); an error raised by
 *                      on_line propagates
 *   framer:finish()    true, or nil, err (Truncated: a partial last line)
 *
 * Misuse (wrong types, missing url, on_chunk with on_line, negative
 * numbers) raises.  Option strings are copied when the request starts.
 * Callbacks run on a thread anchored in the registry of the state that
 * started the request (so they work whichever state runs the loop); the
 * callback functions are anchored (luaL_ref) until the request ends or is
 * canceled.  Closing the Lua state cancels its requests.
 */
#ifndef LUNA_LUA_HTTP_H
#define LUNA_LUA_HTTP_H

#include <lua.h>

void luna_lua_http_register(lua_State *L);

#endif
