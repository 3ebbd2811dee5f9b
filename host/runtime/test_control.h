/*
 * test_control.h — the control channel `luna test` drives a runtime through
 * (`luna run --dev-server --test-control DIR`, started by lua/luna/testing;
 * `luna test --kube` leaves out --dev-server and the kubeconfig's cluster
 * is the server).
 *
 * The runtime under test is the real one (same sandbox, same budgets);
 * this unit only adds what a test needs to observe and steer it, over the
 * process's stdin (one command a line) and stdout (one JSON answer a line;
 * the log stays on stderr):
 *
 *   status          {"url":…, "clock":t, "idle":bool, "busy":[why…],
 *                    "activity":n, "controllers":[{"name","started",
 *                    "queued","processing","waiting","next":s|null}]}
 *                   idle: every controller's queue has nothing queued and
 *                   nothing processing (so no reconcile and none of its API
 *                   calls is in flight), no reload is pending, and every
 *                   informer that has a resource has an empty DeltaFIFO and
 *                   has seen the dev server's latest resourceVersion (the
 *                   embedded server sends bookmarks every 50 ms in this
 *                   mode, so an informer whose selector matched nothing
 *                   still catches up), and the dev server has no work of
 *                   its own pending (its garbage collector's delayed
 *                   orphan check).  Keys waiting for a delay
 *                   (requeue_after, retry backoff) do not count against
 *                   idle: "waiting" and "next" (seconds until the first) say
 *                   when they are due.  Informers of kinds the server does
 *                   not serve do not count either (their controller waits).
 *                   Against a real API server (no dev server) there is no
 *                   latest resourceVersion to compare with: "activity"
 *                   counts what happened so far (lists and watch events
 *                   the informers received, keys added to the queues,
 *                   reconciles' API calls), and `luna test --kube` takes
 *                   idle once it has held, with activity unchanged, for a
 *                   quiet spell (lua/luna/testing.lua).
 *   advance S       moves the fake clock forward S seconds (finite, >= 0)
 *                   and lets every workqueue add the keys now due:
 *                   {"clock":t} or {"error":…}
 *   calls           the API calls reconciles made since the last `calls`,
 *                   in order: [{"controller","key","method","path",
 *                   "content_type","body","status"}] (status 0: no answer
 *                   yet or the transfer failed); at most 10,000 are kept,
 *                   older ones are dropped and counted in "dropped"
 *   request {"method":M,"path":"/…","content_type":T,"body":B}
 *                   sends the request to the API server through the
 *                   runtime's own client (so `luna test` needs no HTTP
 *                   client of its own): {"status":N,"body":…,"warnings":
 *                   [text…]} (the Warning headers' texts) once answered,
 *                   or {"error":…}; not recorded as a controller's call
 *   seed "TEXT"     (a JSON string holding YAML or JSON manifests, several
 *                   documents allowed) creates or replaces each object in
 *                   the dev server, as --seed does: {"ok":true} or {"error"}
 *   documents "TEXT" (a JSON string holding YAML or JSON manifests)
 *                   {"documents":[…]}: the objects of the text, parsed as
 *                   --seed parses, for the kit to create in a real cluster;
 *                   or {"error"} naming the bad line
 *   admit {"path":"/validate/NAME","body":"{AdmissionReview}"}
 *                   runs the review through the webhook server's own
 *                   handler (its checks, the call, failurePolicy, shadow,
 *                   log, metrics) without a connection:
 *                   {"status":N,"body":"…"} or {"error":…} (no server)
 *   webhook         {"address":"HOST:PORT","cert":"PEM"} of the webhook
 *                   server (for the kit to register the webhooks with the
 *                   API server), or {"error":…} when it does not serve
 *   api             {"api":{"luna.get":"function",…},"fields":{…}}: every
 *                   name a script can reach through require (script/sandbox.h:
 *                   luna_sandbox_list_api), and the fields of the
 *                   tables scripts write or read: "spec", "spec.source",
 *                   "spec.limits", "spec.rate_limit" (controller/spec.h),
 *                   "request", "result" (reconcile.h), "error"
 *                   (lua_util.h); for the spec of `luna stubs`
 *   anything else   {"error":"unknown command …"}
 * One command at a time: the runner sends the next after the answer.  A
 * command line may be up to 64 MiB (a request's body).
 *
 * End of stdin (the test runner went away) shuts the runtime down as
 * SIGTERM does, so no test leaves a process behind.
 *
 * With a fake clock (luna_test_control_enable(true)), the controllers'
 * workqueues and rate limiters read time from a clock that only `advance`
 * moves: requeue_after and retry delays happen when the test steps the
 * clock, never by themselves.  Scripts' wall clock follows it too
 * (base/clock.h: luna.time.now, os.time, os.date without a time,
 * luna.cron.next's default, luna.schedule's `at`): it starts at the real
 * time and moves only by `advance`.  The watchdog's budgets and the
 * host's own timestamps (log lines) stay on real time.
 *
 * Runs on the loop thread.  Ownership: the unit's state is static (one
 * runtime per process); luna_test_control_start borrows the source
 * callbacks' userdata until luna_test_control_stop; recorded calls are
 * owned here and freed by stop.
 */
#ifndef LUNA_TEST_CONTROL_H
#define LUNA_TEST_CONTROL_H

#include "api/host.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/textbuf.h"

struct luna_generation;
struct luna_informer_factory;
struct luna_kube_client;

/* What the channel reads of the runtime; every callback may return NULL/0
 * before the runtime has that part. */
struct luna_test_control_source {
    struct luna_generation *(*current)(void *ud);          /* controllers running now */
    struct luna_informer_factory *(*factory)(void *ud);
    uint64_t (*server_rv)(void *ud);                    /* dev server's latest RV */
    bool (*server_busy)(void *ud);    /* the dev server has work of its own pending */
    bool (*reload_pending)(void *ud);
    struct luna_kube_client *(*client)(void *ud);       /* for `request` */
    int (*seed)(void *ud, const char *text, size_t len, luna_error *err); /* for `seed` */
    /* for `documents`: a malloc'd JSON array text, or NULL with err set */
    char *(*documents)(void *ud, const char *text, size_t len, luna_error *err);
    /* for `admit`: answers one AdmissionReview POST to path as the webhook
     * server would; returns the HTTP status (body and type into *out and
     * *ctype), or -1 with err set when no webhook server serves */
    int (*admit)(void *ud, const char *path, const char *body, size_t len,
                 struct luna_textbuf *out, const char **ctype, luna_error *err);
    /* for `webhook`: the webhook server's address and the PEM of its
     * certificate (borrowed), or false when it does not serve */
    bool (*webhook_server)(void *ud, const char **address, const char **cert_pem);
    const char *url;                                    /* copied */
    void *ud;
};

/* Turns the test hooks on (before the controllers are built): the runtime
 * clock becomes a fake one when fake_clock, and API calls are recorded. */
void luna_test_control_enable(bool fake_clock);
bool luna_test_control_enabled(void);

/* The clock controllers use: the fake clock when enabled with one, else
 * the monotonic clock.  Static; never freed. */
const struct luna_clock *luna_test_control_clock(void);

/* Starts reading commands on stdin.  LUNA_ENOMEM, or LUNA_EINVAL when not
 * enabled. */
int luna_test_control_start(const struct luna_test_control_source *src, luna_error *err);
/* Stops reading and frees the recorded calls (no-op when not started). */
void luna_test_control_stop(void);

/* The observer of script API calls (api/host.h) that records them for
 * `luna test`: every call a reconcile starts (strings copied) and the
 * status of its answer; records nothing unless enabled.  Static. */
const struct luna_api_client_observer *luna_test_control_call_observer(void);

#endif
