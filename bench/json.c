/*
 * bench/json.c — which JSON library luna wraps, by measurement.
 *
 * Generates a deterministic LIST of realistic ConfigMaps (labels,
 * annotations, a multi-line data value with escapes, one managedFields
 * entry: ~1,720 bytes per object, ~1,236 without managedFields), then, for
 * each candidate, in a forked child:
 *   json_list  one parse of the whole LIST body (a tree library builds one
 *              tree for everything; the streaming parsers get 64 KiB chunks
 *              as they would from the network);
 *   json_item  every item parsed as its own buffer, as watch events arrive
 *              (the tree is freed after each item).
 * and prints one line per result:
 *   bench json_list lib=yajl mode=sax objects=100000 mb=172.0 mb_per_s=470
 *         rss_mb=360 base_mb=180 extra_mb=1 extra_x=0.01
 * rss_mb is the child's peak RSS (ru_maxrss); base_mb what it had at the
 * start (the generated data it shares with the parent); extra_mb the
 * difference, i.e. what parsing cost; extra_x that over the input size.
 *
 * Usage: json [--objects N]          run the benchmark (default 100000)
 *        json --dump N [--no-managed-fields]
 *                                    print N items, one JSON object per
 *                                    line (bench/json_lua.lua reads them)
 */
#define JSMN_PARENT_LINKS
#define JSMN_STATIC
#include <jsmn.h>

#include <cjson/cJSON.h>
#include <jansson.h>
#include <yajl/yajl_parse.h>
#include <yajl/yajl_tree.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/json_writer.h"

/* json-c's headers cannot share a file with jansson's (both name a type
 * json_object), so the few json-c functions used are declared here, as in
 * <json-c/json_tokener.h> and <json-c/json_object.h>.  At run time both
 * libraries coexist: their symbols carry distinct versions. */
struct json_tokener;
struct json_object;
enum { JSONC_TOKENER_CONTINUE = 1 }; /* json_tokener_continue */
struct json_tokener *json_tokener_new(void);
void json_tokener_free(struct json_tokener *tok);
void json_tokener_reset(struct json_tokener *tok);
struct json_object *json_tokener_parse_ex(struct json_tokener *tok, const char *str, int len);
int json_tokener_get_error(struct json_tokener *tok);
int json_object_put(struct json_object *obj);
int json_object_object_length(const struct json_object *obj);
int json_object_object_get_ex(const struct json_object *obj, const char *key,
                              struct json_object **value);
size_t json_object_array_length(const struct json_object *obj);

#define CHUNK (64 * 1024)

/* ------------------------------------------------------------------------
 * Deterministic ConfigMaps
 */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

struct buf {
    char *p;
    size_t len, cap;
};

static void buf_printf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void buf_printf(struct buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        b->cap = b->cap ? b->cap * 2 : 1 << 20;
        b->p = realloc(b->p, b->cap);
        if (!b->p) {
            perror("realloc");
            exit(1);
        }
    }
}

static const char *const teams[] = { "payments", "checkout", "search", "identity",
                                     "catalog", "shipping", "reporting", "platform" };
static const char *const levels[] = { "debug", "info", "warn", "error" };

/* Appends ConfigMap number i. */
static void gen_item(struct buf *b, unsigned i, int managed)
{
    const char *team = teams[rnd() % 8];
    unsigned ns = (unsigned)(rnd() % 40);
    uint64_t u1 = rnd(), u2 = rnd();
    unsigned mon = 1 + (unsigned)(rnd() % 12), day = 1 + (unsigned)(rnd() % 28);
    unsigned hh = (unsigned)(rnd() % 24), mm = (unsigned)(rnd() % 60), ss = (unsigned)(rnd() % 60);
    char ts[32];
    snprintf(ts, sizeof ts, "2024-%02u-%02uT%02u:%02u:%02uZ", mon, day, hh, mm, ss);
    buf_printf(b,
        "{\"metadata\":{\"name\":\"%s-config-%06u\",\"namespace\":\"%s-%02u\","
        "\"uid\":\"%08x-%04x-4%03x-%04x-%012llx\",\"resourceVersion\":\"%u\","
        "\"creationTimestamp\":\"%s\","
        "\"labels\":{\"app.kubernetes.io/name\":\"%s-api\",\"app.kubernetes.io/instance\":\"%s-%u\","
        "\"app.kubernetes.io/managed-by\":\"Helm\",\"app.kubernetes.io/version\":\"1.%u.%u\","
        "\"tier\":\"backend\"},"
        "\"annotations\":{\"meta.helm.sh/release-name\":\"%s-%u\","
        "\"meta.helm.sh/release-namespace\":\"%s-%02u\","
        "\"checksum/config\":\"%016llx%016llx%016llx%016llx\"}",
        team, i, team, ns,
        (unsigned)(u1 >> 32), (unsigned)(u1 >> 16) & 0xffff, (unsigned)u1 & 0xfff,
        (unsigned)(u2 >> 48), (unsigned long long)(u2 & 0xffffffffffffull),
        100000000u + i * 7u, ts, team, team, i % 97, (unsigned)(rnd() % 30),
        (unsigned)(rnd() % 10), team, i % 97, team, ns,
        (unsigned long long)rnd(), (unsigned long long)rnd(), (unsigned long long)rnd(),
        (unsigned long long)rnd());
    if (managed)
        buf_printf(b,
            ",\"managedFields\":[{\"manager\":\"helm\",\"operation\":\"Update\","
            "\"apiVersion\":\"v1\",\"time\":\"%s\",\"fieldsType\":\"FieldsV1\","
            "\"fieldsV1\":{\"f:data\":{\".\":{},\"f:FEATURE_FLAGS\":{},\"f:LOG_LEVEL\":{},"
            "\"f:MAX_CONNECTIONS\":{},\"f:application.yaml\":{},\"f:logback.xml\":{}},"
            "\"f:metadata\":{\"f:annotations\":{\".\":{},\"f:meta.helm.sh/release-name\":{},"
            "\"f:meta.helm.sh/release-namespace\":{}},\"f:labels\":{\".\":{},"
            "\"f:app.kubernetes.io/instance\":{},\"f:app.kubernetes.io/managed-by\":{},"
            "\"f:app.kubernetes.io/name\":{},"
            "\"f:tier\":{}}}}}]",
            ts);
    buf_printf(b,
        "},\"data\":{\"LOG_LEVEL\":\"%s\",\"MAX_CONNECTIONS\":\"%u\","
        "\"FEATURE_FLAGS\":\"new-checkout,fast-search,dark-mode,beta-%u\","
        "\"application.yaml\":\"server:\\n  port: %u\\n  shutdown: graceful\\n"
        "database:\\n  url: jdbc:postgresql://db-%u.%s.svc:5432/app\\n  pool: %u\\n"
        "  timeout: 30s\\ncache:\\n  ttl: 300s\\n  size: %u\\n"
        "owner: \\\"team %s \\u2014 on-call\\\"\\n\","
        "\"logback.xml\":\"<configuration>\\n  <appender name=\\\"STDOUT\\\" "
        "class=\\\"ch.qos.logback.core.ConsoleAppender\\\">\\n    <encoder>\\n"
        "      <pattern>%%d{ISO8601} %%-5level [%%thread] %%logger{36} - %%msg%%n</pattern>\\n"
        "    </encoder>\\n  </appender>\\n  <root level=\\\"%s\\\">\\n"
        "    <appender-ref ref=\\\"STDOUT\\\"/>\\n  </root>\\n</configuration>\\n\"}}",
        levels[rnd() % 4], 50 + (unsigned)(rnd() % 450), (unsigned)(rnd() % 100),
        8000 + (unsigned)(rnd() % 100), (unsigned)(rnd() % 8), team,
        5 + (unsigned)(rnd() % 50), 1000 + (unsigned)(rnd() % 9000), team,
        levels[rnd() % 4]);
}

struct dataset {
    struct buf list;
    size_t *start, *end; /* item i is list.p[start[i], end[i]) */
    unsigned n;
};

static void gen_list(struct dataset *d, unsigned n)
{
    memset(d, 0, sizeof *d);
    d->n = n;
    d->start = malloc(n * sizeof *d->start);
    d->end = malloc(n * sizeof *d->end);
    d->list.cap = (size_t)n * 1800 + 4096;
    d->list.p = malloc(d->list.cap);
    buf_printf(&d->list, "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\","
                         "\"metadata\":{\"resourceVersion\":\"987654321\"},\"items\":[");
    for (unsigned i = 0; i < n; i++) {
        if (i)
            buf_printf(&d->list, ",");
        d->start[i] = d->list.len;
        gen_item(&d->list, i, 1);
        d->end[i] = d->list.len;
    }
    buf_printf(&d->list, "]}");
}

/* ------------------------------------------------------------------------
 * Measurement
 */

struct result {
    double seconds;
    double bytes;
    long base_kb, peak_kb;
    long long check;   /* events/tokens seen, or -1 on failure */
    char note[96];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_now_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

typedef long long (*run_fn)(const struct dataset *d, unsigned n, int whole,
                            struct result *r);

/* Runs fn in a child so each candidate's peak RSS is its own. */
static void measure(const char *bench, const char *lib, const char *mode,
                    run_fn fn, const struct dataset *d, unsigned n, int whole)
{
    int fds[2];
    if (pipe(fds)) {
        perror("pipe");
        exit(1);
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        struct result r = { 0 };
        r.base_kb = rss_now_kb();
        double t0 = now_s();
        r.check = fn(d, n, whole, &r);
        r.seconds = now_s() - t0;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        r.peak_kb = ru.ru_maxrss;
        if (write(fds[1], &r, sizeof r) != (ssize_t)sizeof r)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    struct result r = { .check = -1 };
    ssize_t got = read(fds[0], &r, sizeof r);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    if (got != (ssize_t)sizeof r || r.check < 0) {
        printf("bench %s lib=%s mode=%s error=%s\n", bench, lib, mode,
               r.note[0] ? r.note : "failed");
        return;
    }
    double mb = r.bytes / 1e6;
    double extra = (double)(r.peak_kb - r.base_kb) / 1024;
    if (extra < 0)
        extra = 0;
    printf("bench %s lib=%s mode=%s objects=%u mb=%.1f mb_per_s=%.0f rss_mb=%.0f "
           "base_mb=%.0f extra_mb=%.0f extra_x=%.2f%s%s\n",
           bench, lib, mode, n, mb, mb / r.seconds, (double)r.peak_kb / 1024,
           (double)r.base_kb / 1024, extra, extra * 1024 * 1024 / r.bytes,
           r.note[0] ? " " : "", r.note);
}

/* The LIST prefix of n items as one buffer: the first n items, closed. */
static const char *list_of(const struct dataset *d, unsigned n, size_t *len,
                           char **owned)
{
    *owned = NULL;
    if (n == d->n) {
        *len = d->list.len;
        return d->list.p;
    }
    size_t body = d->end[n - 1];
    char *p = malloc(body + 3);
    memcpy(p, d->list.p, body);
    memcpy(p + body, "]}", 3);
    *len = body + 2;
    *owned = p;
    return p;
}

/* --- yajl, SAX ----------------------------------------------------------- */

static int y_null(void *c) { (*(long long *)c)++; return 1; }
static int y_bool(void *c, int v) { (void)v; (*(long long *)c)++; return 1; }
static int y_num(void *c, const char *s, size_t l) { (void)s; (void)l; (*(long long *)c)++; return 1; }
static int y_str(void *c, const unsigned char *s, size_t l) { (void)s; (void)l; (*(long long *)c)++; return 1; }
static int y_map(void *c) { (*(long long *)c)++; return 1; }

static const yajl_callbacks y_count = {
    .yajl_null = y_null, .yajl_boolean = y_bool, .yajl_number = y_num,
    .yajl_string = y_str, .yajl_start_map = y_map, .yajl_map_key = y_str,
    .yajl_end_map = y_map, .yajl_start_array = y_map, .yajl_end_array = y_map,
};

static long long run_yajl_sax(const struct dataset *d, unsigned n, int whole, struct result *r)
{
    long long events = 0;
    if (whole) {
        char *owned;
        size_t len;
        const char *s = list_of(d, n, &len, &owned);
        yajl_handle h = yajl_alloc(&y_count, NULL, &events);
        for (size_t off = 0; off < len; off += CHUNK) {
            size_t k = len - off < CHUNK ? len - off : CHUNK;
            if (yajl_parse(h, (const unsigned char *)s + off, k) != yajl_status_ok)
                return -1;
        }
        if (yajl_complete_parse(h) != yajl_status_ok)
            return -1;
        yajl_free(h);
        r->bytes = (double)len;
        free(owned);
        return events;
    }
    double bytes = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t len = d->end[i] - d->start[i];
        yajl_handle h = yajl_alloc(&y_count, NULL, &events);
        if (yajl_parse(h, (const unsigned char *)d->list.p + d->start[i], len) != yajl_status_ok ||
            yajl_complete_parse(h) != yajl_status_ok)
            return -1;
        yajl_free(h);
        bytes += (double)len;
    }
    r->bytes = bytes;
    return events;
}

/* --- yajl, tree ---------------------------------------------------------- */

static long long run_yajl_tree(const struct dataset *d, unsigned n, int whole, struct result *r)
{
    char err[128];
    if (whole) {
        char *owned;
        size_t len;
        const char *s = list_of(d, n, &len, &owned);
        yajl_val v = yajl_tree_parse(s, err, sizeof err);
        if (!v)
            return -1;
        r->bytes = (double)len;
        long long k = (long long)YAJL_GET_ARRAY(yajl_tree_get(v, (const char *[]){ "items", NULL },
                                                              yajl_t_array))->len;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru); /* the peak includes the live tree */
        yajl_tree_free(v);
        free(owned);
        return k;
    }
    char *scratch = malloc(1 << 20);
    double bytes = 0;
    long long k = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t len = d->end[i] - d->start[i];
        memcpy(scratch, d->list.p + d->start[i], len); /* needs a NUL */
        scratch[len] = '\0';
        yajl_val v = yajl_tree_parse(scratch, err, sizeof err);
        if (!v)
            return -1;
        k += YAJL_IS_OBJECT(v) ? (long long)v->u.object.len : 0;
        yajl_tree_free(v);
        bytes += (double)len;
    }
    free(scratch);
    r->bytes = bytes;
    return k;
}

/* --- cJSON --------------------------------------------------------------- */

static long long run_cjson(const struct dataset *d, unsigned n, int whole, struct result *r)
{
    if (whole) {
        char *owned;
        size_t len;
        const char *s = list_of(d, n, &len, &owned);
        cJSON *v = cJSON_ParseWithLength(s, len);
        if (!v)
            return -1;
        long long k = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(v, "items"));
        cJSON_Delete(v);
        free(owned);
        r->bytes = (double)len;
        return k;
    }
    double bytes = 0;
    long long k = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t len = d->end[i] - d->start[i];
        cJSON *v = cJSON_ParseWithLength(d->list.p + d->start[i], len);
        if (!v)
            return -1;
        k += cJSON_GetArraySize(v);
        cJSON_Delete(v);
        bytes += (double)len;
    }
    r->bytes = bytes;
    return k;
}

/* --- json-c -------------------------------------------------------------- */

static long long run_jsonc(const struct dataset *d, unsigned n, int whole, struct result *r)
{
    struct json_tokener *tok = json_tokener_new();
    if (whole) {
        char *owned;
        size_t len;
        const char *s = list_of(d, n, &len, &owned);
        struct json_object *v = NULL;
        /* json-c parses incrementally too: give it the same chunks. */
        for (size_t off = 0; off < len && !v; off += CHUNK) {
            size_t k = len - off < CHUNK ? len - off : CHUNK;
            v = json_tokener_parse_ex(tok, s + off, (int)k);
            if (!v && json_tokener_get_error(tok) != JSONC_TOKENER_CONTINUE)
                return -1;
        }
        if (!v)
            return -1;
        struct json_object *items;
        long long k = json_object_object_get_ex(v, "items", &items)
                          ? (long long)json_object_array_length(items) : 0;
        json_object_put(v);
        json_tokener_free(tok);
        free(owned);
        r->bytes = (double)len;
        return k;
    }
    double bytes = 0;
    long long k = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t len = d->end[i] - d->start[i];
        json_tokener_reset(tok);
        struct json_object *v = json_tokener_parse_ex(tok, d->list.p + d->start[i], (int)len);
        if (!v)
            return -1;
        k += json_object_object_length(v);
        json_object_put(v);
        bytes += (double)len;
    }
    json_tokener_free(tok);
    r->bytes = bytes;
    return k;
}

/* --- jansson ------------------------------------------------------------- */

static long long run_jansson(const struct dataset *d, unsigned n, int whole, struct result *r)
{
    json_error_t err;
    if (whole) {
        char *owned;
        size_t len;
        const char *s = list_of(d, n, &len, &owned);
        json_t *v = json_loadb(s, len, 0, &err);
        if (!v)
            return -1;
        long long k = (long long)json_array_size(json_object_get(v, "items"));
        json_decref(v);
        free(owned);
        r->bytes = (double)len;
        return k;
    }
    double bytes = 0;
    long long k = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t len = d->end[i] - d->start[i];
        json_t *v = json_loadb(d->list.p + d->start[i], len, 0, &err);
        if (!v)
            return -1;
        k += (long long)json_object_size(v);
        json_decref(v);
        bytes += (double)len;
    }
    r->bytes = bytes;
    return k;
}

/* --- jsmn (tokens only: no unescaping, no numbers) ----------------------- */

static long long run_jsmn(const struct dataset *d, unsigned n, int whole, struct result *r)
{
    jsmn_parser p;
    if (whole) {
        char *owned;
        size_t len;
        const char *s = list_of(d, n, &len, &owned);
        jsmn_init(&p);
        int count = jsmn_parse(&p, s, len, NULL, 0); /* sizing pass */
        if (count < 0)
            return -1;
        jsmntok_t *toks = malloc((size_t)count * sizeof *toks);
        jsmn_init(&p);
        int got = jsmn_parse(&p, s, len, toks, (unsigned)count);
        free(toks);
        free(owned);
        r->bytes = (double)len;
        snprintf(r->note, sizeof r->note, "note=two_passes_count_then_tokens");
        return got;
    }
    unsigned cap = 1024;
    jsmntok_t *toks = malloc(cap * sizeof *toks);
    double bytes = 0;
    long long k = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t len = d->end[i] - d->start[i];
        jsmn_init(&p);
        int got = jsmn_parse(&p, d->list.p + d->start[i], len, toks, cap);
        if (got < 0)
            return -1;
        k += got;
        bytes += (double)len;
    }
    free(toks);
    r->bytes = bytes;
    return k;
}

/* --- luna (host/base/json.h over yajl) ---------------------------------------- */

static int luna_count(void *ud, const luna_json_event *ev, luna_error *err)
{
    (void)ev;
    (void)err;
    (*(long long *)ud)++;
    return 0;
}

static long long run_luna(const struct dataset *d, unsigned n, int whole, struct result *r)
{
    long long events = 0;
    luna_json_parser *p = luna_json_parser_new(NULL, luna_count, &events);
    if (whole) {
        char *owned;
        size_t len;
        const char *s = list_of(d, n, &len, &owned);
        for (size_t off = 0; off < len; off += CHUNK) {
            size_t k = len - off < CHUNK ? len - off : CHUNK;
            if (luna_json_parser_feed(p, s + off, k, NULL))
                return -1;
        }
        if (luna_json_parser_finish(p, NULL))
            return -1;
        free(owned);
        r->bytes = (double)len;
    } else {
        double bytes = 0;
        for (unsigned i = 0; i < n; i++) {
            size_t len = d->end[i] - d->start[i];
            luna_json_parser_reset(p, NULL);
            if (luna_json_parser_feed(p, d->list.p + d->start[i], len, NULL) ||
                luna_json_parser_finish(p, NULL))
                return -1;
            bytes += (double)len;
        }
        r->bytes = bytes;
    }
    luna_json_parser_free(p);
    return events;
}

/* The informer's per-item work: copy each item without managedFields. */
struct strip {
    luna_json_writer w;
    int skip_depth; /* >= 0: inside the skipped value */
    bool skip_next; /* the last key was metadata.managedFields */
};

static int strip_event(void *ud, const luna_json_event *ev, luna_error *err)
{
    (void)err;
    struct strip *s = ud;
    if (s->skip_depth >= 0) {
        if ((ev->type == LUNA_JSON_OBJECT_END || ev->type == LUNA_JSON_ARRAY_END) &&
            ev->depth == s->skip_depth)
            s->skip_depth = -1;
        return 0;
    }
    if (s->skip_next) {
        s->skip_next = false;
        if (ev->type == LUNA_JSON_OBJECT_START || ev->type == LUNA_JSON_ARRAY_START)
            s->skip_depth = ev->depth;
        return 0;
    }
    if (ev->type == LUNA_JSON_KEY && ev->depth == 2 && ev->len == 13 &&
        memcmp(ev->str, "managedFields", 13) == 0) {
        s->skip_next = true;
        return 0;
    }
    return luna_json_write_event(&s->w, ev);
}

static long long run_luna_strip(const struct dataset *d, unsigned n, int whole, struct result *r)
{
    (void)whole;
    struct strip s = { .skip_depth = -1 };
    luna_json_writer_init(&s.w);
    luna_json_parser *p = luna_json_parser_new(NULL, strip_event, &s);
    double bytes = 0, out = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t len = d->end[i] - d->start[i];
        luna_json_parser_reset(p, NULL);
        luna_json_writer_reset(&s.w);
        if (luna_json_parser_feed(p, d->list.p + d->start[i], len, NULL) ||
            luna_json_parser_finish(p, NULL) || luna_json_writer_finish(&s.w, NULL))
            return -1;
        bytes += (double)len;
        out += (double)s.w.len;
    }
    luna_json_parser_free(p);
    luna_json_writer_free(&s.w);
    r->bytes = bytes;
    snprintf(r->note, sizeof r->note, "bytes_in_per_object=%.0f bytes_out_per_object=%.0f",
             bytes / n, out / n);
    return 1;
}

/* ------------------------------------------------------------------------ */

static void dump(unsigned n, int managed)
{
    struct buf b = { 0 };
    for (unsigned i = 0; i < n; i++) {
        b.len = 0;
        gen_item(&b, i, managed);
        fwrite(b.p, 1, b.len, stdout);
        fputc('\n', stdout);
    }
    free(b.p);
}

int main(int argc, char **argv)
{
    unsigned n = 100000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc) {
            int managed = !(i + 2 < argc && strcmp(argv[i + 2], "--no-managed-fields") == 0);
            dump((unsigned)strtoul(argv[i + 1], NULL, 10), managed);
            return 0;
        }
        if (strcmp(argv[i], "--objects") == 0 && i + 1 < argc)
            n = (unsigned)strtoul(argv[++i], NULL, 10);
    }
    struct dataset d;
    gen_list(&d, n);
    printf("bench json_data objects=%u list_mb=%.1f bytes_per_object=%.0f\n", n,
           (double)d.list.len / 1e6, (double)d.list.len / n);

    /* The slow tree builders get fewer objects so `make bench` stays short;
     * the line says how many. */
    unsigned slow = n < 40000 ? n : 40000;
    struct {
        const char *lib, *mode;
        run_fn fn;
        unsigned list_n, item_n;
    } cands[] = {
        { "yajl", "sax", run_yajl_sax, n, n },
        { "luna", "events", run_luna, n, n },
        { "jsmn", "tokens", run_jsmn, n, n },
        { "yajl", "tree", run_yajl_tree, slow, slow },
        { "cjson", "tree", run_cjson, n, n },
        { "json-c", "tree", run_jsonc, slow, slow },
        { "jansson", "tree", run_jansson, slow, slow },
    };
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
        measure("json_list", cands[i].lib, cands[i].mode, cands[i].fn, &d, cands[i].list_n, 1);
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
        measure("json_item", cands[i].lib, cands[i].mode, cands[i].fn, &d, cands[i].item_n, 0);
    measure("json_item", "luna", "strip_managed_fields", run_luna_strip, &d, n, 0);
    free(d.list.p);
    free(d.start);
    free(d.end);
    return 0;
}
