/*
 * controller/webhook.h — calling the admission webhooks and CRD converters
 * a reload's files declared (lua/luna/webhook.lua, docs/webhooks.md).
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
 * server's answer never waits on the loop.  It may read the caches of its
 * file's controller (they never yield), not call the API.  An error, a wrong answer shape
 * or a stop comes back as LUNA_WEBHOOK_ERROR or LUNA_WEBHOOK_STOPPED with
 * the reason; the caller answers by the failure policy.
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

#include "base/json_writer.h"
#include "serve/webhook_server.h"

/* The index (1-based) of the webhook serving path in L, with its info; 0
 * when none does. */
int luna_webhook_find(lua_State *L, const char *path, struct luna_webhook_info *info);
/* Webhook i's info (i from 1 to luna_loader_webhook_count): 0, or
 * LUNA_ENOTFOUND. */
int luna_webhook_info(lua_State *L, int i, struct luna_webhook_info *info);

/* How the API server reaches luna (the clientConfig of a registration):
 * url (a base, the path appended), else the Service. */
struct luna_webhook_client {
    const char *url;
    const char *service_name, *service_namespace;
    int service_port;
    const char *ca_bundle;  /* base64 of the PEM bundle, or NULL */
};

/* Appends webhook i's entry of its Validating/MutatingWebhookConfiguration
 * (lua/luna/webhook.lua registration: every field written out) to w when
 * its type is `type`; *written says whether it did.  0, or LUNA_ENOMEM /
 * LUNA_ELUA (logged). */
int luna_webhook_registration(lua_State *L, int i, const char *type,
                              const struct luna_webhook_client *cc, luna_json_writer *w,
                              bool *written);

/* Runs AdmissionReview body (its envelope already checked) through webhook
 * i under a guard of `seconds`; fills out (OK) or why (ERROR, STOPPED).
 * A converter (type "conversion") takes a ConversionReview and fills
 * out->converted (and out->ops: how many objects).
 * c is the controller of the webhook's file (NULL: a file of webhooks
 * only): the function reads c's caches (controller.h,
 * luna_controller_webhook_enter), never another controller's. */
struct luna_controller;
enum luna_webhook_result luna_webhook_call(lua_State *L, int i, struct luna_controller *c,
                                           const char *body, size_t len, double seconds,
                                           struct luna_webhook_answer *out, char *why,
                                           size_t why_size);

#endif
