/*
 * controller/webhook.h — calling the admission webhooks a reload's files
 * declared (lua/luna/webhook.lua, docs/webhooks.md).
 *
 * Uses: the loader (the declarations in the state's registry), the
 * watchdog, lua/luna/webhook.lua's serve (which decodes the review, builds
 * the request table, runs the function and diffs a mutated copy).  Runs on
 * the loop thread.
 *
 * A call runs to its end inside one watchdog guard ("webhook", owner the
 * webhook's name, charged to its file's memory account) whose time budget
 * is the caller's (timeoutSeconds minus
 * a margin, webhook_server.h): a webhook function cannot yield, so the API
 * server's answer never waits on the loop.  An error, a wrong answer shape
 * or a stop comes back as LUNA_WEBHOOK_ERROR or LUNA_WEBHOOK_STOPPED with
 * the reason; the caller answers by the failure policy.  A body that does
 * not decode comes back as LUNA_WEBHOOK_MALFORMED with the decoder's
 * message (the server checks only the envelope's fields before the call,
 * so the body is parsed once, here).
 *
 * Ownership: info's strings are borrowed from the state (valid while the
 * reload lives); an answer's strings are malloc'd, freed with
 * luna_webhook_answer_free.
 */
#ifndef LUNA_WEBHOOK_H
#define LUNA_WEBHOOK_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

#include "serve/webhook_server.h"

/* The index (1-based) of the webhook serving path in L, with its info; 0
 * when none does. */
int luna_webhook_find(lua_State *L, const char *path, struct luna_webhook_info *info);
/* Webhook i's info (i from 1 to luna_loader_webhook_count): 0, or
 * LUNA_ENOTFOUND. */
int luna_webhook_info(lua_State *L, int i, struct luna_webhook_info *info);

/* Runs AdmissionReview body (its envelope already checked) through webhook
 * i under a guard of `seconds`; fills out (OK) or why (ERROR, STOPPED,
 * MALFORMED). */
enum luna_webhook_result luna_webhook_call(lua_State *L, int i, const char *body, size_t len,
                                           double seconds, struct luna_webhook_answer *out,
                                           char *why, size_t why_size);

#endif
