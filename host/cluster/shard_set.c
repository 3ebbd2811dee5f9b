/* shard_set.c — see shard_set.h.
 *
 * One concept over ~900 lines: membership, claims and the hand-off are
 * one protocol over the same Leases and the same state.
 */
#include "cluster/shard_set.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/json_writer.h"
#include "base/log.h"
#include "cluster/lease.h"
#include "serve/runtime_metrics.h"

#define MAX_RANGES 64
#define MAX_PEERS 256
#define LEAVE_TRIES 5
/* A starting replica grows only from its JOIN_LISTS-th look at the
 * members on: replicas started together (a Deployment's rollout) see each
 * other before the first of them claims, and lists, the whole space. */
#define JOIN_LISTS 2
/* How often a drain is looked at while it waits for reconciles to end. */
#define DRAIN_POLL 0.02

/* ---- sets of hash ranges ------------------------------------------------------ */

/* Sorted, disjoint, non-adjacent inclusive ranges [a, b]. */
struct ranges {
    size_t n;
    struct { uint64_t a, b; } r[MAX_RANGES];
};

static void ranges_add(struct ranges *x, uint64_t a, uint64_t b)
{
    /* insert keeping order, merging overlaps and neighbours */
    struct ranges out = { 0 };
    bool placed = false;
    for (size_t i = 0; i <= x->n; i++) {
        uint64_t ca, cb;
        if (i < x->n && (placed || x->r[i].a < a)) {
            ca = x->r[i].a;
            cb = x->r[i].b;
        } else if (!placed) {
            ca = a;
            cb = b;
            placed = true;
            i--; /* this slot's own range comes next */
        } else {
            break;
        }
        if (out.n && (ca <= out.r[out.n - 1].b ||
                      (out.r[out.n - 1].b != UINT64_MAX && ca == out.r[out.n - 1].b + 1))) {
            if (cb > out.r[out.n - 1].b)
                out.r[out.n - 1].b = cb;
        } else if (out.n < MAX_RANGES) {
            out.r[out.n].a = ca;
            out.r[out.n].b = cb;
            out.n++;
        }
    }
    *x = out;
}

static void ranges_union(struct ranges *x, const struct ranges *y)
{
    for (size_t i = 0; i < y->n; i++)
        ranges_add(x, y->r[i].a, y->r[i].b);
}

static struct ranges ranges_intersect(const struct ranges *x, const struct ranges *y)
{
    struct ranges out = { 0 };
    for (size_t i = 0; i < x->n; i++)
        for (size_t j = 0; j < y->n; j++) {
            uint64_t a = x->r[i].a > y->r[j].a ? x->r[i].a : y->r[j].a;
            uint64_t b = x->r[i].b < y->r[j].b ? x->r[i].b : y->r[j].b;
            if (a <= b)
                ranges_add(&out, a, b);
        }
    return out;
}

static struct ranges ranges_subtract(const struct ranges *x, const struct ranges *y)
{
    struct ranges out = *x;
    for (size_t j = 0; j < y->n; j++) {
        struct ranges next = { 0 };
        for (size_t i = 0; i < out.n; i++) {
            uint64_t a = out.r[i].a, b = out.r[i].b, ya = y->r[j].a, yb = y->r[j].b;
            if (yb < a || ya > b) {
                ranges_add(&next, a, b);
                continue;
            }
            if (ya > a)
                ranges_add(&next, a, ya - 1);
            if (yb < b)
                ranges_add(&next, yb + 1, b);
        }
        out = next;
    }
    return out;
}

static bool ranges_equal(const struct ranges *x, const struct ranges *y)
{
    if (x->n != y->n)
        return false;
    for (size_t i = 0; i < x->n; i++)
        if (x->r[i].a != y->r[i].a || x->r[i].b != y->r[i].b)
            return false;
    return true;
}

/* y ⊆ x */
static bool ranges_contain(const struct ranges *x, const struct ranges *y)
{
    struct ranges rest = ranges_subtract(y, x);
    return rest.n == 0;
}

static bool ranges_has(const struct ranges *x, uint64_t h)
{
    for (size_t i = 0; i < x->n; i++)
        if (h >= x->r[i].a && h <= x->r[i].b)
            return true;
    return false;
}

/* The fraction of the hash space held. */
static double ranges_fraction(const struct ranges *x)
{
    double sum = 0;
    for (size_t i = 0; i < x->n; i++)
        sum += (double)(x->r[i].b - x->r[i].a) + 1.0;
    return sum / 18446744073709551616.0;
}

/* A selector of x (NULL when x is empty or on ENOMEM). */
static struct luna_shard_selector *ranges_selector(const struct ranges *x,
                                                   enum luna_shard_field f)
{
    if (x->n == 0)
        return NULL;
    struct luna_shard_range r[MAX_RANGES];
    for (size_t i = 0; i < x->n; i++)
        r[i] = (struct luna_shard_range){ f, x->r[i].a, x->r[i].b };
    struct luna_shard_selector *s = NULL;
    luna_shard_new(r, x->n, &s, NULL);
    return s;
}

/* The ranges of a selector's text over field f; LUNA_EINVAL if it does not
 * parse or names another field. */
static int ranges_parse(const char *text, enum luna_shard_field f, struct ranges *out)
{
    memset(out, 0, sizeof *out);
    struct luna_shard_selector *s = NULL;
    luna_error err = { 0 };
    if (luna_shard_parse(text, &s, &err) < 0)
        return LUNA_EINVAL;
    int rc = 0;
    for (size_t i = 0; s && i < s->n; i++) {
        if (s->ranges[i].field != f)
            rc = LUNA_EINVAL;
        ranges_add(out, s->ranges[i].start, s->ranges[i].last);
    }
    luna_shard_free(s);
    return rc;
}

/* ---- the set ------------------------------------------------------------------- */

enum step {
    STEP_NONE,
    STEP_RENEW,        /* PUT (or POST) our Lease */
    STEP_RENEW_GET,    /* our Lease after a conflict */
    STEP_CLAIMS,       /* GET the claims object */
    STEP_CLAIMS_CREATE,
    STEP_LIST,         /* the member Leases */
    STEP_CAS,          /* PUT the claims object */
    STEP_LEAVE_GET,
    STEP_LEAVE_CAS,
    STEP_LEAVE_DELETE,
};

/* What we know of another member (or of an entry of the claims object
 * whose Lease we have not seen). */
struct peer {
    char identity[LUNA_LEASE_MAX_IDENTITY];
    char rv[32];            /* its Lease's resourceVersion; "" absent */
    double duration;        /* leaseDurationSeconds as written */
    double changed;         /* our clock when rv last changed */
    bool listed;            /* in the last LIST */
};

/* One entry of the claims object. */
struct claim_entry {
    char identity[LUNA_LEASE_MAX_IDENTITY];
    struct ranges r;
};

struct luna_shard_set {
    struct luna_kube_client *kc;
    char *set, *ns, *identity;
    char lease_name[96], claims_name[80], collection[320];
    char lease_path[512], claims_path[512], list_path[512];
    enum luna_shard_field field;
    double lease_duration, renew_deadline, retry_period, margin, write_timeout, unacked_timeout;
    struct ev_loop *loop;
    struct luna_runtime_metrics *metrics;
    struct luna_shard_set_options o;   /* callbacks */

    enum step step;
    struct luna_kube_request *req;
    double sent;                       /* our clock when the request in flight was sent */
    char lease_rv[32];                 /* our Lease's resourceVersion ("": unknown) */
    char acquire[LUNA_LEASE_MAX_TIME];
    bool renew_retried;

    double last_renew;                 /* send time of the last successful renewal; -inf */
    bool confirmed;                    /* a CAS succeeded since freshness began */
    bool stopped_logged;
    struct ranges claim, active;       /* confirmed claim; what owns() answers for */
    struct ranges writing;             /* what the CAS in flight makes ours */
    struct luna_shard_selector *informer_shard; /* claim's selector, or the one point */
    bool draining;
    unsigned long drain_mark;          /* reconciles up to this serial must end first */

    char claims_rv[32];                /* of the claims object as last read */
    struct claim_entry *entries;       /* as last read */
    size_t nentries;
    struct peer *peers;
    size_t npeers;
    size_t members;                    /* live members at the last decision, us included */
    unsigned lists;                    /* member lists read since start */

    bool frozen, leaving;
    int leave_tries;
    void (*leave_done)(void *ud);
    void *leave_ud;

    ev_timer round_timer, stop_timer, drain_timer;
};

static double now_of(const struct luna_shard_set *s)
{
    (void)s;
    return luna_clock_now(luna_clock_monotonic());
}

static bool fresh(const struct luna_shard_set *s)
{
    return now_of(s) < s->last_renew + s->renew_deadline;
}

static void report(struct luna_shard_set *s)
{
    if (s->metrics)
        luna_runtime_metrics_shard(s->metrics, ranges_fraction(&s->active), s->active.n,
                                   s->members);
}

static void text_of(const struct ranges *r, enum luna_shard_field f, char *buf, size_t size)
{
    struct luna_shard_selector *sel = ranges_selector(r, f);
    if (!sel)
        snprintf(buf, size, "(none)");
    else
        luna_shard_print(sel, buf, size);
    luna_shard_free(sel);
}

/* ---- requests ---------------------------------------------------------------------- */

static void on_done(void *ud, const luna_http_response *resp, const luna_http_failure *fail);
static void round_end(struct luna_shard_set *s);
static void leave_step(struct luna_shard_set *s);

static int send_req(struct luna_shard_set *s, enum step step, const char *method,
                    const char *path, char *body, size_t len)
{
    luna_error err = { 0 };
    struct luna_kube_request_options ro = {
        .method = method, .path = path, .body = body, .body_len = len,
        .timeout = s->renew_deadline, .max_response_bytes = LUNA_LEASE_MAX_BYTES,
        .on_done = on_done, .ud = s,
    };
    s->step = step;
    s->sent = now_of(s);
    s->req = luna_kube_request_start(s->kc, &ro, &err);
    free(body);
    if (!s->req) {
        s->step = STEP_NONE;
        luna_warn("shard set request failed", "set", s->set, "error", err.msg);
        return LUNA_EIO;
    }
    return 0;
}

static void begin_object(luna_json_writer *w, struct luna_shard_set *s, const char *name,
                         const char *rv, bool member_label)
{
    luna_json_write_object_start(w);
    luna_lease_put_string(w, "apiVersion", "coordination.k8s.io/v1");
    luna_lease_put_string(w, "kind", "Lease");
    luna_json_write_key(w, "metadata", 8);
    luna_json_write_object_start(w);
    luna_lease_put_string(w, "name", name);
    luna_lease_put_string(w, "namespace", s->ns);
    if (rv && *rv)
        luna_lease_put_string(w, "resourceVersion", rv);
    if (member_label) {
        luna_json_write_key(w, "labels", 6);
        luna_json_write_object_start(w);
        luna_lease_put_string(w, LUNA_SHARD_SET_LABEL, s->set);
        luna_json_write_object_end(w);
    }
}

static char *finish_body(luna_json_writer *w, size_t *len)
{
    char *out = NULL;
    if (luna_json_writer_finish(w, NULL) == 0)
        out = luna_json_writer_steal(w, len);
    luna_json_writer_free(w);
    return out;
}

static void renew(struct luna_shard_set *s)
{
    char now[LUNA_LEASE_MAX_TIME];
    luna_lease_micro_time(now, sizeof now);
    if (!s->acquire[0])
        snprintf(s->acquire, sizeof s->acquire, "%s", now);
    luna_json_writer w;
    luna_json_writer_init(&w);
    begin_object(&w, s, s->lease_name, s->lease_rv, true);
    luna_json_write_object_end(&w);
    luna_json_write_key(&w, "spec", 4);
    luna_lease_write_spec(&w, s->identity, (long)ceil(s->lease_duration), s->acquire, now, 0);
    luna_json_write_object_end(&w);
    size_t len = 0;
    char *body = finish_body(&w, &len);
    if (!body || send_req(s, STEP_RENEW, s->lease_rv[0] ? "PUT" : "POST",
                          s->lease_rv[0] ? s->lease_path : s->collection, body, len) < 0)
        round_end(s);
}

/* The claims object with entries[] (minus `drop`, plus ours = mine). */
static char *claims_body(struct luna_shard_set *s, const struct ranges *mine, bool leave,
                         size_t *len)
{
    luna_json_writer inner, w;
    luna_json_writer_init(&inner);
    luna_json_write_object_start(&inner);
    for (size_t i = 0; i < s->nentries; i++) {
        struct claim_entry *e = &s->entries[i];
        if (strcmp(e->identity, s->identity) == 0 || e->r.n == 0)
            continue;
        char text[4096];
        text_of(&e->r, s->field, text, sizeof text);
        luna_lease_put_string(&inner, e->identity, text);
    }
    if (!leave && mine->n) {
        char text[4096];
        text_of(mine, s->field, text, sizeof text);
        luna_lease_put_string(&inner, s->identity, text);
    }
    luna_json_write_object_end(&inner);
    size_t ilen = 0;
    char *itext = finish_body(&inner, &ilen);
    if (!itext)
        return NULL;
    luna_json_writer_init(&w);
    begin_object(&w, s, s->claims_name, s->claims_rv, false);
    luna_json_write_key(&w, "annotations", 11);
    luna_json_write_object_start(&w);
    luna_json_write_key(&w, LUNA_SHARD_CLAIMS_ANNOTATION, strlen(LUNA_SHARD_CLAIMS_ANNOTATION));
    luna_json_write_string(&w, itext, ilen);
    luna_json_write_object_end(&w);
    luna_json_write_object_end(&w);
    luna_json_write_key(&w, "spec", 4);
    luna_json_write_object_start(&w);
    luna_json_write_object_end(&w);
    luna_json_write_object_end(&w);
    free(itext);
    return finish_body(&w, len);
}

/* ---- reading ------------------------------------------------------------------------ */

struct claims_scan {
    struct luna_shard_set *s;
    char key[LUNA_LEASE_MAX_IDENTITY];
    bool bad;
};

static int claims_event(void *ud, const luna_json_event *ev, luna_error *err)
{
    struct claims_scan *cs = ud;
    struct luna_shard_set *s = cs->s;
    if (ev->depth == 1 && ev->type == LUNA_JSON_KEY) {
        snprintf(cs->key, sizeof cs->key, "%.*s", (int)ev->len, ev->str);
    } else if (ev->depth == 1 && ev->type == LUNA_JSON_STRING) {
        if (s->nentries >= MAX_PEERS)
            return 0;
        char text[4096];
        snprintf(text, sizeof text, "%.*s", (int)ev->len, ev->str);
        struct claim_entry *e = &s->entries[s->nentries];
        snprintf(e->identity, sizeof e->identity, "%s", cs->key);
        if (ranges_parse(text, s->field, &e->r) < 0)
            cs->bad = true;
        else
            s->nentries++;
    } else if (ev->depth >= 1 && ev->type != LUNA_JSON_KEY && ev->type != LUNA_JSON_OBJECT_END) {
        cs->bad = true;
    }
    return 0;
}

/* Takes in the claims object; LUNA_EPROTO if it cannot be read. */
static int read_claims(struct luna_shard_set *s, const char *json, size_t len)
{
    luna_json_value v;
    char rv[32];
    if (luna_json_lookup(json, len, "metadata.resourceVersion", &v, rv, sizeof rv, NULL) < 0 ||
        v.type != LUNA_JSON_STRING)
        return LUNA_EPROTO;
    snprintf(s->claims_rv, sizeof s->claims_rv, "%s", rv);
    s->nentries = 0;
    static const char *const segs[] = { "metadata", "annotations", LUNA_SHARD_CLAIMS_ANNOTATION };
    char *text = malloc(len + 1);
    if (!text)
        return LUNA_ENOMEM;
    int rc = luna_json_lookupv(json, len, segs, 3, &v, text, len + 1, NULL);
    if (rc == LUNA_ENOTFOUND) {
        free(text);
        return 0; /* no claims yet */
    }
    if (rc < 0 || v.type != LUNA_JSON_STRING) {
        free(text);
        return LUNA_EPROTO;
    }
    struct claims_scan cs = { .s = s };
    rc = luna_json_parse(text, v.len, NULL, claims_event, &cs, NULL);
    free(text);
    if (rc < 0 || cs.bad)
        luna_warn("shard claims annotation malformed: unreadable entries are dropped at the next "
                  "write", "set", s->set);
    return 0;
}

static struct peer *peer_find(struct luna_shard_set *s, const char *identity, bool add)
{
    for (size_t i = 0; i < s->npeers; i++)
        if (strcmp(s->peers[i].identity, identity) == 0)
            return &s->peers[i];
    if (!add || s->npeers >= MAX_PEERS)
        return NULL;
    struct peer *p = &s->peers[s->npeers++];
    memset(p, 0, sizeof *p);
    snprintf(p->identity, sizeof p->identity, "%s", identity);
    p->duration = s->lease_duration;
    p->changed = now_of(s);
    return p;
}

static bool peer_live(const struct luna_shard_set *s, const struct peer *p, double now)
{
    return now - p->changed < p->duration + s->margin;
}

static bool has_entry(const struct luna_shard_set *s, const char *identity)
{
    for (size_t i = 0; i < s->nentries; i++)
        if (strcmp(s->entries[i].identity, identity) == 0 && s->entries[i].r.n)
            return true;
    return false;
}

/* Takes in the LIST of member Leases. */
static int read_members(struct luna_shard_set *s, const char *json, size_t len)
{
    double now = now_of(s);
    for (size_t i = 0; i < s->npeers; i++)
        s->peers[i].listed = false;
    for (int i = 0;; i++) {
        char path[64], holder[LUNA_LEASE_MAX_IDENTITY], rv[32], dur[32];
        luna_json_value v;
        snprintf(path, sizeof path, "items.%d.spec.holderIdentity", i);
        int rc = luna_json_lookup(json, len, path, &v, holder, sizeof holder, NULL);
        if (rc == LUNA_ENOTFOUND) {
            snprintf(path, sizeof path, "items.%d", i);
            if (luna_json_lookup(json, len, path, &v, rv, sizeof rv, NULL) == 0)
                continue; /* a Lease without a holder: not a member */
            break;
        }
        if (rc < 0 || v.type != LUNA_JSON_STRING)
            return LUNA_EPROTO;
        snprintf(path, sizeof path, "items.%d.metadata.resourceVersion", i);
        if (luna_json_lookup(json, len, path, &v, rv, sizeof rv, NULL) < 0)
            return LUNA_EPROTO;
        snprintf(path, sizeof path, "items.%d.spec.leaseDurationSeconds", i);
        double duration = s->lease_duration;
        if (luna_json_lookup(json, len, path, &v, dur, sizeof dur, NULL) == 0 &&
            v.type == LUNA_JSON_NUMBER && v.kind == LUNA_JSON_INT && v.i > 0)
            duration = (double)v.i;
        if (!holder[0] || strcmp(holder, s->identity) == 0)
            continue;
        struct peer *p = peer_find(s, holder, true);
        if (!p)
            continue;
        p->listed = true;
        p->duration = duration;
        if (strcmp(p->rv, rv) != 0) {
            snprintf(p->rv, sizeof p->rv, "%s", rv);
            p->changed = now;
        }
    }
    /* a Lease that went away counts as a change, then expires as any */
    for (size_t i = 0; i < s->npeers; i++) {
        struct peer *p = &s->peers[i];
        if (!p->listed && p->rv[0]) {
            p->rv[0] = '\0';
            p->changed = now;
        }
    }
    /* forget peers gone for good: no Lease, expired, no claim left (a
     * claim keeps its peer, whose expiry clock must not start over) */
    size_t kept = 0;
    for (size_t i = 0; i < s->npeers; i++) {
        struct peer *p = &s->peers[i];
        if (p->rv[0] || peer_live(s, p, now) || has_entry(s, p->identity))
            s->peers[kept++] = *p;
    }
    s->npeers = kept;
    return 0;
}

/* ---- deciding ------------------------------------------------------------------------ */

static void set_informer_shard(struct luna_shard_set *s)
{
    struct luna_shard_selector *sel = ranges_selector(&s->claim, s->field);
    if (!sel) {
        struct luna_shard_range point = { s->field, 0, 0 };
        luna_shard_new(&point, 1, &sel, NULL);
    }
    if (!sel)
        return; /* out of memory: the informers stay where they are */
    if (luna_shard_equal(sel, s->informer_shard)) {
        luna_shard_free(sel);
        return;
    }
    luna_shard_free(s->informer_shard);
    s->informer_shard = sel;
    if (s->o.on_claim)
        s->o.on_claim(s->o.ud, sel);
}

static void stop_now(struct luna_shard_set *s, const char *why)
{
    bool had = s->confirmed || s->active.n;
    s->confirmed = false;
    s->draining = false;
    ev_timer_stop(s->loop, &s->drain_timer);
    memset(&s->claim, 0, sizeof s->claim);
    memset(&s->active, 0, sizeof s->active);
    report(s);
    if (had || !s->stopped_logged) {
        s->stopped_logged = true;
        /* when, on the wall clock, this replica stopped being allowed to
         * act (a frozen process logs this only once it runs again) */
        char since[40] = "";
        if (isfinite(s->last_renew)) {
            double ago = now_of(s) - (s->last_renew + s->renew_deadline);
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            double wall = (double)ts.tv_sec + ts.tv_nsec / 1e9 - (ago > 0 ? ago : 0);
            time_t secs = (time_t)wall;
            struct tm tm;
            gmtime_r(&secs, &tm);
            char date[32];
            strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
            snprintf(since, sizeof since, "%.20s.%03dZ", date,
                     (int)((wall - (double)secs) * 1000) % 1000);
        }
        luna_warn("shard stopped: reconciling nothing until the claim is confirmed again",
                  "set", s->set, "identity", s->identity, "reason", why,
                  "since", since[0] ? since : NULL);
    }
    if (had && s->o.on_stop)
        s->o.on_stop(s->o.ud);
}

static bool drained(struct luna_shard_set *s)
{
    unsigned long oldest = s->o.oldest_running ? s->o.oldest_running(s->o.ud) : 0;
    return oldest == 0 || oldest > s->drain_mark;
}

static void drain_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct luna_shard_set *s = w->data;
    if (!s->draining || !drained(s))
        return;
    ev_timer_stop(loop, w);
    if (!s->req && !s->leaving) {
        ev_timer_stop(loop, &s->round_timer);
        renew(s); /* a round now: the release need not wait for the next one */
    }
}

/* After the claims and the members were read: shrink, grow, clean. */
static void decide(struct luna_shard_set *s)
{
    double now = now_of(s);
    if (!fresh(s) || s->frozen) {
        round_end(s);
        return;
    }
    const char *ids[MAX_PEERS + 1];
    size_t n = 0;
    ids[n++] = s->identity;
    for (size_t i = 0; i < s->npeers; i++)
        if (s->peers[i].rv[0] && peer_live(s, &s->peers[i], now))
            ids[n++] = s->peers[i].identity;
    if (n != s->members) {
        char count[16];
        snprintf(count, sizeof count, "%zu", n);
        luna_info("shard members", "set", s->set, LUNA_LOG_NUM("members"), count);
    }
    s->members = n;
    struct luna_shard_selector *mine = NULL;
    luna_error err = { 0 };
    if (luna_shard_split(ids, n, s->identity, s->field, &mine, &err) < 0) {
        luna_warn("shard split failed", "set", s->set, "error", err.msg);
        round_end(s);
        return;
    }
    struct ranges target = { 0 };
    for (size_t i = 0; i < mine->n; i++)
        ranges_add(&target, mine->ranges[i].start, mine->ranges[i].last);
    luna_shard_free(mine);

    /* what the claims object says: ours, the live others', the expired */
    struct ranges recorded = { 0 }, others = { 0 };
    bool expired_entries = false;
    for (size_t i = 0; i < s->nentries; i++) {
        struct claim_entry *e = &s->entries[i];
        if (strcmp(e->identity, s->identity) == 0) {
            recorded = e->r;
            continue;
        }
        struct peer *p = peer_find(s, e->identity, true);
        if (p && !peer_live(s, p, now)) {
            expired_entries = true;
            e->r.n = 0; /* dropped by the CAS below */
            continue;
        }
        ranges_union(&others, &e->r);
    }
    if (s->confirmed && !ranges_contain(&recorded, &s->claim)) {
        /* someone judged us expired while we held the claim: the timing
         * rule was broken (a frozen process, a clock that jumped) */
        luna_error("shard claim taken over while held: stopping", "set", s->set);
        stop_now(s, "claim taken over");
        round_end(s);
        return;
    }
    struct ranges keep = ranges_intersect(&s->claim, &target);
    if (!ranges_equal(&keep, &s->claim)) {
        if (!s->draining) {
            s->draining = true;
            s->drain_mark = s->o.last_started ? s->o.last_started(s->o.ud) : 0;
            s->active = keep;
            report(s);
            char text[4096];
            struct ranges out = ranges_subtract(&s->claim, &keep);
            text_of(&out, s->field, text, sizeof text);
            luna_info("shard shrinking: draining", "set", s->set, "releasing", text);
        }
        if (!drained(s)) {
            ev_timer_again(s->loop, &s->drain_timer);
            round_end(s);
            return;
        }
    }
    struct ranges free_part = ranges_subtract(&target, &keep);
    free_part = ranges_subtract(&free_part, &others);
    if (s->lists < JOIN_LISTS)
        memset(&free_part, 0, sizeof free_part); /* peers starting with us: see them first */
    struct ranges want = keep;
    ranges_union(&want, &free_part);
    if (s->confirmed && ranges_equal(&want, &recorded) && !expired_entries &&
        ranges_equal(&want, &s->claim)) {
        round_end(s);
        return;
    }
    size_t len = 0;
    char *body = claims_body(s, &want, false, &len);
    if (!body) {
        round_end(s);
        return;
    }
    s->writing = want;
    if (send_req(s, STEP_CAS, "PUT", s->claims_path, body, len) < 0)
        round_end(s);
}

static void cas_succeeded(struct luna_shard_set *s)
{
    struct ranges want = s->writing;
    struct ranges gained = ranges_subtract(&want, &s->claim);
    struct ranges lost = ranges_subtract(&s->claim, &want);
    if (!fresh(s)) {
        /* the renew deadline passed while the CAS was out: what it wrote
         * is ours on the record, but not confirmed */
        round_end(s);
        return;
    }
    bool resumed = !s->confirmed;
    s->claim = want;
    s->active = want;
    s->confirmed = true;
    s->stopped_logged = false;
    s->draining = false;
    ev_timer_stop(s->loop, &s->drain_timer);
    report(s);
    char text[4096];
    text_of(&want, s->field, text, sizeof text);
    if (gained.n || lost.n) {
        luna_info("shard claim", "set", s->set, "identity", s->identity, "claim", text);
        if (s->metrics && gained.n)
            luna_runtime_metrics_shard_handoff(s->metrics, "grow");
        if (s->metrics && lost.n)
            luna_runtime_metrics_shard_handoff(s->metrics, "shrink");
    } else {
        luna_info("shard claim confirmed", "set", s->set, "identity", s->identity, "claim", text);
    }
    set_informer_shard(s);
    if (resumed && s->o.on_resume)
        s->o.on_resume(s->o.ud);
    round_end(s);
}

/* ---- rounds ------------------------------------------------------------------------------ */

static void arm_stop(struct luna_shard_set *s)
{
    double delay = s->last_renew + s->renew_deadline - now_of(s);
    ev_timer_stop(s->loop, &s->stop_timer);
    ev_timer_set(&s->stop_timer, delay > 0 ? delay : 0., 0.);
    ev_timer_start(s->loop, &s->stop_timer);
}

static void stop_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct luna_shard_set *s = w->data;
    if (fresh(s)) {
        arm_stop(s);
        return;
    }
    stop_now(s, "lease not renewed within the renew deadline");
}

static void round_end(struct luna_shard_set *s)
{
    s->step = STEP_NONE;
    if (s->leaving)
        return;
    ev_timer_stop(s->loop, &s->round_timer);
    double next = s->retry_period - (now_of(s) - s->sent);
    ev_timer_set(&s->round_timer, next > 0 ? next : 0., 0.);
    ev_timer_start(s->loop, &s->round_timer);
}

static void round_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct luna_shard_set *s = w->data;
    if (s->req || s->leaving)
        return;
    s->renew_retried = false;
    renew(s);
}

static void on_done(void *ud, const luna_http_response *resp, const luna_http_failure *fail)
{
    struct luna_shard_set *s = ud;
    enum step step = s->step;
    s->req = NULL;
    s->step = STEP_NONE;
    long status = fail ? 0 : resp->status;
    const char *body = fail ? NULL : resp->body;
    size_t len = fail ? 0 : resp->body_len;
    char why[256];
    if (fail)
        snprintf(why, sizeof why, "%.200s", fail->err.msg);
    else
        snprintf(why, sizeof why, "HTTP %ld", status);
    luna_json_value v;
    char rv[32];

    switch (step) {
    case STEP_RENEW:
        if ((status == 200 || status == 201) &&
            luna_json_lookup(body, len, "metadata.resourceVersion", &v, rv, sizeof rv, NULL) == 0) {
            snprintf(s->lease_rv, sizeof s->lease_rv, "%s", rv);
            bool was_fresh = fresh(s);
            s->last_renew = s->sent;
            arm_stop(s);
            if (!was_fresh)
                luna_info("shard lease renewed", "set", s->set, "identity", s->identity,
                          "lease", s->lease_name);
            if (send_req(s, STEP_CLAIMS, "GET", s->claims_path, NULL, 0) < 0)
                round_end(s);
        } else if ((status == 409 || status == 404) && !s->renew_retried) {
            s->renew_retried = true;
            if (send_req(s, STEP_RENEW_GET, "GET", s->lease_path, NULL, 0) < 0)
                round_end(s);
        } else {
            luna_warn("shard lease renewal failed", "set", s->set, "error", why);
            round_end(s);
        }
        return;
    case STEP_RENEW_GET:
        s->lease_rv[0] = '\0';
        if (status == 200 &&
            luna_json_lookup(body, len, "metadata.resourceVersion", &v, rv, sizeof rv, NULL) == 0)
            snprintf(s->lease_rv, sizeof s->lease_rv, "%s", rv);
        if (status == 200 || status == 404)
            renew(s);
        else
            round_end(s);
        return;
    case STEP_CLAIMS:
        if (status == 404) {
            s->claims_rv[0] = '\0';
            s->nentries = 0;
            struct ranges none = { 0 };
            size_t blen = 0;
            char *b = claims_body(s, &none, true, &blen);
            if (!b || send_req(s, STEP_CLAIMS_CREATE, "POST", s->collection, b, blen) < 0)
                round_end(s);
        } else if (status == 200 && read_claims(s, body, len) == 0) {
            if (send_req(s, STEP_LIST, "GET", s->list_path, NULL, 0) < 0)
                round_end(s);
        } else {
            luna_warn("shard claims read failed", "set", s->set, "error", why);
            round_end(s);
        }
        return;
    case STEP_CLAIMS_CREATE:
        if ((status == 201 || status == 200) && read_claims(s, body, len) == 0) {
            if (send_req(s, STEP_LIST, "GET", s->list_path, NULL, 0) < 0)
                round_end(s);
        } else {
            if (status != 409)
                luna_warn("shard claims create failed", "set", s->set, "error", why);
            round_end(s);
        }
        return;
    case STEP_LIST:
        if (status == 200 && read_members(s, body, len) == 0) {
            if (s->lists < JOIN_LISTS)
                s->lists++;
            decide(s);
        } else {
            luna_warn("shard members list failed", "set", s->set, "error", why);
            round_end(s);
        }
        return;
    case STEP_CAS:
        if (status == 200) {
            if (luna_json_lookup(body, len, "metadata.resourceVersion", &v, rv, sizeof rv,
                                 NULL) == 0)
                snprintf(s->claims_rv, sizeof s->claims_rv, "%s", rv);
            cas_succeeded(s);
        } else {
            if (status != 409)
                luna_warn("shard claims write failed", "set", s->set, "error", why);
            /* 409: someone else wrote; read again at once */
            s->sent = now_of(s) - s->retry_period;
            round_end(s);
        }
        return;
    case STEP_LEAVE_GET:
        if (status == 200 && read_claims(s, body, len) == 0) {
            size_t blen = 0;
            char *b = claims_body(s, NULL, true, &blen);
            if (!b || send_req(s, STEP_LEAVE_CAS, "PUT", s->claims_path, b, blen) < 0) {
                s->leave_tries = LEAVE_TRIES;
                leave_step(s);
            }
        } else {
            s->leave_tries = LEAVE_TRIES; /* no claims object: nothing to release */
            leave_step(s);
        }
        return;
    case STEP_LEAVE_CAS:
        if (status == 200) {
            luna_info("shard claim released", "set", s->set, "identity", s->identity);
            s->leave_tries = LEAVE_TRIES;
        } else if (status != 409) {
            luna_warn("shard claim release failed", "set", s->set, "error", why);
            s->leave_tries = LEAVE_TRIES;
        }
        leave_step(s);
        return;
    case STEP_LEAVE_DELETE: {
        void (*done)(void *) = s->leave_done;
        s->leave_done = NULL;
        if (status != 200 && status != 404)
            luna_warn("shard lease delete failed", "set", s->set, "error", why);
        if (done)
            done(s->leave_ud);
        return;
    }
    case STEP_NONE:
        return;
    }
}

/* ---- leaving ----------------------------------------------------------------------------- */

static void leave_step(struct luna_shard_set *s)
{
    if (s->leave_tries++ < LEAVE_TRIES) {
        if (send_req(s, STEP_LEAVE_GET, "GET", s->claims_path, NULL, 0) == 0)
            return;
        s->leave_tries = LEAVE_TRIES + 1;
    }
    if (send_req(s, STEP_LEAVE_DELETE, "DELETE", s->lease_path, NULL, 0) < 0) {
        void (*done)(void *) = s->leave_done;
        s->leave_done = NULL;
        if (done)
            done(s->leave_ud);
    }
}

void luna_shard_set_freeze(struct luna_shard_set *s) { s->frozen = true; }

void luna_shard_set_leave(struct luna_shard_set *s, void (*done)(void *ud), void *ud)
{
    if (s->req) {
        luna_kube_request_cancel(s->req);
        s->req = NULL;
    }
    ev_timer_stop(s->loop, &s->round_timer);
    ev_timer_stop(s->loop, &s->drain_timer);
    ev_timer_stop(s->loop, &s->stop_timer);
    s->leaving = true;
    s->frozen = true;
    s->confirmed = false;
    memset(&s->active, 0, sizeof s->active);
    report(s);
    s->leave_done = done;
    s->leave_ud = ud;
    s->leave_tries = 0;
    leave_step(s);
}

/* ---- the rest ------------------------------------------------------------------------------ */

int luna_shard_set_check_timing(double lease, double renew, double retry, double margin,
                                luna_error *err)
{
    lease = lease ? lease : 15;
    renew = renew ? renew : 10;
    retry = retry ? retry : 2;
    margin = margin ? margin : LUNA_SHARD_DEFAULT_SKEW_MARGIN;
    int rc = luna_lease_check_timing("sharding", lease, renew, retry, 0, err);
    if (rc < 0)
        return rc;
    if (!isfinite(margin) || margin < 0)
        return luna_error_set(err, LUNA_EINVAL, "sharding: the skew margin must be a finite "
                              "number of seconds >= 0");
    double eps = LUNA_SHARD_CLOCK_RATE_ERROR;
    double slack = (ceil(lease) + margin) / (1 + eps) - renew / (1 - eps);
    if (slack <= 0.1)
        return luna_error_set(err, LUNA_EINVAL, "sharding: lease duration + skew margin "
                              "(%g s) leaves no slack over the renew deadline (%g s) at 1%% "
                              "clock rate error: a stopped replica could still write after a "
                              "peer took over", ceil(lease) + margin, renew);
    return 0;
}

int luna_shard_set_new(struct luna_kube_client *kc, const struct luna_shard_set_options *o,
                       struct luna_shard_set **out, luna_error *err)
{
    *out = NULL;
    int rc = luna_shard_set_check_timing(o->lease_duration, o->renew_deadline, o->retry_period,
                                         o->skew_margin, err);
    if (rc < 0)
        return rc;
    if (!o->set || !luna_lease_dns_name(o->set) || strchr(o->set, '.') || strlen(o->set) > 63)
        return luna_error_set(err, LUNA_EINVAL, "sharding: set name \"%s\" is not a DNS label "
                              "(lower case letters, digits, '-'; at most 63)",
                              o->set ? o->set : "");
    if (!o->namespace_ || !luna_lease_dns_name(o->namespace_))
        return luna_error_set(err, LUNA_EINVAL, "sharding: namespace \"%s\" is not a valid "
                              "name", o->namespace_ ? o->namespace_ : "");
    if (!o->identity || !*o->identity || strlen(o->identity) >= LUNA_LEASE_MAX_IDENTITY ||
        luna_json_utf8_valid_prefix(o->identity, strlen(o->identity)) != strlen(o->identity))
        return luna_error_set(err, LUNA_EINVAL, "sharding: identity must be non-empty UTF-8 "
                              "of at most %d bytes", LUNA_LEASE_MAX_IDENTITY - 1);
    struct luna_shard_set *s = calloc(1, sizeof *s);
    if (!s)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    s->kc = kc;
    s->o = *o;
    s->field = o->field;
    s->lease_duration = o->lease_duration ? o->lease_duration : 15;
    s->renew_deadline = o->renew_deadline ? o->renew_deadline : 10;
    s->retry_period = o->retry_period ? o->retry_period : 2;
    s->margin = o->skew_margin ? o->skew_margin : LUNA_SHARD_DEFAULT_SKEW_MARGIN;
    double eps = LUNA_SHARD_CLOCK_RATE_ERROR;
    double slack = (ceil(s->lease_duration) + s->margin) / (1 + eps) -
                   s->renew_deadline / (1 - eps);
    /* A write's bytes reach the socket within write_timeout of the check
     * (curl's timeout, counted from the request's start) and the server
     * within unacked_timeout of that (TCP_USER_TIMEOUT on every API
     * connection), or never: together, within the slack. */
    s->write_timeout = slack * 0.5;
    s->unacked_timeout = slack - s->write_timeout;
    s->loop = o->loop;
    s->metrics = o->metrics;
    s->last_renew = -INFINITY;
    s->set = strdup(o->set);
    s->ns = strdup(o->namespace_);
    s->identity = strdup(o->identity);
    s->entries = calloc(MAX_PEERS, sizeof *s->entries);
    s->peers = calloc(MAX_PEERS, sizeof *s->peers);
    if (!s->set || !s->ns || !s->identity || !s->entries || !s->peers) {
        luna_shard_set_free(s);
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    }
    snprintf(s->lease_name, sizeof s->lease_name, "%s-member-%016llx", o->set,
             (unsigned long long)luna_shard_hash(o->identity, strlen(o->identity)));
    snprintf(s->collection, sizeof s->collection,
             "/apis/coordination.k8s.io/v1/namespaces/%s/leases", s->ns);
    snprintf(s->lease_path, sizeof s->lease_path, "%s/%s", s->collection, s->lease_name);
    snprintf(s->claims_name, sizeof s->claims_name, "%s-shards", o->set);
    snprintf(s->claims_path, sizeof s->claims_path, "%s/%s", s->collection, s->claims_name);
    snprintf(s->list_path, sizeof s->list_path, "%s?labelSelector=luna.dev%%2Fshard-set%%3D%s",
             s->collection, o->set);
    ev_timer_init(&s->round_timer, round_cb, 0., 0.);
    s->round_timer.data = s;
    ev_timer_init(&s->stop_timer, stop_cb, 0., 0.);
    s->stop_timer.data = s;
    /* before any I/O of the iteration a frozen process wakes up in */
    ev_set_priority(&s->stop_timer, EV_MAXPRI);
    ev_timer_init(&s->drain_timer, drain_cb, DRAIN_POLL, DRAIN_POLL);
    s->drain_timer.data = s;
    set_informer_shard(s);
    if (!s->informer_shard) {
        luna_shard_set_free(s);
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    }
    *out = s;
    return 0;
}

void luna_shard_set_free(struct luna_shard_set *s)
{
    if (!s)
        return;
    if (s->req)
        luna_kube_request_cancel(s->req);
    if (s->loop) {
        ev_timer_stop(s->loop, &s->round_timer);
        ev_timer_stop(s->loop, &s->stop_timer);
        ev_timer_stop(s->loop, &s->drain_timer);
    }
    luna_shard_free(s->informer_shard);
    free(s->set);
    free(s->ns);
    free(s->identity);
    free(s->entries);
    free(s->peers);
    free(s);
}

void luna_shard_set_set_metrics(struct luna_shard_set *s, struct luna_runtime_metrics *rm)
{
    s->metrics = rm;
}

void luna_shard_set_start(struct luna_shard_set *s)
{
    char secs[4][32];
    snprintf(secs[0], sizeof secs[0], "%g", s->lease_duration);
    snprintf(secs[1], sizeof secs[1], "%g", s->renew_deadline);
    snprintf(secs[2], sizeof secs[2], "%g", s->retry_period);
    snprintf(secs[3], sizeof secs[3], "%g", s->margin);
    luna_info("shard set joining", "set", s->set, "identity", s->identity, "lease", s->lease_name,
              "field", s->field == LUNA_SHARD_UID ? "uid" : "namespace",
              LUNA_LOG_NUM("lease_duration"), secs[0], LUNA_LOG_NUM("renew_deadline"), secs[1],
              LUNA_LOG_NUM("retry_period"), secs[2], LUNA_LOG_NUM("skew_margin"), secs[3]);
    report(s);
    renew(s);
}

bool luna_shard_set_acting(const struct luna_shard_set *s)
{
    return s->confirmed && fresh(s);
}

bool luna_shard_set_owns(struct luna_shard_set *s, const char *namespace_, const char *uid)
{
    if (!s->confirmed || !fresh(s))
        return false;
    const char *v = s->field == LUNA_SHARD_UID ? uid : namespace_;
    v = v ? v : "";
    return ranges_has(&s->active, luna_shard_hash(v, strlen(v)));
}

bool luna_shard_set_may_write(struct luna_shard_set *s, const char **why)
{
    if (!s->confirmed) {
        if (why)
            *why = "this replica holds no confirmed shard claim";
        return false;
    }
    if (!fresh(s)) {
        if (why)
            *why = "this replica's shard lease was not renewed within the renew deadline";
        return false;
    }
    return true;
}

double luna_shard_set_write_timeout(const struct luna_shard_set *s) { return s->write_timeout; }
double luna_shard_set_unacked_timeout(const struct luna_shard_set *s)
{
    return s->unacked_timeout;
}

const struct luna_shard_selector *luna_shard_set_informer_shard(const struct luna_shard_set *s)
{
    return s->informer_shard;
}

enum luna_shard_field luna_shard_set_field(const struct luna_shard_set *s) { return s->field; }

void luna_shard_set_note_dropped(struct luna_shard_set *s, const char *reason)
{
    if (s->metrics)
        luna_runtime_metrics_shard_dropped(s->metrics, reason);
}
