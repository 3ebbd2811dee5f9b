/*
 * informer_watch — watch throughput: MODIFIED events applied to an
 * informer's cache per second, end to end over HTTP, on the loop's one
 * thread.
 *
 * The dev server cannot take writes as fast as an informer applies them, so
 * the stream is recorded from it and replayed:
 *   1. `luna dev-server` is seeded with OBJECTS ConfigMaps
 *      (LUNA_BENCH_OBJECTS, default 1,000) and then EVENTS updates of them
 *      (LUNA_BENCH_EVENTS, default 100,000; realistic objects of ~1.7 KB
 *      with their managedFields, bench/informer_bench.h), with a history
 *      long enough to keep them all;
 *   2. the state before the updates (LIST resourceVersion=R0, Exact) and
 *      the WATCH from R0 (the server replays every MODIFIED event from its
 *      history, byte for byte what a live watch sends) are recorded, with
 *      the discovery document;
 *   3. an in-process libmicrohttpd server (its own threads) serves the
 *      recording: discovery, the LIST, then the WATCH as one chunked stream
 *      as fast as the socket takes it;
 *   4. a shared informer (default options, a counting on_update handler)
 *      syncs from the replay and applies the stream.  Timed from the sync to
 *      the last update applied to the cache (and its handler called); the
 *      loop thread's CPU time over the same span is printed too.
 *
 * LUNA_BENCH_RECORDING=DIR keeps the recording in DIR and reuses it.
 *
 * Prints: bench informer_watch events=E events_per_s=R seconds=S cpu_s=C
 *         events_per_cpu_s=P bytes_per_event=B
 */
#include <microhttpd.h>
#include <stdatomic.h>

#include "informer_bench.h"
#include "base/json.h"

struct recording {
    struct bench_body discovery, list, watch;
};

static struct recording rec;
static atomic_int watches_served;
static atomic_bool stop_serving;

struct cursor {
    const struct bench_body *body;
    bool hold;  /* keep the stream open once the body is sent */
};

static ssize_t replay_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct cursor *c = cls;
    if (pos < c->body->len) {
        size_t n = c->body->len - (size_t)pos;
        if (n > max)
            n = max;
        memcpy(buf, c->body->p + pos, n);
        return (ssize_t)n;
    }
    if (!c->hold || atomic_load(&stop_serving))
        return MHD_CONTENT_READER_END_OF_STREAM;
    /* A live watch stays open: wait (this connection's thread only). */
    usleep(10000);
    return 0;
}

static enum MHD_Result replay_handle(void *cls, struct MHD_Connection *conn, const char *url,
                                     const char *method, const char *version,
                                     const char *upload, size_t *upload_size, void **con_cls)
{
    static const struct bench_body empty = { 0 };
    struct cursor *c = calloc(1, sizeof *c);
    if (!c)
        return MHD_NO;
    const char *watch = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "watch");
    unsigned status = MHD_HTTP_OK;
    if (strcmp(url, "/api/v1") == 0) {
        c->body = &rec.discovery;
    } else if (strcmp(url, "/api/v1/namespaces/bench/configmaps") == 0 && watch) {
        /* The recording once; later reconnects see a quiet watch. */
        c->body = atomic_fetch_add(&watches_served, 1) == 0 ? &rec.watch : &empty;
        c->hold = true;
    } else if (strcmp(url, "/api/v1/namespaces/bench/configmaps") == 0) {
        c->body = &rec.list;
    } else {
        c->body = &empty;
        status = MHD_HTTP_NOT_FOUND;
    }
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256 * 1024, replay_read, c, free);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Records discovery, the LIST at R0 and the WATCH from R0 from a dev server. */
static void record(long objects, long events)
{
    char seed1[256], seed2[256], history[32];
    snprintf(seed1, sizeof seed1, "%s/objects.json", bench_tmpdir());
    snprintf(seed2, sizeof seed2, "%s/updates.json", bench_tmpdir());
    bench_write_seed(seed1, 1, objects, 1);
    FILE *f = fopen(seed2, "w");
    if (!f)
        bench_die("cannot write %s", seed2);
    fputs("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[", f);
    for (long j = 0; j < events; j++) {
        if (j)
            fputc(',', f);
        bench_write_configmap(f, 1 + j % objects, 2 + j / objects);
    }
    fputs("]}\n", f);
    if (fclose(f) != 0)
        bench_die("cannot write %s", seed2);
    snprintf(history, sizeof history, "%ld", objects + events + 100);
    struct bench_server srv;
    const char *args[] = { "--seed", seed1, "--seed", seed2, "--history", history, NULL };
    bench_server_start(&srv, args);

    char url[512];
    struct bench_body b = { 0 };
    snprintf(url, sizeof url, "%s/api/v1/namespaces/bench/configmaps?limit=1", srv.url);
    if (bench_http("GET", url, NULL, &b) != 200)
        bench_die("GET %s failed", url);
    luna_json_value v;
    char text[64];
    luna_error err = { 0 };
    if (luna_json_lookup(b.p, b.len, "metadata.resourceVersion", &v, text, sizeof text, &err) < 0)
        bench_die("no list resourceVersion: %s", err.msg);
    free(b.p);
    unsigned long long r0 = strtoull(text, NULL, 10) - (unsigned long long)events;

    snprintf(url, sizeof url, "%s/api/v1", srv.url);
    if (bench_http("GET", url, NULL, &rec.discovery) != 200)
        bench_die("GET %s failed", url);
    snprintf(url, sizeof url,
             "%s/api/v1/namespaces/bench/configmaps?resourceVersion=%llu&resourceVersionMatch=Exact",
             srv.url, r0);
    if (bench_http("GET", url, NULL, &rec.list) != 200)
        bench_die("GET %s failed", url);
    /* The server closes a watch that falls 64 MB behind, so the history is
     * read in several watches, each from the last event recorded; their
     * concatenation is the byte stream one watch would carry. */
    unsigned long long from = r0;
    for (long got = 0; got < events;) {
        snprintf(url, sizeof url,
                 "%s/api/v1/namespaces/bench/configmaps?watch=1&resourceVersion=%llu&timeoutSeconds=1",
                 srv.url, from);
        struct bench_body part = { 0 };
        if (bench_http("GET", url, NULL, &part) != 200 || !part.len)
            bench_die("GET %s failed", url);
        /* Keep whole lines only, and find the last event's resourceVersion. */
        size_t end = part.len;
        while (end > 0 && part.p[end - 1] != '\n')
            end--;
        if (end == 0)
            bench_die("watch from %llu sent no complete event", from);
        size_t last = end - 1;
        while (last > 0 && part.p[last - 1] != '\n')
            last--;
        if (luna_json_lookup(part.p + last, end - last, "object.metadata.resourceVersion", &v, text,
                             sizeof text, &err) < 0)
            bench_die("no resourceVersion in the last event: %s", err.msg);
        from = strtoull(text, NULL, 10);
        for (size_t i = 0; i < end; i++)
            got += part.p[i] == '\n';
        bench_body_write(part.p, 1, end, &rec.watch);
        free(part.p);
    }
    bench_server_stop(&srv);

    long modified = 0;
    for (const char *p = rec.watch.p; p && (p = strstr(p, "{\"type\":\"MODIFIED\"")); p++)
        modified++;
    if (modified != events)
        bench_die("recorded %ld MODIFIED events, expected %ld", modified, events);
}

static int load_file(const char *dir, const char *name, long events, struct bench_body *b)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.%ld", dir, name, events);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    char chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        bench_body_write(chunk, 1, n, b);
    fclose(f);
    return 0;
}

static int load_recording(const char *dir, long events)
{
    if (load_file(dir, "discovery", events, &rec.discovery) < 0 ||
        load_file(dir, "list", events, &rec.list) < 0 ||
        load_file(dir, "watch", events, &rec.watch) < 0)
        return -1;
    return 0;
}

static void save_file(const char *dir, const char *name, long events, const struct bench_body *b)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.%ld", dir, name, events);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b->p, 1, b->len, f) != b->len || fclose(f) != 0)
        bench_die("cannot write %s", path);
}

static void save_recording(const char *dir, long events)
{
    save_file(dir, "discovery", events, &rec.discovery);
    save_file(dir, "list", events, &rec.list);
    save_file(dir, "watch", events, &rec.watch);
}

struct counter {
    long updates;
};

static void count_update(void *ud, struct luna_object *old, struct luna_object *obj)
{
    ((struct counter *)ud)->updates++;
}

struct done_ctx {
    struct luna_informer *inf;
    struct counter *count;
    long events;
};

static bool all_applied(void *ud)
{
    struct done_ctx *d = ud;
    return d->count->updates >= d->events && luna_delta_fifo_len(luna_informer_fifo(d->inf)) == 0;
}

static bool synced(void *ud) { return luna_informer_has_synced(ud); }

int main(void)
{
    long objects = bench_env_long("LUNA_BENCH_OBJECTS", 1000);
    long events = bench_env_long("LUNA_BENCH_EVENTS", 100000);
    luna_log_set_level(LUNA_LOG_WARN);
    /* LUNA_BENCH_RECORDING=DIR keeps the recording there and reuses it (to
     * profile the informer without re-seeding a dev server each time). */
    const char *dir = getenv("LUNA_BENCH_RECORDING");
    if (!dir || load_recording(dir, events) < 0) {
        record(objects, events);
        if (dir)
            save_recording(dir, events);
    }

    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION |
                                                MHD_USE_INTERNAL_POLLING_THREAD,
                                            0, NULL, NULL, replay_handle, NULL,
                                            MHD_OPTION_END);
    if (!d)
        bench_die("cannot start the replay server");
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)info->port);

    struct bench_env env;
    bench_env_open(&env, url);
    luna_error err = { 0 };
    struct luna_informer_spec spec = { .group = "", .version = "v1", .kind = "ConfigMap",
                                       .namespace_ = "bench" };
    struct luna_shared_informer *si = luna_informer_factory_acquire(env.factory, &spec, &err);
    if (!si)
        bench_die("%s", err.msg);
    struct luna_informer *inf = luna_shared_informer_informer(si);
    struct counter count = { 0 };
    struct luna_informer_handler h = { .on_update = count_update, .ud = &count };
    luna_informer_add_handler(inf, &h);

    bench_run_until(synced, inf, 60, "the informer to sync");
    double t0 = bench_now(), cpu0 = bench_thread_cpu();
    struct done_ctx dc = { inf, &count, events };
    bench_run_until(all_applied, &dc, 600, "every event to be applied");
    double secs = bench_now() - t0, cpu = bench_thread_cpu() - cpu0;
    if (count.updates != events)
        bench_die("applied %ld updates, expected %ld", count.updates, events);

    printf("bench informer_watch events=%ld events_per_s=%.0f seconds=%.3f cpu_s=%.3f "
           "events_per_cpu_s=%.0f bytes_per_event=%.0f\n",
           events, (double)events / secs, secs, cpu, (double)events / cpu,
           (double)rec.watch.len / (double)events);
    fflush(stdout);

    atomic_store(&stop_serving, true);
    luna_informer_factory_release(env.factory, si);
    bench_env_close(&env);
    MHD_stop_daemon(d);
    free(rec.discovery.p);
    free(rec.list.p);
    free(rec.watch.p);
    bench_cleanup_tmpdir();
    return 0;
}
