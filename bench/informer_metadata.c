/*
 * informer_metadata — memory per cached object of a metadata-only informer
 * (PartialObjectMetadata) against a full informer of the same objects, in
 * the same run: N Secrets (default 20,000; LUNA_BENCH_OBJECTS=n) with 4 KiB
 * of data each, five recommended labels and an annotation, served by the
 * dev server.
 *
 * Each mode syncs in its own child process (forked before any loop
 * exists), so one mode's freed memory cannot flatter the other's RSS: the
 * child reads VmRSS before the informer starts and after it has synced,
 * and sums luna_object_size() over the cache.  The parent prints both and
 * their ratio (metadata-only ÷ full; lower is better).
 *
 * Prints: bench informer_metadata mode=full|metadata objects=N sync_s=S cpu_s=C
 *           rss_bytes_per_object=R cache_bytes_per_object=B
 *         bench informer_metadata_ratio rss=X cache=Y cpu=Z sync=W
 * (cpu_s: this side's CPU time during the sync; sync_s includes the dev
 * server's time to answer, which converts every object to
 * PartialObjectMetadata through a parsed document where it sends full
 * objects as stored bytes, so the sync ratio measures the dev server.)
 */
#include "informer_bench.h"

/* One Secret as a dev server seed item: 4 KiB of base64 data. */
static void write_secret(FILE *f, long i)
{
    fprintf(f,
            "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"type\":\"Opaque\",\"metadata\":{"
            "\"name\":\"app-secret-%06ld\",\"namespace\":\"bench\","
            "\"labels\":{\"app.kubernetes.io/name\":\"shop-%ld\","
            "\"app.kubernetes.io/instance\":\"shop-%ld-prod\","
            "\"app.kubernetes.io/component\":\"credentials\","
            "\"app.kubernetes.io/part-of\":\"shop\","
            "\"app.kubernetes.io/managed-by\":\"luna-bench\"},"
            "\"annotations\":{\"secrets.luna.example.com/rotated\":\"2026-01-%02ldT00:00:00Z\"}},"
            "\"data\":{\"tls.key\":\"",
            i, i % 500, i % 500, i % 28 + 1);
    /* 4096 bytes of base64 that differ per object */
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned long x = (unsigned long)i * 0x9e3779b97f4a7c15ul + 1;
    for (int k = 0; k < 4096; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        fputc(b64[x & 63], f);
    }
    fputs("\"}}", f);
}

static void write_seed(const char *path, long n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        bench_die("cannot write %s: %s", path, strerror(errno));
    fputs("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[", f);
    for (long i = 1; i <= n; i++) {
        if (i > 1)
            fputc(',', f);
        write_secret(f, i);
    }
    fputs("]}\n", f);
    if (fclose(f) != 0)
        bench_die("cannot write %s", path);
}

static bool synced(void *ud) { return luna_informer_has_synced(ud); }

static int add_size(struct luna_object *obj, void *ud)
{
    *(size_t *)ud += luna_object_size(obj);
    return 0;
}

struct result {
    double sync_s, cpu_s, rss_per_object, cache_per_object;
};

/* In a child: syncs one informer and writes its figures to fd. */
static void run_mode(const char *url, long n, bool metadata_only, int fd)
{
    struct bench_env env;
    bench_env_open(&env, url);
    luna_error err = { 0 };
    size_t base = bench_status_bytes("VmRSS:");
    double t0 = bench_now(), cpu0 = bench_process_cpu();
    struct luna_informer_spec spec = { .group = "", .version = "v1", .kind = "Secret",
                                       .namespace_ = "bench", .metadata_only = metadata_only };
    struct luna_shared_informer *si = luna_informer_factory_acquire(env.factory, &spec, &err);
    if (!si)
        bench_die("%s", err.msg);
    struct luna_informer *inf = luna_shared_informer_informer(si);
    bench_run_until(synced, inf, 600, "the informer to sync");
    struct result r = { .sync_s = bench_now() - t0, .cpu_s = bench_process_cpu() - cpu0 };
    size_t rss = bench_status_bytes("VmRSS:");
    size_t count = luna_indexer_len(luna_informer_indexer(inf)), bytes = 0;
    if (count != (size_t)n)
        bench_die("synced %zu objects, expected %ld", count, n);
    luna_indexer_each(luna_informer_indexer(inf), add_size, &bytes);
    r.rss_per_object = (double)(rss > base ? rss - base : 0) / (double)n;
    r.cache_per_object = (double)bytes / (double)n;
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r)
        bench_die("cannot report to the parent");
    luna_informer_factory_release(env.factory, si);
    bench_env_close(&env);
}

static struct result measure(const char *url, long n, bool metadata_only)
{
    int fds[2];
    if (pipe(fds) < 0)
        bench_die("pipe: %s", strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        bench_die("fork: %s", strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        run_mode(url, n, metadata_only, fds[1]);
        _exit(0);
    }
    close(fds[1]);
    struct result r;
    ssize_t got = read(fds[0], &r, sizeof r);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != (ssize_t)sizeof r || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        bench_die("the %s run failed", metadata_only ? "metadata-only" : "full");
    printf("bench informer_metadata mode=%s objects=%ld sync_s=%.3f cpu_s=%.3f "
           "rss_bytes_per_object=%.0f cache_bytes_per_object=%.0f\n",
           metadata_only ? "metadata" : "full", n, r.sync_s, r.cpu_s, r.rss_per_object,
           r.cache_per_object);
    fflush(stdout);
    return r;
}

int main(void)
{
    long n = bench_env_long("LUNA_BENCH_OBJECTS", 20000);
    luna_log_set_level(LUNA_LOG_WARN);
    char seed[256];
    snprintf(seed, sizeof seed, "%s/seed.json", bench_tmpdir());
    write_seed(seed, n);
    struct bench_server srv = { 0 };
    const char *args[] = { "--seed", seed, NULL };
    bench_server_start(&srv, args);
    /* The dev server sorts a collection on its first LIST: do it now, so
     * neither mode pays for it. */
    char url[256];
    snprintf(url, sizeof url, "%s/api/v1/namespaces/bench/secrets?limit=1", srv.url);
    if (bench_http("GET", url, NULL, NULL) != 200)
        bench_die("the dev server does not list the seeded Secrets");

    struct result full = measure(srv.url, n, false);
    struct result md = measure(srv.url, n, true);
    printf("bench informer_metadata_ratio rss=%.3f cache=%.3f cpu=%.3f sync=%.3f\n",
           full.rss_per_object > 0 ? md.rss_per_object / full.rss_per_object : 0,
           md.cache_per_object / full.cache_per_object,
           full.cpu_s > 0 ? md.cpu_s / full.cpu_s : 0, md.sync_s / full.sync_s);
    bench_server_stop(&srv);
    bench_cleanup_tmpdir();
    return 0;
}
