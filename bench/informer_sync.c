/*
 * informer_sync — initial sync of an informer over N ConfigMaps served by
 * the dev server (default 100,000; LUNA_BENCH_OBJECTS=n), and the memory of
 * the process holding the synced cache.
 *
 * The dev server (build/luna, its own process) is seeded with realistic
 * ConfigMaps (bench/informer_bench.h: ~1.7 KB of JSON each with the one
 * managedFields entry the server adds, ~1.24 KB without).  This process
 * starts a shared informer with default options (pages of 500, managedFields
 * dropped) and times creation → has_synced.  It then reads its own VmRSS
 * and VmHWM, and measures the objects' JSON by streaming the whole LIST once
 * more through two object streams (with and without managedFields).
 *
 * Prints: bench informer_sync objects=N sync_s=S rss_mb=R json_bytes_per_object=J
 *         rss_bytes_per_object=B json_no_mf_bytes_per_object=K rss_per_json_no_mf=X
 *         peak_rss_mb=P base_rss_mb=Z cpu_s=C
 * (base: before the informer starts; peak: VmHWM during the sync; cpu_s:
 * this process's CPU time during the sync.)
 */
#include "informer_bench.h"
#include "cache/object_stream.h"

struct measure {
    struct luna_object_stream *with_mf, *without_mf;
    size_t objects, bytes_with, bytes_without;
    bool done, failed;
};

static int count_with(void *ud, enum luna_stream_event ev, struct luna_object *obj)
{
    struct measure *m = ud;
    m->objects++;
    m->bytes_with += obj->json_len;
    luna_object_unref(obj);
    return 0;
}

static int count_without(void *ud, enum luna_stream_event ev, struct luna_object *obj)
{
    struct measure *m = ud;
    m->bytes_without += obj->json_len;
    luna_object_unref(obj);
    return 0;
}

static int on_chunk(void *ud, const char *data, size_t len, luna_error *err)
{
    struct measure *m = ud;
    int rc = luna_object_stream_feed(m->with_mf, data, len, err);
    return rc < 0 ? rc : luna_object_stream_feed(m->without_mf, data, len, err);
}

static void on_done(void *ud, const luna_http_response *resp, const luna_http_failure *fail)
{
    struct measure *m = ud;
    luna_error err = { 0 };
    m->done = true;
    m->failed = fail || resp->status != 200 ||
                luna_object_stream_finish(m->with_mf, &err) < 0 ||
                luna_object_stream_finish(m->without_mf, &err) < 0;
}

static bool measured(void *ud) { return ((struct measure *)ud)->done; }

static bool synced(void *ud) { return luna_informer_has_synced(ud); }

int main(void)
{
    long n = bench_env_long("LUNA_BENCH_OBJECTS", 100000);
    luna_log_set_level(LUNA_LOG_WARN);
    struct bench_server srv = { 0 };
    if (getenv("LUNA_BENCH_URL")) {
        /* A dev server seeded by an earlier run (for profiling this side). */
        snprintf(srv.url, sizeof srv.url, "%s", getenv("LUNA_BENCH_URL"));
    } else {
        char seed[256];
        snprintf(seed, sizeof seed, "%s/seed.json", bench_tmpdir());
        bench_write_seed(seed, 1, n, 1);
        const char *args[] = { "--seed", seed, NULL };
        bench_server_start(&srv, args);
    }

    struct bench_env env;
    bench_env_open(&env, srv.url);
    luna_error err = { 0 };
    /* The objects' JSON, with and without managedFields.  Measured first:
     * this LIST also primes the dev server, which sorts a collection
     * lazily on its first LIST (a real server serves from a sorted cache). */
    struct measure m = { 0 };
    struct luna_object_stream_handler h = { .on_item = count_with, .ud = &m };
    struct luna_object_stream_options so = { .mode = LUNA_STREAM_LIST, .keep_managed_fields = true };
    m.with_mf = luna_object_stream_new(&so, &h, &err);
    h.on_item = count_without;
    so.keep_managed_fields = false;
    m.without_mf = luna_object_stream_new(&so, &h, &err);
    if (!m.with_mf || !m.without_mf)
        bench_die("%s", err.msg);
    struct luna_kube_request_options ro = { .path = "/api/v1/namespaces/bench/configmaps",
                                            .on_chunk = on_chunk, .on_done = on_done, .ud = &m };
    if (!luna_kube_request_start(env.kc, &ro, &err))
        bench_die("%s", err.msg);
    bench_run_until(measured, &m, 600, "the measuring LIST");
    if (m.failed || m.objects != (size_t)n)
        bench_die("the measuring LIST failed (%zu objects)", m.objects);
    luna_object_stream_free(m.with_mf);
    luna_object_stream_free(m.without_mf);

    size_t base = bench_status_bytes("VmRSS:");
    bench_reset_peak();

    double t0 = bench_now(), cpu0 = bench_process_cpu();
    struct luna_informer_spec spec = { .group = "", .version = "v1", .kind = "ConfigMap",
                                       .namespace_ = "bench" };
    struct luna_shared_informer *si = luna_informer_factory_acquire(env.factory, &spec, &err);
    if (!si)
        bench_die("%s", err.msg);
    struct luna_informer *inf = luna_shared_informer_informer(si);
    bench_run_until(synced, inf, 600, "the informer to sync");
    double sync_s = bench_now() - t0, cpu_s = bench_process_cpu() - cpu0;
    size_t rss = bench_status_bytes("VmRSS:"), peak = bench_status_bytes("VmHWM:");
    if (luna_indexer_len(luna_informer_indexer(inf)) != (size_t)n)
        bench_die("synced %zu objects, expected %ld", luna_indexer_len(luna_informer_indexer(inf)), n);

    double json = (double)m.bytes_with / (double)n, json_no_mf = (double)m.bytes_without / (double)n;
    printf("bench informer_sync objects=%ld sync_s=%.3f rss_mb=%.1f json_bytes_per_object=%.0f "
           "rss_bytes_per_object=%.0f json_no_mf_bytes_per_object=%.0f rss_per_json_no_mf=%.2f "
           "peak_rss_mb=%.1f base_rss_mb=%.1f cpu_s=%.3f\n",
           n, sync_s, (double)rss / 1e6, json, (double)rss / (double)n, json_no_mf,
           (double)rss / (double)m.bytes_without, (double)peak / 1e6, (double)base / 1e6, cpu_s);
    fflush(stdout);

    luna_informer_factory_release(env.factory, si);
    bench_env_close(&env);
    if (srv.pid)
        bench_server_stop(&srv);
    bench_cleanup_tmpdir();
    return 0;
}
