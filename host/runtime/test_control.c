/* test_control.c — see test_control.h. */
#include "runtime/test_control.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ev.h>
#include <jansson.h>

#include "base/log.h"
#include "base/loop.h"
#include "cache/delta_fifo.h"
#include "cache/informer.h"
#include "cache/informer_factory.h"
#include "cache/reflector.h"
#include "client/kube_client.h"
#include "queue/workqueue.h"
#include "lua/lua_util.h"
#include "controller/controller.h"
#include "controller/spec.h"
#include "script/sandbox.h"
#include "controller/reconcile.h"
#include "controller/generation.h"

#define MAX_CALLS 10000
#define MAX_LINE (64u << 20) /* a request command carries its body */
/* Bytes of request bodies the recorded calls keep, in all: past it the
 * oldest calls are dropped (counted as dropped), as past MAX_CALLS.  A
 * controller that writes 8 MiB bodies in a loop would otherwise make the
 * test kit keep 10,000 of them. */
#define MAX_CALL_BODIES ((size_t)64 << 20)

struct call {
    uint64_t seq;
    char *controller, *key, *method, *path, *content_type, *body;
    size_t body_len;
    int status;
};

static struct {
    bool enabled, fake;
    struct luna_fake_clock clock;
    bool started;
    struct luna_test_control_source src;
    char *url;
    ev_io in;
    char *line;                 /* the command being read, malloc'd, cap bytes */
    size_t len, cap;
    struct luna_kube_request *req; /* a `request` in flight, or NULL */
    bool overlong;              /* the current line passed MAX_LINE: dropped */
    struct call *calls;         /* ring of MAX_CALLS: calls[(first + i) % MAX_CALLS] */
    size_t first, ncalls;
    size_t body_bytes;          /* bytes of the recorded calls' bodies */
    uint64_t next_seq;          /* sequence of the next recorded call (from 1) */
    unsigned long dropped;      /* calls pushed out before `calls` read them */
} tc;

void luna_test_control_enable(bool fake_clock)
{
    tc.enabled = true;
    tc.fake = fake_clock;
    luna_fake_clock_init(&tc.clock, luna_clock_now(luna_clock_monotonic()));
    /* scripts' wall clock (luna.time.now, os.time, os.date) steps with it:
     * time-based logic is testable with advance */
    if (fake_clock)
        luna_wall_clock_follow(&tc.clock.clock);
}

bool luna_test_control_enabled(void) { return tc.enabled; }

const struct luna_clock *luna_test_control_clock(void)
{
    return tc.enabled && tc.fake ? &tc.clock.clock : luna_clock_monotonic();
}

/* ---- recorded calls ------------------------------------------------------ */

static void call_clear(struct call *c)
{
    tc.body_bytes -= c->body_len;
    free(c->controller);
    free(c->key);
    free(c->method);
    free(c->path);
    free(c->content_type);
    free(c->body);
    memset(c, 0, sizeof *c);
}

static char *dup_or_empty(const char *s, size_t len)
{
    char *d = malloc(len + 1);
    if (d) {
        if (len)
            memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}

static uint64_t call_start(void *ud, const char *controller, const char *key,
                           const char *method, const char *path, const char *content_type,
                           const char *body, size_t body_len)
{
    if (!tc.enabled)
        return 0;
    if (!tc.calls && !(tc.calls = calloc(MAX_CALLS, sizeof *tc.calls)))
        return 0;
    size_t keep = body ? body_len : 0;
    while (tc.ncalls && (tc.ncalls == MAX_CALLS || tc.body_bytes + keep > MAX_CALL_BODIES)) {
        call_clear(&tc.calls[tc.first]);
        tc.first = (tc.first + 1) % MAX_CALLS;
        tc.ncalls--;
        tc.dropped++;
    }
    struct call *c = &tc.calls[(tc.first + tc.ncalls) % MAX_CALLS];
    c->controller = dup_or_empty(controller ? controller : "", controller ? strlen(controller) : 0);
    c->key = dup_or_empty(key ? key : "", key ? strlen(key) : 0);
    c->method = dup_or_empty(method, strlen(method));
    c->path = dup_or_empty(path, strlen(path));
    c->content_type = content_type ? dup_or_empty(content_type, strlen(content_type)) : NULL;
    c->body = body ? dup_or_empty(body, body_len) : NULL;
    if (!c->controller || !c->key || !c->method || !c->path ||
        (content_type && !c->content_type) || (body && !c->body)) {
        call_clear(c);
        return 0;
    }
    c->body_len = keep;
    tc.body_bytes += keep;
    c->seq = ++tc.next_seq;
    tc.ncalls++;
    return c->seq;
}

static void call_done(void *ud, uint64_t seq, int status)
{
    if (!seq || !tc.ncalls)
        return;
    uint64_t oldest = tc.calls[tc.first].seq;
    if (seq < oldest || seq - oldest >= tc.ncalls)
        return;
    tc.calls[(tc.first + (size_t)(seq - oldest)) % MAX_CALLS].status = status;
}

const struct luna_api_client_observer *luna_test_control_call_observer(void)
{
    static const struct luna_api_client_observer obs = { call_start, call_done, NULL };
    return &obs;
}

static json_t *take_calls(void)
{
    json_t *list = json_array();
    for (size_t i = 0; i < tc.ncalls; i++) {
        struct call *c = &tc.calls[(tc.first + i) % MAX_CALLS];
        json_array_append_new(list, json_pack("{s:s,s:s,s:s,s:s,s:s?,s:s?,s:i}",
            "controller", c->controller, "key", c->key, "method", c->method, "path", c->path,
            "content_type", c->content_type, "body", c->body, "status", c->status));
        call_clear(c);
    }
    tc.first = tc.ncalls = 0;
    json_t *out = json_pack("{s:o,s:i}", "calls", list, "dropped", (json_int_t)tc.dropped);
    tc.dropped = 0;
    return out;
}

/* ---- status -------------------------------------------------------------- */

struct informer_walk {
    uint64_t server_rv;
    json_t *busy;
    uint64_t activity;          /* lists and watch events received, summed */
};

static void check_informer(void *ud, struct luna_shared_informer *si)
{
    struct informer_walk *w = ud;
    const char *name = luna_shared_informer_key(si);
    char why[512];
    struct luna_reflector *refl = luna_shared_informer_reflector(si);
    if (refl) {
        struct luna_reflector_stats st = luna_reflector_stats(refl);
        w->activity += st.lists + st.watch_events;
    }
    switch (luna_shared_informer_state(si, NULL)) {
    case LUNA_SI_NOT_SERVED:
    case LUNA_SI_UNRESOLVED:
        return; /* its controllers wait; nothing will happen until it is served */
    case LUNA_SI_RESOLVING:
    case LUNA_SI_LISTING:
        snprintf(why, sizeof why, "informer %s: %s", name,
                 luna_shared_informer_state_name(luna_shared_informer_state(si, NULL)));
        json_array_append_new(w->busy, json_string(why));
        return;
    case LUNA_SI_SYNCED:
        break;
    }
    struct luna_informer *inf = luna_shared_informer_informer(si);
    size_t pending = luna_delta_fifo_len(luna_informer_fifo(inf));
    if (pending) {
        snprintf(why, sizeof why, "informer %s: %zu keys in its DeltaFIFO", name, pending);
        json_array_append_new(w->busy, json_string(why));
        return;
    }
    struct luna_reflector *r = luna_shared_informer_reflector(si);
    const char *rv = r ? luna_reflector_resource_version(r) : "";
    char *end;
    unsigned long long seen = strtoull(rv, &end, 10);
    if (w->server_rv && (!*rv || *end || seen < w->server_rv)) {
        snprintf(why, sizeof why, "informer %s: has seen resourceVersion %s of %llu", name,
                 *rv ? rv : "none", (unsigned long long)w->server_rv);
        json_array_append_new(w->busy, json_string(why));
    }
}

static json_t *status(void)
{
    json_t *busy = json_array(), *ctls = json_array();
    /* anything that happened moves it: the kit's quiet spell on a real
     * server (test_control.h) */
    uint64_t activity = tc.next_seq;
    struct luna_generation *g = tc.src.current ? tc.src.current(tc.src.ud) : NULL;
    if (!g)
        json_array_append_new(busy, json_string("controllers not built yet"));
    if (tc.src.server_busy && tc.src.server_busy(tc.src.ud))
        json_array_append_new(busy, json_string("the dev server's garbage collector has work pending"));
    if (tc.src.reload_pending && tc.src.reload_pending(tc.src.ud))
        json_array_append_new(busy, json_string("a reload is pending"));
    for (size_t i = 0; g && i < luna_generation_count(g); i++) {
        struct luna_controller *c = luna_generation_controller(g, i);
        struct luna_workqueue *q = luna_controller_queue(c);
        struct luna_workqueue_metrics m = { 0 };
        if (q)
            luna_workqueue_metrics(q, &m);
        activity += m.adds_total + m.retries_total;
        double next = q ? luna_workqueue_next_ready(q) : -1;
        const char *name = luna_controller_name(c);
        json_t *o = json_pack("{s:s,s:b,s:I,s:I,s:I}", "name", name,
                              "started", luna_controller_started(c),
                              "queued", (json_int_t)m.queued, "processing",
                              (json_int_t)m.processing, "waiting", (json_int_t)m.waiting);
        json_object_set_new(o, "next", next >= 0 ? json_real(next) : json_null());
        json_array_append_new(ctls, o);
        if (m.queued || m.processing) {
            char why[512];
            snprintf(why, sizeof why, "controller %s: %zu queued, %zu reconciling", name,
                     m.queued, m.processing);
            json_array_append_new(busy, json_string(why));
        }
    }
    struct luna_informer_factory *f = tc.src.factory ? tc.src.factory(tc.src.ud) : NULL;
    if (f) {
        struct informer_walk w = { .server_rv = tc.src.server_rv ? tc.src.server_rv(tc.src.ud) : 0,
                                   .busy = busy };
        luna_informer_factory_foreach(f, check_informer, &w);
        activity += w.activity;
    }
    return json_pack("{s:s,s:f,s:b,s:o,s:I,s:o}", "url", tc.url ? tc.url : "", "clock",
                     luna_clock_now(luna_test_control_clock()), "idle",
                     json_array_size(busy) == 0, "busy", busy, "activity",
                     (json_int_t)activity, "controllers", ctls);
}

static json_t *advance(const char *arg)
{
    char *end;
    double s = strtod(arg, &end);
    while (*end == ' ')
        end++;
    if (end == arg || *end || !isfinite(s) || s < 0)
        return json_pack("{s:s}", "error", "advance wants a number of seconds >= 0");
    if (!tc.fake)
        return json_pack("{s:s}", "error", "advance needs the fake clock (luna test starts "
                                           "the runtime with one unless asked not to)");
    luna_error err = { 0 };
    if (luna_fake_clock_advance(&tc.clock, s, &err) < 0)
        return json_pack("{s:s}", "error", err.msg);
    struct luna_generation *g = tc.src.current ? tc.src.current(tc.src.ud) : NULL;
    for (size_t i = 0; g && i < luna_generation_count(g); i++) {
        struct luna_workqueue *q = luna_controller_queue(luna_generation_controller(g, i));
        if (q)
            luna_workqueue_tick(q);
    }
    return json_pack("{s:f}", "clock", luna_clock_now(&tc.clock.clock));
}

static void answer(json_t *o);

static void on_request_done(void *ud, const luna_http_response *resp, const luna_http_failure *fail)
{
    tc.req = NULL;
    if (fail) {
        answer(json_pack("{s:s}", "error", fail->err.msg));
        return;
    }
    /* the Warning headers' texts (299 - "TEXT"), as kubectl shows them:
     * what an admission webhook warned, among others */
    json_t *warnings = json_array();
    for (size_t i = 0; warnings && i < resp->nheaders; i++) {
        const luna_http_header *h = &resp->headers[i];
        if (strcmp(h->name, "warning") != 0)
            continue;
        const char *q = strchr(h->value, '"');
        const char *end = q ? strrchr(h->value, '"') : NULL;
        json_t *text = q && end > q ? json_stringn(q + 1, (size_t)(end - q - 1))
                                    : json_string(h->value);
        if (text)
            json_array_append_new(warnings, text);
    }
    answer(json_pack("{s:i,s:s%,s:o}", "status", (int)resp->status, "body",
                     resp->body ? resp->body : "", resp->body ? resp->body_len : (size_t)0,
                     "warnings", warnings ? warnings : json_array()));
}

/* admit {"path":…, "body":…}: the webhook server's answer to that POST. */
static json_t *admit(const char *arg)
{
    json_error_t jerr;
    json_t *o = json_loads(arg, 0, &jerr);
    const char *path = NULL, *body = NULL;
    size_t body_len = 0;
    if (!o || json_unpack(o, "{s:s,s:s%}", "path", &path, "body", &body, &body_len) < 0) {
        json_decref(o);
        return json_pack("{s:s}", "error", "admit wants {\"path\": \"/validate/NAME\", "
                                           "\"body\": \"AdmissionReview JSON\"}");
    }
    if (!tc.src.admit) {
        json_decref(o);
        return json_pack("{s:s}", "error", "no webhook server");
    }
    struct luna_textbuf out = LUNA_TEXTBUF_INIT;
    const char *ctype = NULL;
    luna_error err = { 0 };
    int status = tc.src.admit(tc.src.ud, path, body, body_len, &out, &ctype, &err);
    json_decref(o);
    json_t *ans;
    if (status < 0)
        ans = json_pack("{s:s}", "error", err.msg);
    else if (out.failed)
        ans = json_pack("{s:s}", "error", "admit: out of memory");
    else
        ans = json_pack("{s:i,s:s%}", "status", status, "body", out.data ? out.data : "",
                        out.len);
    luna_textbuf_free(&out);
    return ans;
}

/* webhook: where the webhook server listens, and its certificate. */
static json_t *webhook(void)
{
    const char *address = NULL, *cert = NULL;
    if (!tc.src.webhook_server || !tc.src.webhook_server(tc.src.ud, &address, &cert))
        return json_pack("{s:s}", "error", "the webhook server does not serve (no file declares "
                                           "a webhook, or --webhook-bind-address=0)");
    return json_pack("{s:s,s:s}", "address", address, "cert", cert ? cert : "");
}

/* request {"method":…, "path":…, "content_type":…, "body":…}: the request
 * goes to the API server through the runtime's client; the answer comes
 * when it is done. */
static void request(const char *arg)
{
    struct luna_kube_client *kc = tc.src.client ? tc.src.client(tc.src.ud) : NULL;
    if (!kc) {
        answer(json_pack("{s:s}", "error", "not connected yet"));
        return;
    }
    if (tc.req) {
        answer(json_pack("{s:s}", "error", "a request is in flight: one command at a time"));
        return;
    }
    json_error_t jerr;
    json_t *o = json_loads(arg, 0, &jerr);
    const char *method = NULL, *path = NULL, *ct = NULL, *body = NULL;
    size_t body_len = 0;
    if (!o || json_unpack(o, "{s:s,s:s,s?s,s?s%}", "method", &method, "path", &path,
                          "content_type", &ct, "body", &body, &body_len) < 0 || path[0] != '/') {
        json_decref(o);
        answer(json_pack("{s:s}", "error", "request wants {\"method\", \"path\": \"/…\", "
                                           "\"content_type\", \"body\"}"));
        return;
    }
    struct luna_kube_request_options ro = {
        .method = method, .path = path, .body = body, .body_len = body_len,
        .content_type = ct, .timeout = 60, .on_done = on_request_done,
    };
    luna_error err = { 0 };
    tc.req = luna_kube_request_start(kc, &ro, &err);
    json_decref(o);
    if (!tc.req)
        answer(json_pack("{s:s}", "error", err.msg));
}

static void add_api(void *ud, const char *path, const char *type)
{
    json_object_set_new(ud, path, json_string(type));
}

/* fields[group] += [field] */
static void add_field(void *ud, const char *group, const char *field)
{
    json_t *list = json_object_get(ud, group);
    if (!list) {
        list = json_array();
        json_object_set_new(ud, group, list);
    }
    json_array_append_new(list, json_string(field));
}

static void add_fields(json_t *fields, const char *group, const char *const *names)
{
    for (; *names; names++)
        add_field(fields, group, *names);
}

/* Every name scripts can reach, with its type, from the running state. */
static json_t *api(void)
{
    struct luna_generation *g = tc.src.current ? tc.src.current(tc.src.ud) : NULL;
    if (!g)
        return json_pack("{s:s}", "error", "controllers not loaded yet");
    json_t *names = json_object();
    luna_error err = { 0 };
    /* every controller's state has the same API: the first one's */
    lua_State *L = luna_generation_state(g, 0);
    if (!L) {
        json_decref(names);
        return json_pack("{s:s}", "error", "no controller loaded");
    }
    if (luna_sandbox_list_api(L, add_api, names, &err) < 0) {
        json_decref(names);
        return json_pack("{s:s}", "error", err.msg);
    }
    json_t *fields = json_object();
    luna_controller_spec_list_fields(add_field, fields);
    add_fields(fields, "request", luna_reconcile_request_fields);
    add_fields(fields, "result", luna_reconcile_result_fields);
    add_fields(fields, "error", luna_lua_error_fields);
    return json_pack("{s:o,s:o}", "api", names, "fields", fields);
}

/* seed "text": the manifests into the dev server. */
static json_t *seed(const char *arg)
{
    json_error_t jerr;
    json_t *o = json_loads(arg, JSON_DECODE_ANY, &jerr);
    if (!o || !json_is_string(o)) {
        json_decref(o);
        return json_pack("{s:s}", "error", "seed wants a JSON string holding the manifests");
    }
    if (!tc.src.seed) {
        json_decref(o);
        return json_pack("{s:s}", "error", "no dev server to seed");
    }
    luna_error err = { 0 };
    int rc = tc.src.seed(tc.src.ud, json_string_value(o), json_string_length(o), &err);
    json_decref(o);
    if (rc < 0)
        return json_pack("{s:s}", "error", err.msg);
    return json_pack("{s:b}", "ok", 1);
}

/* documents "text": the manifests' objects, parsed, for the kit. */
static json_t *documents(const char *arg)
{
    json_error_t jerr;
    json_t *o = json_loads(arg, JSON_DECODE_ANY, &jerr);
    if (!o || !json_is_string(o)) {
        json_decref(o);
        return json_pack("{s:s}", "error", "documents wants a JSON string holding the manifests");
    }
    if (!tc.src.documents) {
        json_decref(o);
        return json_pack("{s:s}", "error", "no manifest reader");
    }
    luna_error err = { 0 };
    char *text = tc.src.documents(tc.src.ud, json_string_value(o), json_string_length(o), &err);
    json_decref(o);
    if (!text)
        return json_pack("{s:s}", "error", err.msg[0] ? err.msg : "bad manifests");
    json_t *docs = json_loads(text, 0, &jerr);
    free(text);
    if (!docs)
        return json_pack("{s:s}", "error", "documents: out of memory");
    return json_pack("{s:o}", "documents", docs);
}

static void answer(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) {
        fputs("{\"error\":\"out of memory\"}\n", stdout);
    } else {
        fputs(s, stdout);
        fputc('\n', stdout);
        free(s);
    }
    fflush(stdout);
}

static void command(char *line)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\r' || line[n - 1] == ' '))
        line[--n] = '\0';
    if (strcmp(line, "status") == 0)
        answer(status());
    else if (strncmp(line, "advance ", 8) == 0)
        answer(advance(line + 8));
    else if (strncmp(line, "seed ", 5) == 0)
        answer(seed(line + 5));
    else if (strncmp(line, "documents ", 10) == 0)
        answer(documents(line + 10));
    else if (strncmp(line, "admit ", 6) == 0)
        answer(admit(line + 6));
    else if (strcmp(line, "webhook") == 0)
        answer(webhook());
    else if (strcmp(line, "api") == 0)
        answer(api());
    else if (strcmp(line, "calls") == 0)
        answer(take_calls());
    else if (strncmp(line, "request ", 8) == 0)
        request(line + 8);
    else
        answer(json_pack("{s:s+}", "error", "unknown command: ", line));
}

static void on_input(struct ev_loop *loop, ev_io *w, int revents)
{
    char buf[65536];
    ssize_t n = read(w->fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        /* The test runner is gone: shut down as SIGTERM would. */
        ev_io_stop(loop, w);
        luna_info("test control: input closed, shutting down");
        raise(SIGTERM);
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\n') {
            if (tc.overlong || !tc.line)
                answer(json_pack("{s:s}", "error", tc.overlong ? "command line too long"
                                                               : "empty command"));
            else {
                tc.line[tc.len] = '\0';
                command(tc.line);
            }
            tc.len = 0;
            tc.overlong = false;
            continue;
        }
        if (tc.overlong)
            continue;
        if (tc.len + 2 > tc.cap) {
            size_t cap = tc.cap ? tc.cap * 2 : 4096;
            char *grown = cap <= MAX_LINE ? realloc(tc.line, cap) : NULL;
            if (!grown) {
                tc.overlong = true;
                continue;
            }
            tc.line = grown;
            tc.cap = cap;
        }
        tc.line[tc.len++] = buf[i];
    }
}

int luna_test_control_start(const struct luna_test_control_source *src, luna_error *err)
{
    if (!tc.enabled)
        return luna_error_set(err, LUNA_EINVAL, "test control: not enabled");
    tc.src = *src;
    free(tc.url);
    if (!(tc.url = strdup(src->url ? src->url : "")))
        return luna_error_set(err, LUNA_ENOMEM, "test control: out of memory");
    ev_io_init(&tc.in, on_input, STDIN_FILENO, EV_READ);
    ev_io_start(luna_loop(), &tc.in);
    tc.started = true;
    luna_info("test control listening on stdin", LUNA_LOG_BOOL("fake_clock"),
              tc.fake ? "true" : "false");
    return 0;
}

void luna_test_control_stop(void)
{
    if (tc.started)
        ev_io_stop(luna_loop(), &tc.in);
    tc.started = false;
    luna_kube_request_cancel(tc.req);
    tc.req = NULL;
    free(tc.line);
    tc.line = NULL;
    tc.len = tc.cap = 0;
    for (size_t i = 0; i < tc.ncalls; i++)
        call_clear(&tc.calls[(tc.first + i) % MAX_CALLS]);
    free(tc.calls);
    tc.calls = NULL;
    tc.first = tc.ncalls = 0;
    free(tc.url);
    tc.url = NULL;
    memset(&tc.src, 0, sizeof tc.src);
}
