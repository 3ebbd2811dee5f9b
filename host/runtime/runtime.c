/* runtime.c — see runtime.h.
 *
 * One concept over ~900 lines: the assembly of `luna run`, its startup,
 * reload and shutdown order kept in one place.
 */
#include "runtime/runtime.h"

#include <errno.h>
#include <limits.h>
#include <lauxlib.h>
#include <openssl/rand.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include <unistd.h>

#include "base/clock.h"
#include "controller/controller.h"
#include "runtime/dir_watch.h"
#include "api/event_memory.h"
#include "controller/generation.h"
#include "client/discovery.h"
#include "cache/event_latency.h"
#include "serve/health.h"
#include "client/http.h"
#include "runtime/admin.h"
#include "serve/httpd.h"
#include "api/client.h"
#include "cache/informer_factory.h"
#include "client/kube_client.h"
#include "runtime/pod_event.h"
#include "client/kubeconfig.h"
#include "cluster/leader.h"
#include "controller/reconcile.h"
#include "cluster/shard_set.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/url.h"
#include "api/events.h"
#include "controller/loader.h"
#include "api/api.h"
#include "api/host.h"
#include "serve/metrics.h"
#include "serve/metrics_auth.h"
#include "serve/serving_cert.h"
#include "serve/webhook_server.h"
#include "serve/webhook_manager.h"
#include "controller/webhook.h"
#include "serve/runtime_metrics.h"
#include "serve/workqueue_export.h"
#include "runtime/test_control.h"
#include "script/watchdog.h"

#define SYNC_CHECK_S 0.05
#define NOT_SERVED_CHECK_S 1.0
#define DEFAULT_GRACE_S 30.0
#define DEFAULT_METRICS_ADDRESS ":8443"          /* secure: TLS, authorized scrapes */
#define DEFAULT_INSECURE_METRICS_ADDRESS ":8080" /* --metrics-secure=false */
#define DEFAULT_HEALTH_ADDRESS ":8081"
/* With --dev-server (a laptop): loopback only, a free port each, so a
 * second local run starts beside the first; the addresses are logged. */
#define DEV_ADDRESS "127.0.0.1:0"
#define DEFAULT_LEASE_NAME "luna"
#define CHECK_SYNCED "informers-synced"
#define CHECK_DECODED "objects-decoded"
#define CHECK_LEADER "leader-or-standby"
#define CHECK_CURRENT "controllers-current"
/* only once a file declares a webhook: the webhook server serves */
#define CHECK_WEBHOOKS "webhook-server"

/* Why a watch ended, as luna_watch_restarts_total{reason} names it, in the
 * order of struct informer_metrics.ends. */
static const char *const watch_end_reasons[] = { "gone", "error", "timeout", "closed", "decode" };
#define NREASONS (sizeof watch_end_reasons / sizeof watch_end_reasons[0])

/* The luna_informer_* series of one shared informer (by its key), brought
 * up to date from the reflector's counters before every scrape. */
struct informer_metrics {
    char *key;
    char *resource;                       /* the "resource" label */
    const struct luna_shared_informer *si; /* the informer the baselines are of */
    double objects;
    unsigned long relists, ends[NREASONS]; /* already exported */
    unsigned long rv_current, rv_stale;    /* already exported */
    unsigned long bad;                     /* already exported */
    bool seen;
    UT_hash_handle hh;
};

/* A reload replaced by a newer one, finishing its in-flight reconciles.
 * The list runs newest first.  A controller that kept its name hands its
 * workqueue to its successor, which owns it from then on, while the old
 * one's reconciles in flight still finish into it: so retiring reloads are
 * freed oldest first, one only once every older one is (drained or not, a
 * newer one waits), and the running reload after them all. */
struct retiring {
    struct runtime *rt;
    struct luna_generation *gen;
    ev_timer grace;
    bool done;                        /* drained, or its grace period over */
    struct retiring *next;
};

/* A controller's metric series, by name: they outlive reloads. */
struct ctl_metrics {
    char *name;
    struct luna_controller_metrics *cm;
    UT_hash_handle hh;
};

struct runtime {
    const struct luna_run_config *cfg;
    const char *lib;
    struct luna_generation *gen;          /* the controllers running now */
    /* A reload loaded and built, waiting for discovery to answer for its
     * kinds before it takes over (NULL: none). */
    struct luna_generation *pending;
    /* --shadow-reload: the new code tried in shadow before it goes live
     * (NULL: none); candidate_poll starts its controllers as they sync,
     * candidate_end ends the window. */
    struct luna_generation *candidate;
    ev_timer candidate_poll, candidate_end;
    struct retiring *retiring;
    unsigned long generation;             /* number of successful loads */
    struct luna_generation_host gen_host; /* what every generation is given */
    struct luna_api_host api;             /* what every Lua state's API uses */
    struct luna_kubeconfig *kcfg;
    luna_http_client *http;
    struct luna_kube_client *kc;
    struct luna_discovery *disc;
    struct luna_informer_factory *factory;
    struct luna_event_memories *events;   /* Event recorders' memory, across reloads */
    bool stopping;
    bool exiting;                         /* a second signal: leaving at once */
    size_t draining;
    int exit_code;
    char dev_kubeconfig[64];       /* temp kubeconfig of the embedded dev server */
    struct luna_devserver *dev_server; /* the embedded dev server, or NULL */
    char dev_url[128];                 /* its URL */
    /* Its own bearer token, random per run: its TokenReview authenticates
     * it, so /metrics and the admin endpoints accept it.  Logged (it opens
     * nothing but this process and its throwaway server). */
    char dev_token[65];
    ev_timer sync_check;                  /* check_cb: sources, starts, pending reload */
    ev_timer grace;
    ev_signal sigterm, sigint, sighup;
    ev_signal sigusr1;                    /* event latency probe: report and clear */
    struct luna_dir_watch *watch;
    /* production: metrics, probes, leader election */
    struct luna_metrics *registry;        /* luna_metrics_default(): not ours */
    struct luna_runtime_metrics *rm;
    struct ctl_metrics *cms;              /* per controller name */
    struct informer_metrics *informers;
    char api_host[256];                   /* rest_client_requests_total{host} */
    struct luna_health *health;
    /* The running code against the directory (the check
     * "controllers-current", luna_controllers_stale): stale if and only if
     * files failed to load in the running code or the last reload was
     * refused; stale_why says which (the check's reason). */
    bool stale;
    char stale_why[1024];
    struct luna_httpd *metrics_srv, *health_srv;
    struct luna_serving_cert *metrics_cert;  /* secure metrics: the certificate */
    struct luna_metrics_auth *metrics_auth;  /* secure metrics: who may scrape */
    struct luna_webhook_server *webhook_srv; /* once a file declares a webhook */
    struct luna_serving_cert *webhook_cert;
    /* --webhook-cert-mode managed: the Secret, configurations and CRDs */
    struct luna_webhook_manager *webhook_mgr;
    char webhook_url[300];                   /* the managed clientConfig's url, or "" */
    struct luna_leader *leader;
    struct luna_shard_set *shards;        /* --shards, or NULL */
    char identity[320];
    bool caches_synced;                   /* "caches synced" was logged */
    bool leading, releasing;
};

static void candidate_free(struct runtime *rt);

static void shutdown_complete(struct runtime *rt)
{
    luna_info("shutdown complete");
    ev_break(luna_loop(), EVBREAK_ALL);
}

static void on_released(void *ud, bool released) { shutdown_complete(ud); }
static void on_left(void *ud) { shutdown_complete(ud); }

/* No reconcile runs any more: give the Lease up (if held), then stop. */
static void finish_shutdown(struct runtime *rt)
{
    ev_timer_stop(luna_loop(), &rt->grace);
    if (rt->shards) {
        if (!rt->releasing) {
            rt->releasing = true;
            luna_shard_set_leave(rt->shards, on_left, rt);
        }
    } else if (!rt->leader) {
        shutdown_complete(rt);
    } else if (!rt->releasing) {
        rt->releasing = true;
        luna_leader_release(rt->leader, on_released, rt);
    }
}

static void on_drained(void *ud)
{
    struct runtime *rt = ud;
    if (rt->draining > 0 && --rt->draining == 0)
        finish_shutdown(rt);
}

/* Unlinks and frees the oldest retiring reload. */
static void free_oldest_retiring(struct runtime *rt)
{
    struct retiring **p = &rt->retiring;
    while ((*p)->next)
        p = &(*p)->next;
    struct retiring *r = *p;
    *p = NULL;
    ev_timer_stop(luna_loop(), &r->grace);
    luna_generation_free(r->gen);
    free(r);
}

/* Frees every retiring reload, oldest first (struct retiring). */
static void free_retiring(struct runtime *rt)
{
    while (rt->retiring)
        free_oldest_retiring(rt);
}

static void grace_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct runtime *rt = w->data;
    luna_warn("shutdown grace period over: abandoning in-flight reconciles");
    /* Freeing a controller cancels its reconciles and their requests, so
     * nothing acts on the cluster once the Lease is given up. */
    free_retiring(rt);
    luna_generation_free(rt->gen);
    rt->gen = NULL;
    rt->draining = 0;
    finish_shutdown(rt);
}

/* ---- SIGTERM and SIGINT while script code holds the loop ---------------
 *
 * libev's signal watchers run on the loop, and a stretch of script code
 * (up to the operator's budgets, unbounded if the flags say 0) holds the
 * loop: the watcher would only see the signal after it.  So the runtime
 * puts its own handler in front of libev's: it stamps the shutdown's
 * deadline for the watchdog (luna_watchdog_stop_all_at: script code still
 * running at the end of the grace period is stopped; after a second
 * signal, at once), then hands the signal to libev with ev_feed_signal,
 * which is all libev's own handler does (ev.h offers it for customised
 * signal handling, from any context).  Everything it touches is
 * async-signal-safe: clock_gettime, lock-free atomics, ev_feed_signal. */

/* The grace period, set before the handler is installed, read by it. */
static double stop_grace;
/* SIGTERMs and SIGINTs caught so far. */
static atomic_int stop_signals;

static void on_stop_signal(int signum)
{
    int saved = errno;
    double t = luna_clock_now(luna_clock_monotonic());
    int n = atomic_fetch_add(&stop_signals, 1);
    luna_watchdog_stop_all_at(n == 0 ? t + stop_grace : t);
    ev_feed_signal(signum);
    errno = saved;
}

/* After ev_signal_start has installed libev's handler for signum. */
static void catch_stop_signal(int signum)
{
    struct sigaction sa = { 0 };
    sa.sa_handler = on_stop_signal;
    sigfillset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(signum, &sa, NULL);
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct runtime *rt = w->data;
    /* Two signals that came while a stretch of script code held the loop
     * reach this watcher once: the handler's count tells. */
    if (rt->stopping || atomic_load(&stop_signals) > 1) {
        if (rt->exiting)
            return; /* SIGTERM and SIGINT both pending: one exit */
        rt->exiting = true;
        luna_warn("second signal: exiting now");
        rt->exit_code = 1;
        ev_break(loop, EVBREAK_ALL);
        return;
    }
    rt->stopping = true;
    if (rt->shards)
        luna_shard_set_freeze(rt->shards);
    luna_info("shutdown requested", "signal", w->signum == SIGTERM ? "SIGTERM" : "SIGINT");
    ev_timer_stop(loop, &rt->sync_check);
    /* A reload still waiting for discovery never takes over. */
    luna_generation_free(rt->pending);
    rt->pending = NULL;
    candidate_free(rt);
    /* The grace period runs from the signal, not from this callback: a
     * stretch of script code may have held the loop in between.  Script
     * code still running at its end is stopped by the watchdog. */
    double grace = rt->cfg->grace_period > 0 ? rt->cfg->grace_period : DEFAULT_GRACE_S;
    double deadline = luna_watchdog_stop_all_deadline();
    if (deadline > 0) {
        double left = deadline - luna_clock_now(luna_clock_monotonic());
        grace = left < 0 ? 0 : left < grace ? left : grace;
    } else {
        /* a signal libev's own handler caught (before ours was in place) */
        luna_watchdog_stop_all_at(luna_clock_now(luna_clock_monotonic()) + grace);
    }
    ev_timer_set(&rt->grace, grace, 0.);
    ev_timer_start(loop, &rt->grace);
    /* Reloads still retiring are abandoned: their keys
     * go back to queues that are shutting down anyway. */
    free_retiring(rt);
    rt->draining = 1;
    luna_generation_retire(rt->gen, true, on_drained, rt);
}

static void latency_signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    luna_event_latency_report();
    luna_event_latency_clear();
}

/* ---- controllers: their sources, their start ------------------------------- */

/* Looks at every controller of the running reload: reports the kinds the
 * server does not serve (controller.h: a log line when that is first seen,
 * the controller's metric), logs "caches synced" the first time every
 * source of every controller has synced, and starts each controller whose
 * own sources have synced (with leader election: once this replica
 * leads), so one controller waiting for its kind stops no other.  Returns
 * true when nothing is left to wait for; *not_served_only when what is
 * left only waits for kinds the server does not serve. */
static bool check_controllers(struct runtime *rt, bool *not_served_only)
{
    size_t n = luna_generation_count(rt->gen);
    bool all_synced = true, waiting = false;
    for (size_t i = 0; i < n; i++) {
        struct luna_controller_status st;
        luna_controller_check(luna_generation_controller(rt->gen, i), &st);
        if (st.synced != st.sources) {
            all_synced = false;
            waiting |= st.resolving || st.unresolved || st.listing;
        }
    }
    *not_served_only = !waiting;
    if (all_synced && !rt->caches_synced) {
        char count[16];
        snprintf(count, sizeof count, "%zu", luna_informer_factory_count(rt->factory));
        luna_info("caches synced", LUNA_LOG_NUM("informers"), count);
        rt->caches_synced = true;
    }
    if (rt->stopping || (rt->leader && !rt->leading))
        return all_synced;
    for (size_t i = 0; i < n; i++) {
        struct luna_controller *c = luna_generation_controller(rt->gen, i);
        if (luna_controller_synced(c))
            luna_controller_start(c);
    }
    return all_synced;
}

static void finish_reload(struct runtime *rt);
static void publish_code_state(struct runtime *rt);

/* Every kind of the reload has an answer from discovery (resolved, not
 * served, or discovery failed once): it may take over. */
static bool reload_settled(struct luna_generation *g)
{
    for (size_t i = 0; i < luna_generation_count(g); i++) {
        struct luna_controller_status st;
        luna_controller_status(luna_generation_controller(g, i), &st);
        if (st.resolving)
            return false;
    }
    return true;
}

/* Every SYNC_CHECK_S while a reload waits for discovery or informers
 * resolve and list; every NOT_SERVED_CHECK_S while only kinds the server
 * does not serve are left (their informers ask discovery on their own
 * schedule); stopped when every controller's sources have synced. */
static void check_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct runtime *rt = w->data;
    if (rt->stopping) {
        ev_timer_stop(loop, w);
        return;
    }
    if (rt->pending && reload_settled(rt->pending))
        finish_reload(rt);
    bool not_served_only;
    bool done = check_controllers(rt, &not_served_only);
    if (done && !rt->pending) {
        ev_timer_stop(loop, w);
        return;
    }
    double every = !rt->pending && not_served_only ? NOT_SERVED_CHECK_S : SYNC_CHECK_S;
    if (!ev_is_active(w) || w->repeat != every) {
        w->repeat = every;
        ev_timer_again(loop, w);
    }
}

/* Checks now, and keeps checking while something is left to wait for. */
static void schedule_check(struct runtime *rt)
{
    rt->sync_check.repeat = SYNC_CHECK_S;
    ev_timer_again(luna_loop(), &rt->sync_check);
    check_cb(luna_loop(), &rt->sync_check, 0);
}

/* ---- leader election ----------------------------------------------------- */

static void on_started_leading(void *ud)
{
    struct runtime *rt = ud;
    rt->leading = true;
    if (!rt->stopping)
        schedule_check(rt);
}

/* Another replica may lead already: stop taking keys at once and exit 1
 * without waiting for in-flight reconciles (teardown cancels them). */
static void on_stopped_leading(void *ud)
{
    struct runtime *rt = ud;
    rt->leading = false;
    for (size_t i = 0; rt->gen && i < luna_generation_count(rt->gen); i++)
        luna_controller_shutdown(luna_generation_controller(rt->gen, i), NULL, NULL);
    luna_error("stopping: leader election lost");
    rt->exit_code = 1;
    ev_break(luna_loop(), EVBREAK_ALL);
}

/* client-go's default identity: hostname + "_" + a random UUID. */
static void default_identity(char *buf, size_t size)
{
    char host[256] = "luna";
    if (gethostname(host, sizeof host) != 0 || !host[0])
        snprintf(host, sizeof host, "luna");
    host[sizeof host - 1] = '\0';
    unsigned char u[16] = { 0 };
    if (RAND_bytes(u, sizeof u) != 1) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        for (size_t i = 0; i < sizeof u; i++)
            u[i] = (unsigned char)((ts.tv_nsec >> (i % 4 * 8)) ^ (getpid() >> (i % 2 * 8)) ^ i);
    }
    u[6] = (unsigned char)((u[6] & 0x0f) | 0x40); /* version 4 */
    u[8] = (unsigned char)((u[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(buf, size,
             "%.200s_%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             host, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
             u[12], u[13], u[14], u[15]);
}

static const char *nonempty(const char *s) { return s && *s ? s : NULL; }

/* This replica's identity ($POD_NAME, else client-go's default) into
 * rt->identity; returns the Leases' namespace (--leader-election-namespace,
 * $POD_NAMESPACE, else the kubeconfig's). */
static const char *replica_identity(struct runtime *rt)
{
    const char *id = nonempty(getenv("POD_NAME"));
    if (id)
        snprintf(rt->identity, sizeof rt->identity, "%s", id);
    else
        default_identity(rt->identity, sizeof rt->identity);
    const char *ns = nonempty(rt->cfg->leader_election_namespace);
    if (!ns)
        ns = nonempty(getenv("POD_NAMESPACE"));
    return ns ? ns : rt->kcfg->namespace;
}

static int setup_leader(struct runtime *rt, luna_error *err)
{
    const struct luna_run_config *cfg = rt->cfg;
    const char *ns = replica_identity(rt);
    struct luna_leader_options lo = {
        .name = nonempty(cfg->leader_election_id) ? cfg->leader_election_id : DEFAULT_LEASE_NAME,
        .namespace_ = ns,
        .identity = rt->identity,
        .lease_duration = cfg->lease_duration,
        .renew_deadline = cfg->renew_deadline,
        .retry_period = cfg->retry_period,
        .loop = luna_loop(),
        .metrics = rt->rm,
        .on_started_leading = on_started_leading,
        .on_stopped_leading = on_stopped_leading,
        .ud = rt,
    };
    return luna_leader_new(rt->kc, &lo, &rt->leader, err);
}

/* ---- sharding (--shards) -------------------------------------------------- */

/* Calls fn on every controller of every reload that holds informers: the
 * running one, one waiting to take over, a shadow candidate, the retiring. */
static void each_controller(struct runtime *rt, void (*fn)(struct luna_controller *, void *),
                            void *ud)
{
    struct luna_generation *gens[3] = { rt->gen, rt->pending, rt->candidate };
    for (size_t g = 0; g < 3; g++)
        for (size_t i = 0; gens[g] && i < luna_generation_count(gens[g]); i++)
            fn(luna_generation_controller(gens[g], i), ud);
    for (struct retiring *r = rt->retiring; r; r = r->next)
        for (size_t i = 0; i < luna_generation_count(r->gen); i++)
            fn(luna_generation_controller(r->gen, i), ud);
}

static void reshard_one(struct luna_controller *c, void *ud) { luna_controller_reshard(c); }
static void abandon_one(struct luna_controller *c, void *ud) { luna_controller_abandon_running(c); }
static void resume_one(struct luna_controller *c, void *ud) { luna_controller_resume(c); }
static void oldest_one(struct luna_controller *c, void *ud)
{
    unsigned long *oldest = ud, n = luna_controller_oldest_running(c);
    if (n && (!*oldest || n < *oldest))
        *oldest = n;
}

static void shard_on_claim(void *ud, const struct luna_shard_selector *shard)
{
    each_controller(ud, reshard_one, NULL);
}

static unsigned long shard_oldest_running(void *ud)
{
    unsigned long oldest = 0;
    each_controller(ud, oldest_one, &oldest);
    return oldest;
}

static unsigned long shard_last_started(void *ud) { return luna_reconcile_last_serial(); }

/* The Lease went stale: another replica may take our keys over soon. */
static void shard_on_stop(void *ud) { each_controller(ud, abandon_one, NULL); }

/* The claim is confirmed again: the keys that waited in the queues go. */
static void shard_on_resume(void *ud) { each_controller(ud, resume_one, NULL); }

static bool shard_may_write(void *ud, const char **why)
{
    return luna_shard_set_may_write(ud, why);
}

/* Before the controllers are built: they acquire their informers on the
 * set's (empty) claim, and dispatch only the keys it owns. */
static int setup_shards(struct runtime *rt, luna_error *err)
{
    const struct luna_run_config *cfg = rt->cfg;
    const char *ns = replica_identity(rt);
    struct luna_shard_set_options so = {
        .set = nonempty(cfg->shard_set) ? cfg->shard_set : DEFAULT_LEASE_NAME,
        .namespace_ = ns,
        .identity = rt->identity,
        .field = cfg->shard_by_namespace ? LUNA_SHARD_NAMESPACE : LUNA_SHARD_UID,
        .lease_duration = cfg->lease_duration,
        .renew_deadline = cfg->renew_deadline,
        .retry_period = cfg->retry_period,
        .skew_margin = cfg->shard_skew_margin,
        .loop = luna_loop(),
        .on_claim = shard_on_claim,
        .oldest_running = shard_oldest_running,
        .last_started = shard_last_started,
        .on_stop = shard_on_stop,
        .on_resume = shard_on_resume,
        .ud = rt,
    };
    int rc = luna_shard_set_new(rt->kc, &so, &rt->shards, err);
    if (rc < 0)
        return rc;
    rt->gen_host.sharding = rt->shards;
    rt->api.write_allow = shard_may_write;
    rt->api.write_timeout = luna_shard_set_write_timeout(rt->shards);
    rt->api.write_ud = rt->shards;
    /* no connection is open yet: they open when the loop runs */
    luna_http_client_set_unacked_timeout(rt->http, luna_shard_set_unacked_timeout(rt->shards));
    return 0;
}

/* ---- metrics and probes ---------------------------------------------------- */

static void on_api_request(void *ud, int status, const char *method)
{
    struct runtime *rt = ud;
    luna_runtime_metrics_rest_request(rt->rm, status, method, rt->api_host);
}

static double informer_objects(void *ud) { return ((struct informer_metrics *)ud)->objects; }

static void informer_metrics_free(struct runtime *rt, struct informer_metrics *im)
{
    HASH_DEL(rt->informers, im);
    if (rt->rm)
        luna_runtime_metrics_informer_remove(rt->rm, im->resource);
    free(im->key);
    free(im->resource);
    free(im);
}

/* "v1/configmaps", "apps/v1/deployments ns=prod labels=app=web": the
 * resource, then what the informer's key ("apps/v1/Deployment ns=prod
 * labels=app=web fields=") narrows it to. */
static char *resource_label(const struct luna_resource *res, const char *key)
{
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "%s%s%s/%s", res->group, *res->group ? "/" : "",
                     res->version, res->resource);
    const char *ns = strstr(key, " ns="), *labels = strstr(key, " labels="),
               *fields = strstr(key, " fields=");
    if (n > 0 && (size_t)n < sizeof buf && ns && labels && fields && ns < labels &&
        labels < fields) {
        int nslen = (int)(labels - (ns + 4)), llen = (int)(fields - (labels + 8));
        size_t len = (size_t)n;
        if (!(nslen == 1 && ns[4] == '*'))
            len += (size_t)snprintf(buf + len, sizeof buf - len, " ns=%.*s", nslen, ns + 4);
        if (llen > 0 && len < sizeof buf)
            len += (size_t)snprintf(buf + len, sizeof buf - len, " labels=%.*s", llen,
                                    labels + 8);
        if (fields[8] && len < sizeof buf)
            snprintf(buf + len, sizeof buf - len, " fields=%s", fields + 8);
    }
    return strdup(buf);
}

static void collect_informer(void *ud, struct luna_shared_informer *si)
{
    struct runtime *rt = ud;
    const struct luna_resource *res = luna_shared_informer_resource(si);
    struct luna_reflector *refl = luna_shared_informer_reflector(si);
    if (!res || !refl)
        return; /* not resolved yet: no series */
    const char *key = luna_shared_informer_key(si);
    struct informer_metrics *im;
    HASH_FIND_STR(rt->informers, key, im);
    if (!im) {
        im = calloc(1, sizeof *im);
        if (!im || !(im->key = strdup(key)) || !(im->resource = resource_label(res, key)) ||
            luna_runtime_metrics_informer_add(rt->rm, im->resource, informer_objects, im, NULL,
                                              NULL) < 0) {
            if (im) {
                free(im->key);
                free(im->resource);
            }
            free(im);
            return;
        }
        HASH_ADD_KEYPTR(hh, rt->informers, im->key, strlen(im->key), im);
    }
    im->seen = true;
    if (im->si != si) { /* a new informer under this key: its counters start at 0 */
        im->si = si;
        im->relists = 0;
        memset(im->ends, 0, sizeof im->ends);
        im->rv_current = im->rv_stale = 0;
        im->bad = 0;
    }
    im->objects = (double)luna_indexer_len(luna_informer_indexer(luna_shared_informer_informer(si)));
    struct luna_reflector_stats st = luna_reflector_stats(refl);
    unsigned long relists = st.lists > 1 ? st.lists - 1 : 0;
    for (; im->relists < relists; im->relists++)
        luna_runtime_metrics_informer_relist(rt->rm, im->resource);
    unsigned long ends[NREASONS] = { st.watch_gone, st.watch_errors, st.watch_timeouts,
                                     st.watch_closed, st.watch_decode };
    for (size_t i = 0; i < NREASONS; i++)
        for (; im->ends[i] < ends[i]; im->ends[i]++)
            luna_runtime_metrics_watch_restart(rt->rm, im->resource, watch_end_reasons[i]);
    for (; im->rv_current < st.rv_current; im->rv_current++)
        luna_runtime_metrics_version_check(rt->rm, im->resource, false);
    for (; im->rv_stale < st.rv_stale; im->rv_stale++)
        luna_runtime_metrics_version_check(rt->rm, im->resource, true);
    for (; im->bad < st.bad_objects; im->bad++)
        luna_runtime_metrics_informer_bad(rt->rm, im->resource);
}

static void collect_informers(struct runtime *rt)
{
    luna_informer_factory_foreach(rt->factory, collect_informer, rt);
    struct informer_metrics *im, *tmp;
    HASH_ITER(hh, rt->informers, im, tmp) {
        if (!im->seen)
            informer_metrics_free(rt, im);
        else
            im->seen = false;
    }
}

/* informers-synced: ready when every controller of the running reload has
 * all its sources synced; else the reason names each controller that has
 * not and what its sources wait for ("controller gadgets:
 * example.com/v1/Gadget not served (no matches for kind ...)"). */
struct bad_note {
    char text[512];
    size_t len;
};

static void note_bad(void *ud, struct luna_shared_informer *si)
{
    struct bad_note *n = ud;
    struct luna_reflector *refl = luna_shared_informer_reflector(si);
    if (!refl || n->len + 1 >= sizeof n->text)
        return;
    struct luna_reflector_stats st = luna_reflector_stats(refl);
    if (!st.bad_objects)
        return;
    int w = snprintf(n->text + n->len, sizeof n->text - n->len, "%s%s: %lu left out, last %s",
                     n->len ? "; " : "", luna_shared_informer_key(si), st.bad_objects,
                     luna_reflector_last_bad(refl));
    n->len = w < 0 || (size_t)w >= sizeof n->text - n->len ? sizeof n->text - 1 : n->len + (size_t)w;
}

/* objects-decoded: listed once an informer left an object out of its
 * cache as past the decoder's bounds, and says in /readyz?verbose which
 * and the last one; it always passes (one object a user could create
 * must not take the replica out of service). */
static void refresh_decoded(struct runtime *rt)
{
    struct bad_note n = { .len = 0 };
    n.text[0] = '\0';
    luna_informer_factory_foreach(rt->factory, note_bad, &n);
    if (n.len)
        luna_health_set(rt->health, CHECK_DECODED, true, n.text, NULL);
    else
        luna_health_remove(rt->health, CHECK_DECODED); /* absent: nothing to do */
}

static void refresh_checks(struct runtime *rt)
{
    refresh_decoded(rt);
    char reason[512];
    size_t len = 0;
    reason[0] = '\0';
    bool ok = true;
    for (size_t i = 0; rt->gen && i < luna_generation_count(rt->gen); i++) {
        struct luna_controller *c = luna_generation_controller(rt->gen, i);
        if (luna_controller_synced(c))
            continue;
        ok = false;
        if (len + 1 >= sizeof reason)
            continue;
        int n = snprintf(reason + len, sizeof reason - len, "%scontroller %s: ", len ? "; " : "",
                         luna_controller_name(c));
        if (n < 0 || (size_t)n >= sizeof reason - len) {
            len = sizeof reason - 1;
            continue;
        }
        len += (size_t)n;
        len += luna_controller_describe_waiting(c, false, reason + len, sizeof reason - len);
    }
    luna_health_set(rt->health, CHECK_SYNCED, ok, ok ? NULL : reason, NULL);
    if (rt->leader) {
        const char *why = "";
        bool leader_ok = rt->leading || luna_leader_healthy(rt->leader, &why);
        luna_health_set(rt->health, CHECK_LEADER, leader_ok, why, NULL);
    }
}

static void prepare_endpoint(void *ud, enum luna_httpd_endpoint endpoint)
{
    struct runtime *rt = ud;
    if (endpoint == LUNA_HTTPD_METRICS)
        collect_informers(rt);
    else
        refresh_checks(rt);
}

/* Gives every controller of gen its metric series (kept by name across
 * reloads) and exports the workqueues that are new (an adopted queue is
 * exported already). */
/* Controllers named `name` in the reloads being replaced (old) or still
 * retiring stop reporting to its series, which are about to be freed: their
 * in-flight reconciles still finish, unmetered. */
static void detach_metrics(struct runtime *rt, struct luna_generation *old, const char *name)
{
    struct luna_controller *c;
    if (old && (c = luna_generation_find(old, name)))
        luna_controller_set_metrics(c, NULL);
    for (struct retiring *r = rt->retiring; r; r = r->next)
        if ((c = luna_generation_find(r->gen, name)))
            luna_controller_set_metrics(c, NULL);
}

/* luna_lua_memory_bytes{state="controllers"}: the running reload's
 * states, read through the runtime at each scrape.  Not the reload
 * itself as the callback's data: the metrics server outlives it (a
 * scrape while the Lease is released after the grace period found it
 * freed). */
static double running_lua_memory(void *ud)
{
    struct runtime *rt = ud;
    return rt->gen ? luna_generation_lua_memory(rt->gen) : 0;
}

static void wire_metrics(struct runtime *rt, struct luna_generation *gen,
                         struct luna_generation *old)
{
    for (size_t i = 0; i < luna_generation_count(gen); i++) {
        struct luna_controller *c = luna_generation_controller(gen, i);
        const char *name = luna_controller_name(c);
        luna_error e = { 0 };
        struct ctl_metrics *m;
        HASH_FIND_STR(rt->cms, name, m);
        if (!m) {
            m = calloc(1, sizeof *m);
            if (!m || !(m->name = strdup(name)) ||
                luna_runtime_metrics_controller_new(rt->rm, name, luna_controller_workers(c),
                                                    &m->cm, &e) < 0) {
                luna_warn("controller metrics unavailable", "controller", name, "error", e.msg);
                if (m)
                    free(m->name);
                free(m);
                continue;
            }
            HASH_ADD_KEYPTR(hh, rt->cms, m->name, strlen(m->name), m);
        } else {
            luna_runtime_metrics_set_workers(m->cm, luna_controller_workers(c));
        }
        luna_controller_set_metrics(c, m->cm);
        luna_runtime_metrics_script(m->cm, luna_generation_sha256(gen, i), NULL);
        if (!old || !luna_generation_find(old, name)) {
            struct luna_workqueue_export *x;
            if (luna_workqueue_export_attach(rt->registry, luna_controller_queue(c), &x, &e) < 0)
                luna_warn("workqueue metrics unavailable", "controller", name, "error", e.msg);
        }
    }
    /* Controllers that are gone take their series with them (a reconcile
     * of theirs still in flight must not report to the freed series). */
    struct ctl_metrics *m, *tmp;
    HASH_ITER(hh, rt->cms, m, tmp) {
        if (!luna_generation_find(gen, m->name)) {
            HASH_DEL(rt->cms, m);
            detach_metrics(rt, old, m->name);
            luna_runtime_metrics_controller_free(m->cm);
            free(m->name);
            free(m);
        }
    }
}

/* The registry, the runtime's metric set, one set of series per
 * controller and per workqueue, and the API client's request counter.
 * Metrics must not stop the runtime: a controller's series that cannot be
 * made are logged and skipped. */
static double http_received(void *ud) { return (double)luna_http_client_received(ud); }

static int setup_metrics(struct runtime *rt, luna_error *err)
{
    rt->registry = luna_metrics_default();
    if (!rt->registry)
        return luna_error_set(err, LUNA_ENOMEM, "metrics: out of memory");
    int rc = luna_runtime_metrics_new(rt->registry, &rt->rm, err);
    if (rc < 0)
        return rc;
    luna_runtime_metrics_lua_memory_add(rt->rm, "controllers", running_lua_memory, rt, NULL);
    luna_url_host(rt->kcfg->server, rt->api_host, sizeof rt->api_host);
    luna_kube_client_set_observer(rt->kc, on_api_request, rt);
    luna_runtime_metrics_http_received(rt->rm, http_received, rt->http, NULL);
    wire_metrics(rt, rt->gen, NULL);
    return 0;
}

static void metrics_cert_changed(void *ud, const char *cert_pem, const char *key_pem)
{
    struct runtime *rt = ud;
    luna_error err = { 0 };
    if (rt->metrics_srv && luna_httpd_set_certificate(rt->metrics_srv, cert_pem, key_pem, &err) < 0)
        luna_error("metrics certificate not served", "error", err.msg);
}

static const char *metrics_address(const struct luna_run_config *cfg)
{
    return cfg->metrics_bind_address ? cfg->metrics_bind_address
           : cfg->dev_server         ? DEV_ADDRESS
           : cfg->metrics_insecure   ? DEFAULT_INSECURE_METRICS_ADDRESS
                                     : DEFAULT_METRICS_ADDRESS;
}

static const char *health_address(const struct luna_run_config *cfg)
{
    return cfg->health_probe_bind_address ? cfg->health_probe_bind_address
           : cfg->dev_server              ? DEV_ADDRESS
                                          : DEFAULT_HEALTH_ADDRESS;
}

/* scheme://address path, for a log line: a wildcard host ("[::]",
 * "0.0.0.0") is reached as localhost. */
static void server_url(char *buf, size_t size, const char *scheme, const char *address,
                       const char *path)
{
    const char *port = strrchr(address, ':');
    bool any = strncmp(address, "[::]:", 5) == 0 || strncmp(address, "0.0.0.0:", 8) == 0;
    if (any && port)
        snprintf(buf, size, "%s://localhost%s%s", scheme, port, path);
    else
        snprintf(buf, size, "%s://%s%s", scheme, address, path);
}

/* Secure metrics, first part: the certificate (from --metrics-cert-path,
 * else self-signed), read before anything connects so a bad one fails
 * the start at once. */
static int setup_metrics_cert(struct runtime *rt, luna_error *err)
{
    const struct luna_run_config *cfg = rt->cfg;
    if (cfg->metrics_insecure || strcmp(metrics_address(cfg), "0") == 0)
        return 0;
    struct luna_serving_cert_options co = {
        .dir = cfg->metrics_cert_path,
        .cert_name = cfg->metrics_cert_name,
        .key_name = cfg->metrics_cert_key,
        .changed = metrics_cert_changed,
        .ud = rt,
    };
    return luna_serving_cert_new(&co, &rt->metrics_cert, err);
}

static int admin_request(void *ud, const struct luna_admin_request *req,
                         struct luna_textbuf *body)
{
    struct runtime *rt = ud;
    return luna_admin_handle(req, rt->gen, body);
}

/* /admin/ is served on the metrics server: by default when it is secure
 * (authorized per request), open on a plain one only when asked for. */
static bool admin_on(const struct luna_run_config *cfg)
{
    if (cfg->admin == LUNA_ADMIN_OFF)
        return false;
    return cfg->admin == LUNA_ADMIN_ON || !cfg->metrics_insecure;
}

static int start_server(struct runtime *rt, const char *address, bool metrics, bool health,
                        struct luna_httpd **out, luna_error *err)
{
    bool secure = metrics && rt->metrics_auth;
    struct luna_httpd_options ho = {
        .address = address,
        .metrics = metrics ? rt->registry : NULL,
        .health = health ? rt->health : NULL,
        .tls_cert_pem = secure ? luna_serving_cert_pem(rt->metrics_cert) : NULL,
        .tls_key_pem = secure ? luna_serving_cert_key_pem(rt->metrics_cert) : NULL,
        .auth = secure ? rt->metrics_auth : NULL,
        .admin = metrics && admin_on(rt->cfg) ? admin_request : NULL,
        .admin_ud = rt,
        .prepare = prepare_endpoint,
        .ud = rt,
        .read_header_timeout = rt->cfg->http_read_header_timeout,
        .read_timeout = rt->cfg->http_read_timeout,
    };
    int rc = luna_httpd_start(&ho, out, err);
    if (rc < 0)
        return luna_error_wrap(err, "%s server", metrics ? "metrics" : "health probe");
    /* One line per server, with its URL and, where no secret of a cluster
     * is involved, a command that calls it ("try"): with --dev-server the
     * dev server's own token (rt->dev_token) is the one to show; a secure
     * server's callers in a cluster bring their own.  A NULL key ends a
     * log call's fields, so "try" is left out where there is none. */
    const char *addr = luna_httpd_address(*out);
    const char *scheme = secure ? "https" : "http";
    /* the limits against hostile clients (httpd.h), so an operator sees
     * what holds */
    char header_to[32], read_to[32], maxc[16], maxa[16];
    snprintf(header_to, sizeof header_to, "%gs",
             ho.read_header_timeout > 0 ? ho.read_header_timeout : LUNA_HTTPD_READ_HEADER_TIMEOUT);
    snprintf(read_to, sizeof read_to, "%gs",
             ho.read_timeout > 0 ? ho.read_timeout : LUNA_HTTPD_READ_TIMEOUT);
    snprintf(maxc, sizeof maxc, "%u", LUNA_HTTPD_MAX_CONNECTIONS);
    snprintf(maxa, sizeof maxa, "%u", LUNA_HTTPD_MAX_CONNECTIONS_PER_ADDRESS);
    bool dev = rt->dev_token[0] != '\0';
    const char *try_key = !secure || dev ? "try" : NULL;
    char url[320], base[320], cmd[768];
    server_url(base, sizeof base, scheme, addr, "");
    if (metrics) {
        server_url(url, sizeof url, scheme, addr, "/metrics");
        if (secure)
            snprintf(cmd, sizeof cmd, "curl -k -H 'Authorization: Bearer %s' %s", rt->dev_token,
                     url);
        else
            snprintf(cmd, sizeof cmd, "curl %s", url);
        if (secure)
            luna_info("metrics server listening", "address", addr, LUNA_LOG_BOOL("secure"), "true", "cert",
                      luna_serving_cert_self_signed(rt->metrics_cert) ? "self-signed" : "files",
                      "read_header_timeout", header_to, "read_timeout", read_to,
                      LUNA_LOG_NUM("max_connections"), maxc,
                      LUNA_LOG_NUM("max_connections_per_address"), maxa,
                      "url", url, try_key, cmd);
        else
            luna_info("metrics server listening", "address", addr, LUNA_LOG_BOOL("secure"), "false",
                      "read_header_timeout", header_to, "read_timeout", read_to,
                      LUNA_LOG_NUM("max_connections"), maxc,
                      LUNA_LOG_NUM("max_connections_per_address"), maxa,
                      "url", url, try_key, cmd);
    }
    if (metrics && admin_on(rt->cfg)) {
        /* this executable, so the command runs from any directory */
        char self[256] = "luna";
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? (size_t)n : 4] = '\0';
        if (secure)
            snprintf(cmd, sizeof cmd, "LUNA_TOKEN=%s %s trigger --server %s "
                     "--insecure-skip-tls-verify list", rt->dev_token, self, base);
        else
            snprintf(cmd, sizeof cmd, "%s trigger --server %s list", self, base);
        luna_log(secure ? LUNA_LOG_INFO : LUNA_LOG_WARN, "admin endpoints enabled",
                 "address", addr, "path", LUNA_ADMIN_PREFIX,
                 "authorization", secure ? "SubjectAccessReview" : "none (open: anyone who "
                                                                   "reaches the port may use them)",
                 "url", base, try_key, cmd, NULL);
    }
    if (health) {
        server_url(url, sizeof url, "http", addr, "/readyz");
        luna_info("health probe server listening", "address", addr,
                  "read_header_timeout", header_to, "read_timeout", read_to,
                  LUNA_LOG_NUM("max_connections"), maxc,
                  LUNA_LOG_NUM("max_connections_per_address"), maxa, "url", url);
    }
    return 0;
}

/* ---- admission webhooks (serve/webhook_server.h) ---------------------------- */

/* The webhooks of the running code: a request finds its webhook in rt->gen
 * at the moment it is served, and runs to its end at once, so a reload
 * swaps every webhook together and no request sees two codes. */
/* A webhook's handle: its file's state (the reload's state index) and its
 * place among that file's webhooks.  The server finds and calls at once,
 * so the reload cannot change between the two. */
#define WEBHOOKS_PER_STATE 65536

static int webhook_find(void *ud, const char *path, struct luna_webhook_info *info)
{
    struct runtime *rt = ud;
    if (!rt->gen)
        return 0;
    lua_State *L;
    for (size_t s = 0; (L = luna_generation_state(rt->gen, s)) != NULL; s++) {
        int i = luna_webhook_find(L, path, info);
        if (i > 0 && i < WEBHOOKS_PER_STATE && s < INT_MAX / WEBHOOKS_PER_STATE)
            return (int)s * WEBHOOKS_PER_STATE + i;
    }
    return 0;
}

static enum luna_webhook_result webhook_call(void *ud, int h, const char *body, size_t len,
                                             double seconds, struct luna_webhook_answer *answer,
                                             char *why, size_t why_size)
{
    struct runtime *rt = ud;
    lua_State *L = rt->gen ? luna_generation_state(rt->gen, (size_t)(h / WEBHOOKS_PER_STATE)) : NULL;
    if (!L) {
        snprintf(why, why_size, "the webhook is no longer loaded");
        return LUNA_WEBHOOK_ERROR;
    }
    struct luna_controller *c =
        luna_generation_state_controller(rt->gen, (size_t)(h / WEBHOOKS_PER_STATE));
    return luna_webhook_call(L, h % WEBHOOKS_PER_STATE, c, body, len, seconds, answer, why,
                             why_size);
}

/* The webhooks the running reload declares, over its files' states. */
static int webhook_count(struct runtime *rt)
{
    int n = 0;
    lua_State *L;
    for (size_t s = 0; rt->gen && (L = luna_generation_state(rt->gen, s)) != NULL; s++)
        n += luna_loader_webhook_count(L);
    return n;
}

static void webhook_cert_changed(void *ud, const char *cert_pem, const char *key_pem)
{
    struct runtime *rt = ud;
    luna_error err = { 0 };
    if (rt->webhook_srv &&
        luna_webhook_server_set_certificate(rt->webhook_srv, cert_pem, key_pem, &err) < 0)
        luna_error("webhook certificate not served", "error", err.msg);
    else
        luna_info("webhook certificate reloaded");
}

/* ---- the managed certificate mode (serve/webhook_manager.h) ---- */

#define DEFAULT_WEBHOOK_SERVICE "luna-webhooks"
#define DEFAULT_WEBHOOK_SECRET "luna-webhook-certs"
#define DEFAULT_WEBHOOK_CONFIGURATION "luna"
#define DEFAULT_CERT_VALIDITY_S (90.0 * 86400)
#define DEFAULT_CA_VALIDITY_S (3650.0 * 86400)

static const char *webhook_namespace(const struct runtime *rt)
{
    const char *ns = nonempty(rt->cfg->webhook_service_namespace);
    if (!ns)
        ns = nonempty(getenv("POD_NAMESPACE"));
    return ns ? ns : rt->kcfg->namespace;
}

/* How the API server reaches this luna's webhooks (the clientConfig). */
static struct luna_webhook_client webhook_client(struct runtime *rt, const char *ca_bundle)
{
    const struct luna_run_config *cfg = rt->cfg;
    return (struct luna_webhook_client){
        .url = rt->webhook_url[0] ? rt->webhook_url : NULL,
        .service_name = nonempty(cfg->webhook_service_name) ? cfg->webhook_service_name
                                                            : DEFAULT_WEBHOOK_SERVICE,
        .service_namespace = webhook_namespace(rt),
        .service_port = cfg->webhook_service_port > 0 ? cfg->webhook_service_port : 443,
        .ca_bundle = ca_bundle,
    };
}

/* The spec.conversion of CRD crd when the running code's converter
 * serves it (webhook_manager.h), else NULL. */
static char *webhook_conversion(void *ud, const char *crd, const char *ca_bundle, bool *failed)
{
    struct runtime *rt = ud;
    struct luna_webhook_client cc = webhook_client(rt, ca_bundle);
    lua_State *L;
    for (size_t s = 0; rt->gen && (L = luna_generation_state(rt->gen, s)) != NULL; s++) {
        for (int i = 1; i <= luna_loader_webhook_count(L); i++) {
            struct luna_webhook_info info;
            if (luna_webhook_info(L, i, &info) < 0 || strcmp(info.type, "conversion") != 0 ||
                strcmp(info.name, crd) != 0)
                continue;
            luna_json_writer w;
            luna_json_writer_init(&w);
            bool written = false;
            luna_error err = { 0 };
            int rc = luna_webhook_registration(L, i, "conversion", &cc, &w, &written);
            char *out = rc == 0 && written && luna_json_writer_finish(&w, &err) == 0
                            ? luna_json_writer_steal(&w, NULL)
                            : NULL;
            luna_json_writer_free(&w);
            *failed = !out;
            return out;
        }
    }
    return NULL;
}

/* Hands the manager the CRDs whose conversion is luna's: the ones
 * --webhook-conversion-crds names and the running code's converters'.
 * 0 or LUNA_ENOMEM. */
static int update_conversion_crds(struct runtime *rt)
{
    if (!rt->webhook_mgr)
        return 0;
    enum { MAX_CRDS = 256 };
    const char *crds[MAX_CRDS];
    size_t n = 0;
    char *list = nonempty(rt->cfg->webhook_conversion_crds)
                     ? strdup(rt->cfg->webhook_conversion_crds)
                     : NULL;
    char *save = NULL;
    for (char *t = list ? strtok_r(list, ",", &save) : NULL; t && n < MAX_CRDS;
         t = strtok_r(NULL, ",", &save))
        if (*t)
            crds[n++] = t;
    lua_State *L;
    for (size_t s = 0; rt->gen && (L = luna_generation_state(rt->gen, s)) != NULL; s++) {
        for (int i = 1; i <= luna_loader_webhook_count(L) && n < MAX_CRDS; i++) {
            struct luna_webhook_info info;
            if (luna_webhook_info(L, i, &info) < 0 || strcmp(info.type, "conversion") != 0)
                continue;
            bool seen = false;
            for (size_t k = 0; k < n && !seen; k++)
                seen = strcmp(crds[k], info.name) == 0;
            if (!seen)
                crds[n++] = info.name;  /* the declaration keeps it alive for the call */
        }
    }
    int rc = luna_webhook_manager_set_crds(rt->webhook_mgr, crds, n);
    free(list);
    return rc;
}

/* The entries of the running code's webhooks of type (webhook_manager.h). */
static char *webhook_entries(void *ud, const char *type, const char *ca_bundle, bool *failed)
{
    struct runtime *rt = ud;
    struct luna_webhook_client cc = webhook_client(rt, ca_bundle);
    luna_json_writer w;
    luna_json_writer_init(&w);
    luna_json_write_array_start(&w);
    size_t n = 0;
    lua_State *L;
    for (size_t s = 0; rt->gen && (L = luna_generation_state(rt->gen, s)) != NULL; s++) {
        for (int i = 1; i <= luna_loader_webhook_count(L); i++) {
            bool written = false;
            if (luna_webhook_registration(L, i, type, &cc, &w, &written) == LUNA_ENOMEM) {
                luna_json_writer_free(&w);
                *failed = true;
                return NULL;
            }
            n += written;
        }
    }
    luna_json_write_array_end(&w);
    luna_error err = { 0 };
    char *out = n && luna_json_writer_finish(&w, &err) == 0 ? luna_json_writer_steal(&w, NULL)
                                                            : NULL;
    luna_json_writer_free(&w);
    *failed = n && !out;
    return out;
}

static int webhook_managed_serve(void *ud, const char *cert_pem, const char *key_pem,
                                 luna_error *err)
{
    struct runtime *rt = ud;
    return rt->webhook_srv ? luna_webhook_server_set_certificate(rt->webhook_srv, cert_pem,
                                                                 key_pem, err)
                           : 0;
}

static void webhook_managed_ready(void *ud, bool ok, const char *why)
{
    struct runtime *rt = ud;
    if (rt->health)
        luna_health_set(rt->health, CHECK_WEBHOOKS, ok, why, NULL);
}

/* The host of a URL ("https://[::1]:9443/x" → "::1") into buf, or "". */
static void url_host(const char *url, char *buf, size_t size)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t n;
    if (*p == '[') {
        p++;
        n = strcspn(p, "]");
    } else {
        n = strcspn(p, ":/");
    }
    snprintf(buf, size, "%.*s", (int)n, p);
}

static int start_webhook_manager(struct runtime *rt, luna_error *err)
{
    const struct luna_run_config *cfg = rt->cfg;
    const char *ns = webhook_namespace(rt);
    const char *svc = nonempty(cfg->webhook_service_name) ? cfg->webhook_service_name
                                                          : DEFAULT_WEBHOOK_SERVICE;
    if (nonempty(cfg->webhook_url))
        snprintf(rt->webhook_url, sizeof rt->webhook_url, "%s", cfg->webhook_url);
    else if (cfg->dev_server)
        snprintf(rt->webhook_url, sizeof rt->webhook_url, "https://%s",
                 luna_webhook_server_address(rt->webhook_srv));
    char dns[4][320], host[300] = "";
    snprintf(dns[0], sizeof dns[0], "%s.%s.svc", svc, ns);
    snprintf(dns[1], sizeof dns[1], "%s.%s.svc.cluster.local", svc, ns);
    snprintf(dns[2], sizeof dns[2], "%s.%s", svc, ns);
    snprintf(dns[3], sizeof dns[3], "%s", svc);
    const char *names[5];
    size_t n = 0;
    if (rt->webhook_url[0]) {
        url_host(rt->webhook_url, host, sizeof host);
        if (host[0])
            names[n++] = host;
    }
    for (int i = 0; i < 4; i++)
        names[n++] = dns[i];
    struct luna_webhook_manager_options mo = {
        .kc = rt->kc,
        .namespace_ = ns,
        .secret_name = nonempty(cfg->webhook_secret_name) ? cfg->webhook_secret_name
                                                          : DEFAULT_WEBHOOK_SECRET,
        .configuration_name = nonempty(cfg->webhook_configuration_name)
                                  ? cfg->webhook_configuration_name
                                  : DEFAULT_WEBHOOK_CONFIGURATION,
        .names = names,
        .nnames = n,
        .cert_validity = cfg->webhook_cert_validity > 0 ? cfg->webhook_cert_validity
                                                        : DEFAULT_CERT_VALIDITY_S,
        .ca_validity = cfg->webhook_ca_validity > 0 ? cfg->webhook_ca_validity
                                                    : DEFAULT_CA_VALIDITY_S,
        .entries = webhook_entries,
        .conversion = webhook_conversion,
        .serve = webhook_managed_serve,
        .ready = webhook_managed_ready,
        .ud = rt,
    };
    if (mo.ca_validity < mo.cert_validity)
        mo.ca_validity = mo.cert_validity;
    if (rt->health)
        luna_health_set(rt->health, CHECK_WEBHOOKS, false,
                        "waiting for the managed certificate", NULL);
    int rc = luna_webhook_manager_start(&mo, &rt->webhook_mgr, err);
    if (rc < 0)
        return rc;
    /* the CRDs whose conversion webhook is luna's */
    rc = update_conversion_crds(rt);
    luna_info("managed webhook certificate", "secret", mo.secret_name, "namespace", ns,
              "service", rt->webhook_url[0] ? NULL : svc, "url",
              rt->webhook_url[0] ? rt->webhook_url : NULL, "configuration",
              mo.configuration_name);
    return rc < 0 ? luna_error_set(err, rc, "out of memory") : 0;
}

static const char *webhook_address(const struct luna_run_config *cfg)
{
    return cfg->webhook_bind_address ? cfg->webhook_bind_address
           : cfg->dev_server         ? DEV_ADDRESS
                                     : ":9443";
}

/* Starts the webhook server when the running code declares webhooks and
 * it is not serving yet (at start, or at the reload that adds the first
 * one).  0, or the error (logged by the caller). */
static int ensure_webhook_server(struct runtime *rt, luna_error *err)
{
    const char *addr = webhook_address(rt->cfg);
    if (rt->webhook_srv || strcmp(addr, "0") == 0 || !rt->gen)
        return 0;
    int n = webhook_count(rt);
    if (n == 0)
        return 0;
    int rc;
    struct luna_serving_cert_options co = {
        .dir = rt->cfg->webhook_cert_path, .changed = webhook_cert_changed, .ud = rt,
    };
    if (!rt->webhook_cert && (rc = luna_serving_cert_new(&co, &rt->webhook_cert, err)) < 0) {
        luna_error_wrap(err, "webhook server");
        if (rt->health)
            luna_health_set(rt->health, CHECK_WEBHOOKS, false, err->msg, NULL);
        return rc;
    }
    struct luna_webhook_server_options wo = {
        .address = addr,
        .cert_pem = luna_serving_cert_pem(rt->webhook_cert),
        .key_pem = luna_serving_cert_key_pem(rt->webhook_cert),
        .metrics = rt->registry,
        .calls = { .find = webhook_find, .call = webhook_call, .ud = rt },
        .shadow = rt->cfg->shadow,
        .read_header_timeout = rt->cfg->http_read_header_timeout,
        .read_timeout = rt->cfg->http_read_timeout,
    };
    if ((rc = luna_webhook_server_start(&wo, &rt->webhook_srv, err)) < 0) {
        if (rt->health)
            luna_health_set(rt->health, CHECK_WEBHOOKS, false, err->msg, NULL);
        return rc;
    }
    bool managed = rt->cfg->webhook_cert_mode == LUNA_WEBHOOK_CERT_MANAGED;
    if (managed) {
        /* served with a throwaway self-signed certificate until the managed
         * one is: not ready until then */
        if ((rc = start_webhook_manager(rt, err)) < 0)
            return rc;
    } else if (rt->health) {
        luna_health_set(rt->health, CHECK_WEBHOOKS, true, NULL, NULL);
    }
    char count[16], max[24];
    snprintf(count, sizeof count, "%d", n);
    snprintf(max, sizeof max, "%zu", (size_t)LUNA_WEBHOOK_MAX_BODY);
    luna_info("webhook server listening", "address", luna_webhook_server_address(rt->webhook_srv),
              "cert", managed ? "managed"
                      : luna_serving_cert_self_signed(rt->webhook_cert) ? "self-signed" : "files",
              LUNA_LOG_NUM("webhooks"), count, LUNA_LOG_NUM("max_body"), max,
              LUNA_LOG_BOOL("shadow"), rt->cfg->shadow ? "true" : "false");
    lua_State *L;
    for (size_t s = 0; (L = luna_generation_state(rt->gen, s)) != NULL; s++) {
        for (int i = 1; i <= luna_loader_webhook_count(L); i++) {
            struct luna_webhook_info info;
            if (luna_webhook_info(L, i, &info) == 0)
                luna_info("webhook registered", "webhook", info.name, "path", info.path, "type",
                          info.type, "failure_policy", info.failure_policy);
        }
    }
    return 0;
}

/* Health state, then the metrics and probe servers ("0" turns one off;
 * one address serves both). */
static int setup_servers(struct runtime *rt, luna_error *err)
{
    struct luna_health_options ho = { .loop = luna_loop() };
    int rc = luna_health_new(&ho, &rt->health, err);
    if (rc < 0)
        return rc;
    luna_health_set(rt->health, CHECK_SYNCED, false, "informers not synced yet", NULL);
    if (rt->leader)
        luna_health_set(rt->health, CHECK_LEADER, false, "lease not observed yet", NULL);
    else
        luna_health_set(rt->health, CHECK_LEADER, true, NULL, NULL);
    publish_code_state(rt);
    const char *maddr = metrics_address(rt->cfg);
    const char *haddr = health_address(rt->cfg);
    bool mon = strcmp(maddr, "0") != 0, hon = strcmp(haddr, "0") != 0;
    if (rt->metrics_cert) {
        /* secure metrics, second part: who may scrape, asked of the API server */
        struct luna_metrics_auth_options ao = { .kc = rt->kc, .loop = luna_loop() };
        if ((rc = luna_metrics_auth_new(&ao, &rt->metrics_auth, err)) < 0)
            return luna_error_wrap(err, "metrics server");
    }
    /* One address serves both; two "port 0" addresses are two free ports. */
    size_t ml = strlen(maddr);
    bool any_port = ml >= 2 && strcmp(maddr + ml - 2, ":0") == 0;
    if (mon && hon && strcmp(maddr, haddr) == 0 && !any_port)
        return start_server(rt, maddr, true, true, &rt->metrics_srv, err);
    if (mon && (rc = start_server(rt, maddr, true, false, &rt->metrics_srv, err)) < 0)
        return rc;
    if (hon && (rc = start_server(rt, haddr, false, true, &rt->health_srv, err)) < 0)
        return rc;
    return 0;
}

/* Starts the embedded dev server and writes a kubeconfig for it.  When a
 * seed file cannot be loaded, *failed_seed names it (err says what is
 * wrong with it); otherwise it stays NULL. */
static int start_dev_server(struct runtime *rt, const char **failed_seed, luna_error *err)
{
    char url[128];
    unsigned char raw[32];
    if (RAND_bytes(raw, sizeof raw) != 1)
        return luna_error_set(err, LUNA_EIO, "dev server: no random bytes for its token");
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(rt->dev_token + 2 * i, 3, "%02x", raw[i]);
    int failed = -1;
    int rc = rt->cfg->dev_server_start(rt->cfg->seeds, rt->cfg->nseeds, rt->dev_token, url,
                                       sizeof url, &rt->dev_server, &failed, err);
    if (rc < 0) {
        if (failed >= 0 && failed < rt->cfg->nseeds)
            *failed_seed = rt->cfg->seeds[failed];
        return rc;
    }
    snprintf(rt->dev_kubeconfig, sizeof rt->dev_kubeconfig, "/tmp/luna-dev-XXXXXX");
    int fd = mkstemp(rt->dev_kubeconfig);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        rt->dev_kubeconfig[0] = '\0';
        return luna_error_set(err, LUNA_EIO, "cannot write the dev server's kubeconfig: %m");
    }
    fprintf(f, "apiVersion: v1\nkind: Config\n"
               "clusters: [{name: luna-dev, cluster: {server: \"%s\"}}]\n"
               "users: [{name: luna-dev, user: {}}]\n"
               "contexts: [{name: luna-dev, context: {cluster: luna-dev, user: luna-dev}}]\n"
               "current-context: luna-dev\n", url);
    fclose(f);
    luna_info("dev server listening", "url", url, "kubeconfig", rt->dev_kubeconfig);
    snprintf(rt->dev_url, sizeof rt->dev_url, "%s", url);
    return 0;
}

static int connect_api(struct runtime *rt, luna_error *err)
{
    struct luna_kubeconfig_options kopts;
    luna_kubeconfig_options_from_env(&kopts);
    kopts.path = rt->cfg->kubeconfig;
    if (rt->cfg->dev_server) {
        kopts.path = rt->dev_kubeconfig;
        kopts.context = NULL;
    }
    kopts.context = rt->cfg->context;
    int rc = luna_kubeconfig_load(&kopts, &rt->kcfg, err);
    if (rc < 0)
        return rc;
    luna_kubeconfig_log_loaded(rt->kcfg);
    /* libcurl writes every TLS session's keys to this file. */
    if (getenv("SSLKEYLOGFILE"))
        luna_warn("TLS session keys are written to $SSLKEYLOGFILE: whoever reads it can "
                  "decrypt the API traffic", "file", getenv("SSLKEYLOGFILE"));
    if (!(rt->http = luna_http_client_new(luna_loop(), err)))
        return err->code;
    if ((rc = luna_kube_client_new(rt->kcfg, rt->http, &rt->kc, err)) < 0 ||
        (rc = luna_discovery_new(rt->kc, &rt->disc, err)) < 0 ||
        (rc = luna_informer_factory_new(rt->kc, rt->disc, &rt->factory, err)) < 0)
        return rc;
    luna_informer_factory_set_watch_list(rt->factory, rt->cfg->watch_list);
    luna_informer_factory_set_idle_timeout(rt->factory, rt->cfg->watch_idle_timeout);
    luna_informer_factory_set_min_watch_timeout(rt->factory, rt->cfg->min_watch_timeout);
    if (rt->cfg->watch_list != LUNA_WATCH_LIST_DEFAULT)
        luna_info("informers get their state", "watch_list",
                  luna_watch_list_mode_name(rt->cfg->watch_list));
    return 0;
}

static void teardown(struct runtime *rt)
{
    struct ev_loop *loop = luna_loop();
    ev_timer_stop(loop, &rt->sync_check);
    ev_timer_stop(loop, &rt->grace);
    ev_signal_stop(loop, &rt->sigterm);
    ev_signal_stop(loop, &rt->sigint);
    ev_signal_stop(loop, &rt->sighup);
    ev_signal_stop(loop, &rt->sigusr1);
    luna_dir_watch_free(rt->watch);
    rt->api.observer = (struct luna_api_client_observer){ 0 };
    luna_test_control_stop();
    /* the servers first: closing their connections cancels pending checks */
    luna_httpd_free(rt->metrics_srv);
    luna_httpd_free(rt->health_srv);
    luna_webhook_manager_free(rt->webhook_mgr);
    rt->webhook_mgr = NULL;
    luna_webhook_server_free(rt->webhook_srv);
    rt->webhook_srv = NULL;
    luna_serving_cert_free(rt->webhook_cert);
    rt->webhook_cert = NULL;
    luna_metrics_auth_free(rt->metrics_auth);
    luna_serving_cert_free(rt->metrics_cert);
    free_retiring(rt);
    luna_generation_free(rt->pending);
    rt->pending = NULL;
    candidate_free(rt);
    luna_generation_free(rt->gen);
    rt->gen = NULL;
    rt->api.events = NULL;
    luna_event_memories_free(rt->events);
    rt->events = NULL;
    struct ctl_metrics *m, *tmp;
    HASH_ITER(hh, rt->cms, m, tmp) {
        HASH_DEL(rt->cms, m);
        luna_runtime_metrics_controller_free(m->cm);
        free(m->name);
        free(m);
    }
    luna_leader_free(rt->leader);
    rt->gen_host.sharding = NULL;
    rt->api.write_allow = NULL;
    luna_shard_set_free(rt->shards);
    rt->shards = NULL;
    luna_informer_factory_free(rt->factory);
    luna_discovery_free(rt->disc);
    luna_kube_client_free(rt->kc);
    luna_http_client_free(rt->http);
    luna_kubeconfig_free(rt->kcfg);
    while (rt->informers)
        informer_metrics_free(rt, rt->informers);
    luna_runtime_metrics_free(rt->rm);
    luna_health_free(rt->health);
    if (rt->cfg->dev_server) {
        rt->cfg->dev_server_stop(rt->dev_server);
        rt->dev_server = NULL;
        if (rt->dev_kubeconfig[0])
            unlink(rt->dev_kubeconfig);
    }
}

/* ---- hot reload ----------------------------------------------------------- */

/* The oldest retiring reload, or NULL. */
static struct retiring *oldest_retiring(struct runtime *rt)
{
    struct retiring *r = rt->retiring;
    while (r && r->next)
        r = r->next;
    return r;
}

static void retired_cb(void *ud)
{
    struct retiring *r = ud;
    struct runtime *rt = r->rt;
    ev_timer_stop(luna_loop(), &r->grace);
    luna_debug("old controllers drained");
    r->done = true;
    /* oldest first: a newer reload may own queues an older one still
     * finishes reconciles into */
    for (struct retiring *o = oldest_retiring(rt); o && o->done; o = oldest_retiring(rt))
        free_oldest_retiring(rt);
}

static void retire_grace_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct retiring *r = (struct retiring *)((char *)w - offsetof(struct retiring, grace));
    luna_warn("reload grace period over: abandoning the old code's reconciles");
    retired_cb(r);
}

/* A reload: the directory is loaded and every controller built (acquiring
 * its informers) into a new state while the running controllers go on.  A
 * file that fails to load or validate ends it there ("reload failed", the
 * old code runs on).  Otherwise it waits, as startup does, for discovery to
 * answer for every kind (at once when all are shared with the running
 * reload), then takes over in finish_reload. */
static void reload_now(struct runtime *rt, const char *trigger);
static void try_in_shadow(struct runtime *rt, const char *trigger);

/* Loads the controllers directory into a new Lua state and builds every
 * controller; NULL after logging "reload failed" (the running controllers
 * keep going; informers the broken reload acquired are released with it). */
/* The script API a generation's state gets: the runtime's host, with its
 * client and discovery (NULL until connected, when this runs again). */
static void install_api(lua_State *L, void *ud)
{
    struct runtime *rt = ud;
    rt->api.kc = rt->kc;
    rt->api.disc = rt->disc;
    luna_api_install(L, &rt->api);
}

/* ---- the running code against the directory -------------------------------- */

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Appends msg's first line (a load error's traceback follows it). */
static size_t append_line(char *out, size_t len, size_t size, const char *msg)
{
    size_t n = strcspn(msg, "\n");
    int w = snprintf(out + len, size - len, "%.*s", (int)n, msg);
    return w < 0 ? len : len + (size_t)w >= size ? size - 1 : len + (size_t)w;
}

/* A Warning Event on luna's pod (runtime/pod_event.h), once connected. */
static void report_on_pod(struct runtime *rt, const char *reason, const char *message)
{
    if (!rt->kc)
        return;
    luna_error err = { 0 };
    if (!luna_pod_event_known())
        luna_info("no Event for the load failures: POD_NAME and POD_NAMESPACE are not both set",
                  "reason", reason);
    else if (luna_pod_event_post(rt->kc, reason, message, &err) < 0)
        luna_warn("pod Event not recorded", "reason", reason, "error", err.msg);
}

/* The check and the metrics from rt->stale and the running code's load
 * failures. */
static void publish_code_state(struct runtime *rt)
{
    if (rt->health)
        luna_health_set(rt->health, CHECK_CURRENT, !rt->stale, rt->stale ? rt->stale_why : NULL,
                        NULL);
    if (!rt->rm || !rt->gen)
        return;
    const char *files[64];
    size_t n = 0;
    for (size_t i = 0; i < luna_generation_failure_count(rt->gen) && n < sizeof files / sizeof files[0];
         i++) {
        const char *file, *msg;
        if (luna_generation_failure(rt->gen, i, &file, &msg) == 0)
            files[n++] = base_name(file);
    }
    luna_runtime_metrics_code_state(rt->rm, rt->stale, files, n);
}

/* The running code changed (start, reload done): stale while some files
 * of the directory failed to load into it. */
static void code_loaded(struct runtime *rt)
{
    size_t failed = luna_generation_failure_count(rt->gen);
    rt->stale = failed > 0;
    rt->stale_why[0] = '\0';
    if (failed) {
        size_t size = sizeof rt->stale_why;
        int w = snprintf(rt->stale_why, size, "%zu of %zu controller files failed to load: ",
                         failed, failed + luna_generation_loaded(rt->gen));
        size_t len = w < 0 ? 0 : (size_t)w;
        for (size_t i = 0; i < failed && len + 1 < size; i++) {
            const char *file, *msg;
            if (luna_generation_failure(rt->gen, i, &file, &msg) < 0)
                continue;
            /* the message names the file ("path:line: what"): the base name
             * stands for it, the line number stays */
            const char *rest = strncmp(msg, file, strlen(file)) == 0 ? msg + strlen(file) : msg;
            bool line = rest > msg && rest[0] == ':' && rest[1] >= '0' && rest[1] <= '9';
            if (!line)
                rest += strspn(rest, ": ");
            w = snprintf(rt->stale_why + len, size - len, "%s%s%s", i > 0 ? "; " : "",
                         base_name(file), line ? "" : ": ");
            len = w < 0 || len + (size_t)w >= size ? size - 1 : len + (size_t)w;
            len = append_line(rt->stale_why, len, size, rest);
        }
    }
    publish_code_state(rt);
}

/* A reload was refused: the old code runs on, and is not the directory's. */
static void code_refused(struct runtime *rt, const char *why)
{
    rt->stale = true;
    size_t len = (size_t)snprintf(rt->stale_why, sizeof rt->stale_why,
                                  "reload refused, the old code runs on: ");
    append_line(rt->stale_why, len, sizeof rt->stale_why, why);
    publish_code_state(rt);
    report_on_pod(rt, "ReloadRefused", rt->stale_why);
}

/* With the files that load running (no --require-all), a reload is still
 * refused when a file fails that the running code has (it would stop) or
 * never tried (it is new): it only takes over when every file it lacks
 * failed in the running code too, so a pod started without a broken file
 * still takes changes to the others.  Sets err and returns true when next
 * is refused. */
static bool new_failure(struct runtime *rt, struct luna_generation *next, luna_error *err)
{
    struct luna_generation *R = rt->gen;
    for (size_t i = 0; i < luna_generation_failure_count(next); i++) {
        const char *file, *msg;
        if (luna_generation_failure(next, i, &file, &msg) < 0)
            continue;
        bool known = false;
        for (size_t j = 0; R && !known && j < luna_generation_failure_count(R); j++) {
            const char *f, *m;
            known = luna_generation_failure(R, j, &f, &m) == 0 && strcmp(f, file) == 0;
        }
        if (!known) {
            luna_error_set(err, LUNA_ELUA, "%s", msg);
            return true;
        }
    }
    return false;
}

static struct luna_generation *load_and_build(struct runtime *rt)
{
    luna_error err = { 0 };
    struct luna_generation *next = NULL;
    if (luna_generation_load(rt->lib, rt->cfg->dir, rt->cfg->limits, &rt->gen_host,
                             rt->cfg->require_all, &next, &err) < 0 ||
        new_failure(rt, next, &err) || luna_generation_build(next, rt->factory, &err) < 0) {
        luna_generation_free(next);
        luna_error("reload failed", "dir", rt->cfg->dir, "error", err.msg);
        luna_runtime_metrics_reload(rt->rm, LUNA_RELOAD_FAILURE, ev_time());
        code_refused(rt, err.msg);
        return NULL;
    }
    return next;
}

static void reload(struct runtime *rt, const char *trigger)
{
    if (rt->stopping)
        return;
    if (rt->cfg->shadow_reload > 0)
        try_in_shadow(rt, trigger);
    else
        reload_now(rt, trigger);
}

static void reload_now(struct runtime *rt, const char *trigger)
{
    if (rt->stopping)
        return;
    luna_info("reload requested", "trigger", trigger);
    if (rt->pending) {
        /* The newer files win; the older reload never ran. */
        luna_info("reload superseded");
        luna_generation_free(rt->pending);
        rt->pending = NULL;
    }
    struct luna_generation *next = load_and_build(rt);
    if (!next)
        return;
    rt->pending = next;
    schedule_check(rt);
}

/* ---- reloads tried in shadow (--shadow-reload) ---------------------------- */

/* core.runtime.shadow = true in the candidate's state: lua/luna/api.lua
 * then logs each write with what it would change (the dry run itself is
 * the controllers' flag, enforced in api/client.c).  The candidate gets no
 * event_store: the host's store of a controller is the live code's memory
 * of the Events it recorded, and a candidate's luna.event would bump and
 * then forget the live entry (its dry run recorded nothing), so the live
 * code's next Event would be created anew instead of counted; without it
 * the candidate's recorder keeps a memory of its own in its state. */
static void set_state_shadow(lua_State *L)
{
    int top = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "luna.core");
    if (lua_pcall(L, 1, 1, 0) == 0 && lua_istable(L, -1)) {
        lua_getfield(L, -1, "runtime");
        if (lua_istable(L, -1)) {
            lua_pushboolean(L, 1);
            lua_setfield(L, -2, "shadow");
            lua_pushnil(L);
            lua_setfield(L, -2, "event_store");
        }
    }
    lua_settop(L, top);
}

static void candidate_free(struct runtime *rt)
{
    ev_timer_stop(luna_loop(), &rt->candidate_poll);
    ev_timer_stop(luna_loop(), &rt->candidate_end);
    luna_generation_free(rt->candidate); /* abandons its reconciles: all dry runs */
    rt->candidate = NULL;
}

/* Starts each candidate controller whose informers have synced, with
 * every cached key queued (its own queue: the live code's is untouched). */
static void candidate_poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct runtime *rt = w->data;
    if (!rt->candidate || (rt->leader && !rt->leading))
        return;
    for (size_t i = 0; i < luna_generation_count(rt->candidate); i++) {
        struct luna_controller *c = luna_generation_controller(rt->candidate, i);
        if (!luna_controller_started(c) && luna_controller_synced(c)) {
            luna_controller_start(c);
            luna_controller_enqueue_all(c);
        }
    }
}

struct report {
    char keys[768];
    size_t len, n;
    const char *controller;
};

static void report_key(void *ud, const char *key, const char *what)
{
    struct report *r = ud;
    luna_info("reload shadow disagreement", "controller", r->controller, "key", key, "write", what);
    if (r->n++ < 10 && r->len + 1 < sizeof r->keys) {
        int n = snprintf(r->keys + r->len, sizeof r->keys - r->len, "%s%s", r->len ? "," : "", key);
        if (n > 0)
            r->len += (size_t)n < sizeof r->keys - r->len ? (size_t)n : sizeof r->keys - r->len - 1;
    }
}

/* The window is over: one report per controller, then the reload goes
 * live as a plain one (loaded afresh: the candidate's state ran in shadow). */
static void candidate_end_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct runtime *rt = w->data;
    struct luna_generation *g = rt->candidate;
    size_t total = 0;
    for (size_t i = 0; g && i < luna_generation_count(g); i++) {
        struct luna_controller *c = luna_generation_controller(g, i);
        struct report r = { .controller = luna_controller_name(c) };
        size_t dropped = 0;
        size_t n = luna_controller_shadow_keys(c, report_key, &r, &dropped);
        char count[24], errors[24], more[24];
        snprintf(count, sizeof count, "%zu", n + dropped);
        snprintf(errors, sizeof errors, "%lu", luna_controller_errors(c));
        snprintf(more, sizeof more, "%zu", n + dropped > 10 ? n + dropped - 10 : 0);
        luna_log(n + dropped || luna_controller_errors(c) ? LUNA_LOG_WARN : LUNA_LOG_INFO,
                 "reload shadow report", "controller", luna_controller_name(c),
                 LUNA_LOG_BOOL("started"), luna_controller_started(c) ? "true" : "false",
                 LUNA_LOG_NUM("disagreeing"), count, LUNA_LOG_NUM("errors"), errors, "keys",
                 r.len ? r.keys : NULL, LUNA_LOG_NUM("more"), n + dropped > 10 ? more : NULL, NULL);
        total += n + dropped;
    }
    char count[24];
    snprintf(count, sizeof count, "%zu", total);
    luna_info("reload shadow done", LUNA_LOG_NUM("disagreeing"), count);
    candidate_free(rt);
    reload_now(rt, "shadow done");
}

/* Loads and builds the new code as a candidate whose every write is a dry
 * run, beside the live code, for cfg->shadow_reload seconds. */
static void try_in_shadow(struct runtime *rt, const char *trigger)
{
    luna_info("reload requested", "trigger", trigger, LUNA_LOG_BOOL("shadow"), "true");
    if (rt->candidate) {
        luna_info("reload shadow superseded");
        candidate_free(rt);
    }
    struct luna_generation *next = load_and_build(rt);
    if (!next)
        return;
    for (size_t i = 0; i < luna_generation_loaded(next); i++)
        set_state_shadow(luna_generation_state(next, i));
    for (size_t i = 0; i < luna_generation_count(next); i++)
        luna_controller_set_shadow(luna_generation_controller(next, i), true);
    rt->candidate = next;
    char secs[32];
    snprintf(secs, sizeof secs, "%g", rt->cfg->shadow_reload);
    luna_info("reload shadow started", LUNA_LOG_NUM("seconds"), secs);
    ev_timer_set(&rt->candidate_end, rt->cfg->shadow_reload, 0.);
    ev_timer_start(luna_loop(), &rt->candidate_end);
    ev_timer_set(&rt->candidate_poll, 0., SYNC_CHECK_S);
    ev_timer_start(luna_loop(), &rt->candidate_poll);
}

static bool keep_events_of(void *ud, const char *controller)
{
    return luna_generation_find(ud, controller) != NULL;
}

/* The pending reload takes over: queues move to it, the old controllers
 * retire, and the result is logged ("reload done", result=success, or at
 * error result=unresolved naming each controller whose kind is not served
 * or could not be discovered: those wait, reported, while the others run).
 * Its controllers start afterwards, as their sources sync (check_cb). */
static void finish_reload(struct runtime *rt)
{
    struct ev_loop *loop = luna_loop();
    struct luna_generation *next = rt->pending;
    rt->pending = NULL;
    struct luna_generation *old = rt->gen;
    size_t changed = luna_generation_adopt(next, old);
    wire_metrics(rt, next, old);
    rt->gen = next;
    rt->generation++;

    struct retiring *r = calloc(1, sizeof *r);
    if (!r) {
        luna_generation_free(old); /* abandons its reconciles: their keys are requeued */
    } else {
        r->rt = rt;
        r->gen = old;
        r->next = rt->retiring;
        rt->retiring = r;
        double grace = rt->cfg->grace_period > 0 ? rt->cfg->grace_period : DEFAULT_GRACE_S;
        ev_timer_init(&r->grace, retire_grace_cb, grace, 0.);
        ev_timer_start(loop, &r->grace);
        luna_generation_retire(old, false, retired_cb, r);
    }
    char n[24], ch[24], gen[24], unresolved[512];
    snprintf(n, sizeof n, "%zu", luna_generation_count(next));
    snprintf(ch, sizeof ch, "%zu", changed);
    snprintf(gen, sizeof gen, "%lu", rt->generation);
    size_t len = 0;
    unresolved[0] = '\0';
    for (size_t i = 0; i < luna_generation_count(next); i++) {
        struct luna_controller *c = luna_generation_controller(next, i);
        struct luna_controller_status st;
        luna_controller_status(c, &st);
        if (!st.not_served && !st.unresolved)
            continue;
        if (len + 1 >= sizeof unresolved)
            break;
        int w = snprintf(unresolved + len, sizeof unresolved - len, "%s%s: ", len ? "; " : "",
                         luna_controller_name(c));
        if (w < 0 || (size_t)w >= sizeof unresolved - len)
            break;
        len += (size_t)w;
        len += luna_controller_describe_waiting(c, true, unresolved + len,
                                                sizeof unresolved - len);
    }
    /* Controllers that are gone take their Event memory with them. */
    luna_event_memories_retain(rt->events, keep_events_of, next);
    enum luna_reload_result result = len ? LUNA_RELOAD_UNRESOLVED : LUNA_RELOAD_SUCCESS;
    luna_log(len ? LUNA_LOG_ERROR : LUNA_LOG_INFO, "reload done", LUNA_LOG_NUM("controllers"), n,
             LUNA_LOG_NUM("changed"), ch, LUNA_LOG_NUM("generation"), gen, "result",
             luna_reload_result_name(result), "unresolved", len ? unresolved : NULL, NULL);
    luna_runtime_metrics_reload(rt->rm, result, ev_time());
    code_loaded(rt);
    luna_error werr = { 0 };
    if (ensure_webhook_server(rt, &werr) < 0)
        luna_error("webhook server failed", "error", werr.msg);
    /* the configurations and the converters' CRDs follow the new webhooks */
    if (update_conversion_crds(rt) < 0)
        luna_error("managed webhook certificate failed", "error",
                   "the converters' CRDs: out of memory");
    luna_webhook_manager_sync(rt->webhook_mgr);
}

static void sighup_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    reload(w->data, "SIGHUP");
}

static void on_dir_changed(void *ud) { reload(ud, "watch"); }

/* ---- test control (`luna test`) ------------------------------------------ */

static struct luna_generation *tc_current(void *ud) { return ((struct runtime *)ud)->gen; }
static struct luna_informer_factory *tc_factory(void *ud) { return ((struct runtime *)ud)->factory; }
static bool tc_reload_pending(void *ud) { return ((struct runtime *)ud)->pending != NULL; }
static struct luna_kube_client *tc_client(void *ud) { return ((struct runtime *)ud)->kc; }
static uint64_t tc_server_rv(void *ud)
{
    struct runtime *rt = ud;
    return rt->cfg->dev_server_revision ? rt->cfg->dev_server_revision(rt->dev_server) : 0;
}

static bool tc_server_busy(void *ud)
{
    struct runtime *rt = ud;
    return rt->cfg->dev_server_settled && !rt->cfg->dev_server_settled(rt->dev_server);
}

static int tc_seed(void *ud, const char *text, size_t len, luna_error *err)
{
    struct runtime *rt = ud;
    if (!rt->cfg->dev_server_seed || !rt->dev_server)
        return luna_error_set(err, LUNA_EINVAL, "no embedded dev server to seed");
    return rt->cfg->dev_server_seed(rt->dev_server, text, len, err);
}

static char *tc_documents(void *ud, const char *text, size_t len, luna_error *err)
{
    struct runtime *rt = ud;
    if (!rt->cfg->documents) {
        luna_error_set(err, LUNA_EINVAL, "no manifest reader");
        return NULL;
    }
    return rt->cfg->documents(text, len, err);
}

static int tc_admit(void *ud, const char *path, const char *body, size_t len,
                    struct luna_textbuf *out, const char **ctype, luna_error *err)
{
    struct runtime *rt = ud;
    if (!rt->webhook_srv)
        return luna_error_set(err, LUNA_EINVAL, "the webhook server does not serve (no file "
                              "declares a webhook, or --webhook-bind-address=0)");
    return luna_webhook_server_handle(rt->webhook_srv, path, body, len, out, ctype);
}

static bool tc_webhook_server(void *ud, const char **address, const char **cert_pem)
{
    struct runtime *rt = ud;
    if (!rt->webhook_srv)
        return false;
    *address = luna_webhook_server_address(rt->webhook_srv);
    *cert_pem = rt->webhook_cert ? luna_serving_cert_pem(rt->webhook_cert) : NULL;
    return true;
}

static int setup_test_control(struct runtime *rt, luna_error *err)
{
    struct luna_test_control_source src = {
        .current = tc_current, .factory = tc_factory, .server_rv = tc_server_rv, .server_busy = tc_server_busy, .seed = tc_seed,
        .documents = tc_documents, .admit = tc_admit, .webhook_server = tc_webhook_server,
        .reload_pending = tc_reload_pending, .client = tc_client, .url = rt->dev_url, .ud = rt,
    };
    return luna_test_control_start(&src, err);
}

static int run(const struct luna_run_config *cfg);

/* How long the last lines may wait for a slow log reader at exit. */
#define LOG_EXIT_WAIT_S 1.0

/* The operator lifted the time budget (or set it past what a liveness
 * probe waits): say once what that allows. */
static void warn_unbounded_scripts(const struct luna_run_config *cfg)
{
    struct luna_watchdog_config wd = cfg->limits ? *cfg->limits : luna_watchdog_config_default();
    char secs[32];
    snprintf(secs, sizeof secs, "%g", wd.limits.seconds);
    if (wd.limits.seconds <= 0 && wd.limits.instructions <= 0)
        luna_warn("script code runs without budgets (--reconcile-instruction-limit 0, "
                  "--reconcile-time-limit 0): a stretch that never yields holds the loop, "
                  "/healthz and every controller until SIGTERM's grace period ends it");
    else if (wd.limits.seconds <= 0 || wd.limits.seconds >= LUNA_HEALTH_DEFAULT_TIMEOUT)
        luna_warn("script code may hold the loop longer than /healthz tolerates",
                  "reconcile_time_limit", wd.limits.seconds > 0 ? secs : "0 (none)",
                  "healthz_timeout", "10s");
}

int luna_runtime_run(const struct luna_run_config *cfg)
{
    /* From here on no log line waits for the reader (base/log.h): a
     * script that prints a lot to a stalled reader loses lines, counted,
     * not the loop. */
    luna_log_attach(luna_loop());
    int code = run(cfg);
    luna_log_detach(LOG_EXIT_WAIT_S);
    return code;
}

static int run(const struct luna_run_config *cfg)
{
    struct runtime rt = { .cfg = cfg };
    struct ev_loop *loop = luna_loop();
    luna_error err = { 0 };
    luna_event_latency_init();
    /* Signals are caught from the start: a SIGTERM, SIGINT or SIGHUP that
     * arrives while the controllers load or an exec plugin runs waits for
     * the loop instead of killing the process with the default action. */
    ev_timer_init(&rt.grace, grace_cb, 0., 0.);
    rt.grace.data = &rt;
    ev_timer_init(&rt.candidate_poll, candidate_poll_cb, 0., 0.);
    rt.candidate_poll.data = &rt;
    ev_timer_init(&rt.candidate_end, candidate_end_cb, 0., 0.);
    rt.candidate_end.data = &rt;
    ev_signal_init(&rt.sigterm, signal_cb, SIGTERM);
    rt.sigterm.data = &rt;
    ev_signal_init(&rt.sigint, signal_cb, SIGINT);
    rt.sigint.data = &rt;
    ev_signal_init(&rt.sighup, sighup_cb, SIGHUP);
    rt.sighup.data = &rt;
    stop_grace = cfg->grace_period > 0 ? cfg->grace_period : DEFAULT_GRACE_S;
    atomic_store(&stop_signals, 0);
    luna_watchdog_stop_all_clear();
    ev_signal_start(loop, &rt.sigterm);
    ev_signal_start(loop, &rt.sigint);
    ev_signal_start(loop, &rt.sighup);
    catch_stop_signal(SIGTERM);
    catch_stop_signal(SIGINT);
    warn_unbounded_scripts(cfg);
    if (luna_loader_find_lib(cfg->argv0, &rt.lib, &err) < 0 ||
        luna_event_memories_new(&rt.events, &err) < 0) {
        luna_error("startup failed", "error", err.msg);
        return 1;
    }
    rt.api.events = rt.events;
    if (cfg->test_control) {
        luna_test_control_enable(cfg->fake_clock);
        rt.api.observer = *luna_test_control_call_observer();
    }
    rt.api.shadow = cfg->shadow;
    if (cfg->shadow)
        luna_warn("shadow mode: every write is sent as a server-side dry run (dryRun=All) and "
                  "logged as \"shadow write\"; nothing is written");
    /* No shared budget: each reload's states share one of their own
     * (generation.h), so a reload is loaded beside the running one under
     * its own --lua-memory-limit, as when a reload was one state. */
    rt.gen_host = (struct luna_generation_host){
        .install_api = install_api, .ud = &rt, .clock = luna_test_control_clock(),
    };
    if (luna_generation_load(rt.lib, cfg->dir, cfg->limits, &rt.gen_host, cfg->require_all,
                             &rt.gen, &err) < 0) {
        luna_error("controllers failed to load", "dir", cfg->dir, "error", err.msg);
        teardown(&rt);
        return 1;
    }
    rt.generation = 1;
    if (setup_metrics_cert(&rt, &err) < 0) {
        luna_error("startup failed", "error", err.msg);
        teardown(&rt);
        return 1;
    }
    char count[16];
    snprintf(count, sizeof count, "%zu", luna_generation_declared(rt.gen));
    luna_info("controllers loaded", "dir", cfg->dir, LUNA_LOG_NUM("count"), count);
    code_loaded(&rt);
    if (rt.stale) {
        /* Loud: the pod runs, but not all of its code (--require-all exits). */
        char failed[16], files[512];
        size_t len = 0;
        files[0] = '\0';
        for (size_t i = 0; i < luna_generation_failure_count(rt.gen); i++) {
            const char *file, *msg;
            if (luna_generation_failure(rt.gen, i, &file, &msg) == 0) {
                int w = snprintf(files + len, sizeof files - len, "%s%s", len ? "," : "",
                                 base_name(file));
                len = w < 0 || len + (size_t)w >= sizeof files ? sizeof files - 1 : len + (size_t)w;
            }
        }
        snprintf(failed, sizeof failed, "%zu", luna_generation_failure_count(rt.gen));
        luna_error("controllers started without some files", LUNA_LOG_NUM("failed"), failed, "files", files,
                   "why", rt.stale_why);
    }

    const char *failed_seed = NULL;
    if (cfg->dev_server && start_dev_server(&rt, &failed_seed, &err) < 0) {
        /* named here: a seed is no part of the kubeconfig */
        if (failed_seed)
            luna_error("seed failed", "seed", failed_seed, "error", err.msg);
        else
            luna_error("dev server failed", "error", err.msg);
        teardown(&rt);
        return 1;
    }
    if (connect_api(&rt, &err) < 0) {
        luna_error("kubeconfig failed", "error", err.msg);
        teardown(&rt);
        return 1;
    }
    luna_generation_connect(rt.gen);
    if (rt.stale)
        report_on_pod(&rt, "ControllerLoadFailed", rt.stale_why);
    if (cfg->shards && setup_shards(&rt, &err) < 0) {
        luna_error("startup failed", "error", err.msg);
        teardown(&rt);
        return 1;
    }
    if (luna_generation_build(rt.gen, rt.factory, &err) < 0) {
        luna_error("controller setup failed", "error", err.msg);
        teardown(&rt);
        return 1;
    }
    if (setup_metrics(&rt, &err) < 0 || (cfg->leader_elect && setup_leader(&rt, &err) < 0) ||
        setup_servers(&rt, &err) < 0 || ensure_webhook_server(&rt, &err) < 0 ||
        (cfg->test_control && setup_test_control(&rt, &err) < 0)) {
        luna_error("startup failed", "error", err.msg);
        teardown(&rt);
        return 1;
    }

    ev_timer_init(&rt.sync_check, check_cb, SYNC_CHECK_S, SYNC_CHECK_S);
    rt.sync_check.data = &rt;
    ev_timer_start(loop, &rt.sync_check);
    ev_signal_init(&rt.sigusr1, latency_signal_cb, SIGUSR1);
    if (luna_event_latency_on)
        ev_signal_start(loop, &rt.sigusr1);
    if (cfg->watch && luna_dir_watch_new(cfg->dir, 0.5, on_dir_changed, &rt, &rt.watch, &err) < 0) {
        luna_error("startup failed", "error", err.msg);
        teardown(&rt);
        return 1;
    }
    if (rt.leader)
        luna_leader_start(rt.leader);
    if (rt.shards) {
        luna_shard_set_set_metrics(rt.shards, rt.rm);
        luna_shard_set_start(rt.shards);
    }

    ev_run(loop, 0);
    luna_event_latency_report();
    luna_event_latency_reset();
    int code = rt.exit_code;
    teardown(&rt);
    return code;
}
