/*
 * informer_relist — relisting a synced informer of N ConfigMaps (default
 * 100,000; LUNA_BENCH_OBJECTS=n) must not double its memory.
 *
 * The dev server (with --admin) is seeded as for informer_sync.  This
 * process syncs a shared informer whose watches time out after 1-2 s, then
 * sets the fault gone=1: the next watch gets 410 Gone and the reflector
 * relists everything.  Listed objects whose resourceVersion matches the
 * cache reuse the cached object, so the relist costs the list's transient
 * state (one item at a time, the FIFO's Replaced deltas), not a second copy
 * of the cache.  The peak RSS is reset (/proc/self/clear_refs) before the
 * relist and read when the relisted deltas are all applied.
 *
 * Prints: bench informer_relist objects=N relist_s=S rss_before_mb=B
 *         peak_rss_mb=P rss_after_mb=A peak_over_before=X
 */
#include "informer_bench.h"

struct watch_ctx {
    struct luna_shared_informer *si;
    unsigned long lists;
};

static bool synced(void *ud)
{
    struct watch_ctx *w = ud;
    return luna_informer_has_synced(luna_shared_informer_informer(w->si)) &&
           luna_shared_informer_reflector(w->si) &&
           luna_reflector_stats(luna_shared_informer_reflector(w->si)).watches > 0;
}

static bool gone(void *ud)
{
    struct watch_ctx *w = ud;
    return luna_reflector_stats(luna_shared_informer_reflector(w->si)).gone > 0;
}

static bool relisted(void *ud)
{
    struct watch_ctx *w = ud;
    struct luna_informer *inf = luna_shared_informer_informer(w->si);
    return luna_reflector_stats(luna_shared_informer_reflector(w->si)).lists >= 2 &&
           luna_delta_fifo_len(luna_informer_fifo(inf)) == 0;
}

int main(void)
{
    long n = bench_env_long("LUNA_BENCH_OBJECTS", 100000);
    luna_log_set_level(LUNA_LOG_WARN);
    char seed[256];
    snprintf(seed, sizeof seed, "%s/seed.json", bench_tmpdir());
    bench_write_seed(seed, 1, n, 1);
    struct bench_server srv;
    const char *args[] = { "--seed", seed, "--admin", NULL };
    bench_server_start(&srv, args);

    struct bench_env env;
    bench_env_open(&env, srv.url);
    luna_error err = { 0 };
    struct luna_informer_spec spec = { .group = "", .version = "v1", .kind = "ConfigMap",
                                       .namespace_ = "bench", .min_watch_timeout = 1,
                                       .max_watch_timeout = 2 };
    struct luna_shared_informer *si = luna_informer_factory_acquire(env.factory, &spec, &err);
    if (!si)
        bench_die("%s", err.msg);
    struct watch_ctx w = { si, 0 };
    bench_run_until(synced, &w, 600, "the informer to sync and watch");

    size_t before = bench_status_bytes("VmRSS:");
    char url[256];
    snprintf(url, sizeof url, "%s/luna/v1/faults", srv.url);
    if (bench_http("PUT", url, "gone=1", NULL) != 200)
        bench_die("cannot set the gone fault");
    bench_run_until(gone, &w, 60, "the 410");
    bench_reset_peak();
    double t0 = bench_now();
    bench_run_until(relisted, &w, 600, "the relist to be applied");
    double secs = bench_now() - t0;
    size_t peak = bench_status_bytes("VmHWM:"), after = bench_status_bytes("VmRSS:");
    struct luna_informer *inf = luna_shared_informer_informer(si);
    if (luna_indexer_len(luna_informer_indexer(inf)) != (size_t)n)
        bench_die("relisted %zu objects, expected %ld", luna_indexer_len(luna_informer_indexer(inf)),
                  n);

    printf("bench informer_relist objects=%ld relist_s=%.3f rss_before_mb=%.1f peak_rss_mb=%.1f "
           "rss_after_mb=%.1f peak_over_before=%.2f\n",
           n, secs, (double)before / 1e6, (double)peak / 1e6, (double)after / 1e6,
           (double)peak / (double)before);
    fflush(stdout);

    luna_informer_factory_release(env.factory, si);
    bench_env_close(&env);
    bench_server_stop(&srv);
    bench_cleanup_tmpdir();
    return 0;
}
