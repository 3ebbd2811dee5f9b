/*
 * informer_watch_list — an informer's initial sync of N ConfigMaps (default
 * 100,000; LUNA_BENCH_OBJECTS=n) by watch list (KEP-3157: one WATCH with
 * sendInitialEvents, the state streamed as ADDED events up to the
 * initial-events-end bookmark) against by LIST, side by side on one dev
 * server: the sync time and the peak RSS of the client and of the server.
 *
 * Each run starts a dev server (build/luna, its own process) seeded with
 * the realistic ConfigMaps of informer_bench.h and primed with one small
 * LIST, and a fresh client process (this program again, with `child MODE
 * URL`) holding one informer with default options but watch_list = on or
 * off, so each peak is that run's own; the server's peak RSS is reset
 * (/proc/PID/clear_refs) before the client starts and read after it has
 * synced.  Runs
 * alternate the modes (LUNA_BENCH_RUNS rounds, default 2), so load on the
 * machine hits both alike; the median of each figure is printed.
 *
 * LIST here is what luna (and client-go) send first: resourceVersion=0,
 * which kube-apiserver's watch cache answers as one body whatever the
 * limit, as the dev server does; a consistent paged LIST (limit/continue,
 * after a 410) is served from etcd in pages on a real server.
 *
 * Prints, per mode (watch_list, list):
 *   bench informer_watch_list mode=M objects=N sync_s=S client_cpu_s=C
 *         client_peak_mb=P client_peak_over_base_mb=D client_rss_mb=R
 *         server_peak_over_base_mb=Q server_base_mb=B
 * and the ratios watch list ÷ list:
 *   bench informer_watch_list_ratio sync=… client_peak=… server_peak=…
 */
#include "informer_bench.h"

#include <math.h>

struct run {
    double sync_s, cpu_s, peak_mb, peak_over_mb, rss_mb;
    double server_peak_over_mb, server_base_mb;
};

static bool synced(void *ud) { return luna_informer_has_synced(ud); }

/* The child: one informer, synced once; prints its figures. */
static int child(const char *mode, const char *url)
{
    luna_log_set_level(LUNA_LOG_WARN);
    struct bench_env env;
    bench_env_open(&env, url);
    luna_error err = { 0 };
    size_t base = bench_status_bytes("VmRSS:");
    bench_reset_peak();
    double t0 = bench_now(), cpu0 = bench_process_cpu();
    struct luna_informer_spec spec = {
        .group = "", .version = "v1", .kind = "ConfigMap", .namespace_ = "bench",
        .watch_list = strcmp(mode, "watch_list") == 0 ? LUNA_WATCH_LIST_ON : LUNA_WATCH_LIST_OFF,
    };
    struct luna_shared_informer *si = luna_informer_factory_acquire(env.factory, &spec, &err);
    if (!si)
        bench_die("%s", err.msg);
    struct luna_informer *inf = luna_shared_informer_informer(si);
    bench_run_until(synced, inf, 900, "the informer to sync");
    double sync_s = bench_now() - t0, cpu_s = bench_process_cpu() - cpu0;
    size_t rss = bench_status_bytes("VmRSS:"), peak = bench_status_bytes("VmHWM:");
    struct luna_reflector_stats st = luna_reflector_stats(luna_shared_informer_reflector(si));
    if (strcmp(mode, "watch_list") == 0 ? st.watch_lists != 1 : st.list_pages < 1)
        bench_die("mode %s did not sync that way", mode);
    printf("child sync_s=%.4f cpu_s=%.4f peak=%zu base=%zu rss=%zu objects=%zu\n", sync_s, cpu_s,
           peak, base, rss, luna_indexer_len(luna_informer_indexer(inf)));
    fflush(stdout);
    luna_informer_factory_release(env.factory, si);
    bench_env_close(&env);
    return 0;
}

/* VmRSS / VmHWM of another process, bytes. */
static size_t proc_status_bytes(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        bench_die("cannot read %s", path);
    size_t kb = 0, n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0)
            kb = strtoul(line + n, NULL, 10);
    fclose(f);
    return kb * 1024;
}

static void proc_reset_peak(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/clear_refs", (int)pid);
    int fd = open(path, O_WRONLY);
    if (fd < 0 || write(fd, "5", 1) != 1)
        bench_die("cannot reset the dev server's peak RSS through %s", path);
    close(fd);
}

/* A dev server of its own for each run (seeded, then primed: it sorts a
 * collection on its first read), so one run's freed heap is not the
 * next one's headroom. */
static void start_server(struct bench_server *srv, const char *seed)
{
    const char *args[] = { "--seed", seed, NULL };
    bench_server_start(srv, args);
    char url[256];
    snprintf(url, sizeof url, "%s/api/v1/namespaces/bench/configmaps?limit=1", srv->url);
    if (bench_http("GET", url, NULL, NULL) != 200)
        bench_die("priming LIST failed");
}

static struct run one_run(const char *self, const char *mode, const char *seed, long n)
{
    struct run r = { 0 };
    struct bench_server server = { 0 }, *srv = &server;
    start_server(srv, seed);
    size_t server_base = proc_status_bytes(srv->pid, "VmRSS:");
    proc_reset_peak(srv->pid);
    int fds[2];
    if (pipe(fds) < 0)
        bench_die("pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    const char *argv[] = { self, "child", mode, srv->url, NULL };
    pid_t pid;
    int rc = posix_spawn(&pid, self, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0)
        bench_die("cannot start %s: %s", self, strerror(rc));
    FILE *out = fdopen(fds[0], "r");
    char line[512];
    size_t peak = 0, base = 0, rss = 0, objects = 0;
    bool got = false;
    while (fgets(line, sizeof line, out))
        if (sscanf(line, "child sync_s=%lf cpu_s=%lf peak=%zu base=%zu rss=%zu objects=%zu",
                   &r.sync_s, &r.cpu_s, &peak, &base, &rss, &objects) == 6)
            got = true;
    fclose(out);
    int status;
    waitpid(pid, &status, 0);
    if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || objects != (size_t)n)
        bench_die("the %s run failed (%zu objects)", mode, objects);
    size_t server_peak = proc_status_bytes(srv->pid, "VmHWM:");
    r.peak_mb = (double)peak / 1e6;
    r.peak_over_mb = (double)(peak - base) / 1e6;
    r.rss_mb = (double)rss / 1e6;
    r.server_base_mb = (double)server_base / 1e6;
    r.server_peak_over_mb = (double)(server_peak > server_base ? server_peak - server_base : 0) / 1e6;
    bench_server_stop(srv);
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const struct run *runs, int k, size_t offset)
{
    double v[64];
    for (int i = 0; i < k; i++)
        v[i] = *(const double *)((const char *)&runs[i] + offset);
    qsort(v, (size_t)k, sizeof v[0], cmp_double);
    return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "child") == 0)
        return child(argv[2], argv[3]);
    long n = bench_env_long("LUNA_BENCH_OBJECTS", 100000);
    long rounds = bench_env_long("LUNA_BENCH_RUNS", 2);
    if (rounds > 32)
        bench_die("LUNA_BENCH_RUNS must be at most 32");
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        bench_die("cannot find this executable");
    self[len] = '\0';

    char seed[256];
    snprintf(seed, sizeof seed, "%s/seed.json", bench_tmpdir());
    bench_write_seed(seed, 1, n, 1);
    static const char *const modes[] = { "watch_list", "list" };
    struct run runs[2][32];
    for (long i = 0; i < rounds; i++)
        for (int j = 0; j < 2; j++) {
            int m = (int)((i + j) % 2);
            runs[m][i] = one_run(self, modes[m], seed, n);
        }
    double med[2][7];
    static const size_t fields[] = {
        offsetof(struct run, sync_s), offsetof(struct run, cpu_s), offsetof(struct run, peak_mb),
        offsetof(struct run, peak_over_mb), offsetof(struct run, rss_mb),
        offsetof(struct run, server_peak_over_mb), offsetof(struct run, server_base_mb),
    };
    for (int m = 0; m < 2; m++) {
        for (int f = 0; f < 7; f++)
            med[m][f] = median(runs[m], (int)rounds, fields[f]);
        printf("bench informer_watch_list mode=%s objects=%ld runs=%ld sync_s=%.3f "
               "client_cpu_s=%.3f client_peak_mb=%.1f client_peak_over_base_mb=%.1f "
               "client_rss_mb=%.1f server_peak_over_base_mb=%.1f server_base_mb=%.1f\n",
               modes[m], n, rounds, med[m][0], med[m][1], med[m][2], med[m][3], med[m][4],
               med[m][5], med[m][6]);
    }
    printf("bench informer_watch_list_ratio objects=%ld sync=%.2f client_cpu=%.2f "
           "client_peak_over_base=%.2f server_peak_over_base=%.2f\n",
           n, med[0][0] / med[1][0], med[0][1] / med[1][1], med[0][3] / med[1][3],
           med[1][5] > 0 ? med[0][5] / med[1][5] : NAN);
    fflush(stdout);
    bench_cleanup_tmpdir();
    return 0;
}
