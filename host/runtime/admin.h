/*
 * admin.h — on-demand control of running controllers: reconcile keys now,
 * pause and resume.  The HTTP server (httpd.h) serves it under /admin/ on
 * the metrics server, behind the same authentication (TokenReview) and
 * authorization (SubjectAccessReview on the non-resource URL, verb the
 * lowercased method) as /metrics; `luna trigger` is its client.
 *
 *   GET  /admin/controllers                    every controller: name,
 *        started, paused, queued (keys waiting), active (in flight), workers
 *   POST /admin/controllers/NAME/reconcile?key=NS/NAME[&key=...]
 *                                              these keys now (at most 1000)
 *   POST /admin/controllers/NAME/reconcile?all=true
 *                                              every cached primary object
 *   POST /admin/controllers/NAME/reconcile?selector=LABELS
 *                                              cached primary objects whose
 *                                              labels match (selector.h)
 *   POST /admin/controllers/NAME/pause         start no reconcile; the queue
 *                                              still fills, deduplicated
 *   POST /admin/controllers/NAME/resume        dispatch what accumulated
 *
 * A key is added to the workqueue as an event's key is (controller.h):
 * deduplicated with a key already waiting, never reconciled twice at
 * once; one waiting in a delay (requeue_after, a retry's backoff) runs now
 * as well.  A paused controller keeps its keys: resuming starts them.
 * Answers are JSON objects ({"controller":..., "action":"reconcile",
 * "enqueued":N}; on error {"error": "why"} with 400, 404 or 405).  Every
 * request is logged ("admin request" at info with user, remote, action,
 * controller, what, status) and counted (luna_triggers_total,
 * luna_trigger_keys_total; luna_controller_paused).
 *
 * Runs on the loop thread.  Ownership: the request's strings are borrowed
 * for the call; the answer is appended to the caller's textbuf.
 */
#ifndef LUNA_ADMIN_H
#define LUNA_ADMIN_H

#include <stddef.h>

#include "base/textbuf.h"
#include "serve/httpd.h"

struct luna_generation;

/* Acts on the controllers of gen (NULL: none loaded) and writes the JSON
 * answer to out; returns the HTTP status. */
int luna_admin_handle(const struct luna_admin_request *req, struct luna_generation *gen,
                      struct luna_textbuf *out);

#endif
