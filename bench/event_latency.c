/*
 * event_latency — watch event received → reconcile started, under a steady
 * write load (the release build).
 *
 *   build/bench/event_latency [rate=5000] [seconds=5] [warmup=1] [objects=5000]
 *                             [workers=8] [connections=16]
 *
 * Three processes on this machine: `luna dev-server` seeded with `objects`
 * ConfigMaps; `luna run` with one trivial controller over them (a lister
 * get and a field read per reconcile) and LUNA_EVENT_LATENCY=1, the probe
 * in host/cache/event_latency.h; and this program, which PATCHes the ConfigMaps
 * round-robin at `rate` writes per second over keep-alive connections
 * (libcurl multi, at most `connections` at once), each write carrying its
 * CLOCK_MONOTONIC send time.  After `warmup` seconds of load it sends luna
 * SIGUSR1 (report and clear: the warm-up is left out), after `seconds`
 * more it sends SIGUSR1 again and reads that report.  The controller also
 * times each write end to end (send time → its reconcile, through the
 * dev server) and logs that when the bench patches the "report" object.
 * Prints
 *   bench event_latency events=N rate=R p50_ms=… p90_ms=… p99_ms=… max_ms=…
 *         mean_ms=… recv_p50_ms=… recv_p99_ms=… e2e_p50_ms=… e2e_p99_ms=…
 *         writes=W write_rate=… write_errors=E luna_cpu=… server_cpu=… writer_cpu=…
 *         luna_preempted=P loadavg=L
 * where events are the reconciles the probe matched to a watch event, the
 * p*_ms are from the informer hand-off, recv_* from the arrival of the
 * watch chunk that carried the event, e2e_* from the writer's send (the
 * dev server's work and the machine's scheduling included), write_rate
 * is what the writer achieved, *_cpu the share of one core each process
 * used during the measured window, luna_preempted how often the kernel
 * took the CPU from luna while it could run, and loadavg the machine's
 * 1-minute load.
 */
#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static struct {
    long rate, seconds, warmup, objects, workers, connections;
} opt = { 5000, 5, 1, 5000, 8, 16 };

static char dir[64];
static char luna_path[4096];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The send time stamped into each write: wall clock, because the script
 * reading it runs sandboxed and only has luna.time.now() (CLOCK_REALTIME). */
static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "event_latency: %s\n", what);
    exit(1);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        die(path);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 4096) {
            char *b = realloc(buf, cap *= 2);
            if (!b) {
                free(buf);
                buf = NULL;
            }
            buf = b;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* Spawns argv with stdout and stderr appended to log; extra env entries. */
static pid_t spawn(char *const argv[], const char *log, const char *extra_env)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env)
        die("out of memory");
    memcpy(env, environ, n * sizeof *env);
    env[n] = (char *)extra_env;
    pid_t pid;
    if (posix_spawn(&pid, argv[0], &fa, NULL, argv, env) != 0)
        die("spawn failed");
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    return pid;
}

/* Waits until the log has a line containing `what` after byte `from`;
 * returns that line (static buffer). */
static const char *await_line(const char *log, const char *what, size_t from, double secs)
{
    static char line[4096];
    double end = now_s() + secs;
    while (now_s() < end) {
        char *text = read_text(log);
        if (text && strlen(text) > from) {
            char *hit = strstr(text + from, what);
            if (hit) {
                char *start = hit;
                while (start > text && start[-1] != '\n')
                    start--;
                char *eol = strchr(hit, '\n');
                if (eol) {
                    snprintf(line, sizeof line, "%.*s", (int)(eol - start), start);
                    free(text);
                    return line;
                }
            }
        }
        free(text);
        usleep(20000);
    }
    fprintf(stderr, "event_latency: no \"%s\" in %s\n", what, log);
    exit(1);
}

static size_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

/* CPU seconds (user + system) of pid so far. */
static double cpu_s(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *text = read_text(path);
    if (!text)
        return 0;
    char *p = strrchr(text, ')');
    unsigned long ut = 0, st = 0;
    /* fields after the command: state ppid ... utime(14) stime(15) */
    if (p)
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
    free(text);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Involuntary context switches of pid so far (preempted while runnable). */
static long preempted(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    char *text = read_text(path);
    const char *p = text ? strstr(text, "nonvoluntary_ctxt_switches:") : NULL;
    long n = p ? strtol(p + 27, NULL, 10) : 0;
    free(text);
    return n;
}

static double field(const char *line, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, " %s=", name);
    const char *p = strstr(line, key);
    return p ? strtod(p + strlen(key), NULL) : -1;
}

/* ---- the writer -------------------------------------------------------- */

struct slot {
    CURL *easy;
    struct curl_slist *headers;
    char url[256];
    char body[128];
    int busy;
};

static size_t discard(char *data, size_t size, size_t n, void *ud) { return size * n; }

struct load {
    CURLM *multi;
    struct slot *slots;
    int nslots, inflight;
    const char *server;
    unsigned long started, done, errors;
};

static void start_write(struct load *l)
{
    struct slot *s = NULL;
    for (int i = 0; i < l->nslots; i++)
        if (!l->slots[i].busy) {
            s = &l->slots[i];
            break;
        }
    if (!s)
        return;
    unsigned long n = l->started++;
    snprintf(s->url, sizeof s->url, "%s/api/v1/namespaces/lat/configmaps/cm-%06lu", l->server,
             n % (unsigned long)opt.objects);
    snprintf(s->body, sizeof s->body, "{\"data\":{\"seq\":\"%lu\",\"t\":\"%.9f\"}}", n, wall_s());
    curl_easy_setopt(s->easy, CURLOPT_URL, s->url);
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->body);
    curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
    s->busy = 1;
    l->inflight++;
    curl_multi_add_handle(l->multi, s->easy);
}

static void reap(struct load *l)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(l->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct slot *s;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
        long status = 0;
        curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &status);
        if (m->data.result != CURLE_OK || status != 200)
            l->errors++;
        curl_multi_remove_handle(l->multi, m->easy_handle);
        s->busy = 0;
        l->inflight--;
        l->done++;
    }
}

/* Asks the controller to log its end-to-end samples and start over. */
static void report(const char *server, unsigned long n)
{
    char url[512], body[64];
    snprintf(url, sizeof url, "%s/api/v1/namespaces/lat/configmaps/report", server);
    snprintf(body, sizeof body, "{\"data\":{\"seq\":\"%lu\"}}", n);
    CURL *e = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/merge-patch+json");
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PATCH");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
    if (curl_easy_perform(e) != CURLE_OK)
        die("report PATCH failed");
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
}

/* Writes at opt.rate until `until`. */
static void run_load(struct load *l, double t0, double until)
{
    while (1) {
        double t = now_s();
        if (t >= until)
            break;
        unsigned long due = (unsigned long)((t - t0) * (double)opt.rate);
        while (l->started < due && l->inflight < l->nslots)
            start_write(l);
        int running;
        curl_multi_perform(l->multi, &running);
        reap(l);
        curl_multi_poll(l->multi, NULL, 0, 1, NULL);
    }
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        char key[32];
        long v;
        if (sscanf(argv[i], "%31[a-z]=%ld", key, &v) != 2 || v <= 0)
            die("usage: event_latency [rate=N] [seconds=N] [warmup=N] [objects=N] [workers=N] "
                "[connections=N]");
        if (!strcmp(key, "rate")) opt.rate = v;
        else if (!strcmp(key, "seconds")) opt.seconds = v;
        else if (!strcmp(key, "warmup")) opt.warmup = v;
        else if (!strcmp(key, "objects")) opt.objects = v;
        else if (!strcmp(key, "workers")) opt.workers = v;
        else if (!strcmp(key, "connections")) opt.connections = v;
        else die("unknown option");
    }
    /* build/bench/event_latency → build/luna */
    ssize_t n = readlink("/proc/self/exe", luna_path, sizeof luna_path - 16);
    if (n <= 0)
        die("readlink /proc/self/exe");
    luna_path[n] = '\0';
    char *slash = strrchr(luna_path, '/');
    *slash = '\0';
    slash = strrchr(luna_path, '/');
    strcpy(slash, "/luna");

    snprintf(dir, sizeof dir, "/tmp/luna-bench-XXXXXX");
    if (!mkdtemp(dir))
        die("mkdtemp");
    char path[512], ctl[128], seed[128], kubeconfig[128], server_log[128], luna_log[128];
    snprintf(seed, sizeof seed, "%s/seed.json", dir);
    snprintf(ctl, sizeof ctl, "%s/ctl", dir);
    snprintf(kubeconfig, sizeof kubeconfig, "%s/kubeconfig", dir);
    snprintf(server_log, sizeof server_log, "%s/server.log", dir);
    snprintf(luna_log, sizeof luna_log, "%s/luna.log", dir);
    mkdir(ctl, 0755);

    FILE *f = fopen(seed, "w");
    if (!f)
        die(seed);
    fprintf(f, "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":["
               "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"lat\"}}");
    for (long i = 0; i < opt.objects; i++)
        fprintf(f, ",{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                   "\"cm-%06ld\",\"namespace\":\"lat\",\"labels\":{\"app\":\"bench\"}},"
                   "\"data\":{\"seq\":\"0\",\"config\":\"value-%ld\"}}", i, i);
    fprintf(f, ",{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
               "\"report\",\"namespace\":\"lat\"},\"data\":{\"seq\":\"0\"}}");
    fprintf(f, "]}\n");
    fclose(f);

    snprintf(path, sizeof path, "%s/latency.lua", ctl);
    char code[4096];
    snprintf(code, sizeof code,
             "local luna = require \"luna\"\n"
             "local now = luna.time.now\n"
             "local samples, n = {}, 0\n"
             "return luna.controller {\n"
             "  name = \"latency\", watch = { \"v1/ConfigMap\", namespace = \"lat\" },\n"
             "  workers = %ld,\n"
             "  reconcile = function(req)\n"
             "    local t1 = now()\n"
             "    local cm = luna.cache(\"v1/ConfigMap\"):get(req.namespace, req.name)\n"
             "    if not cm then return end\n"
             "    if req.name == \"report\" then\n"
             "      local v = {}\n"
             "      for i = 1, n do v[i] = samples[i] end\n"
             "      table.sort(v)\n"
             "      local function q(f) return n > 0 and v[math.max(1, math.ceil(f * n))] * 1e3 or 0 end\n"
             "      luna.log.info(\"e2e latency\", { samples = n, e2e_p50_ms = string.format(\"%%.3f\", q(0.5)),\n"
             "        e2e_p99_ms = string.format(\"%%.3f\", q(0.99)) })\n"
             "      n = 0\n"
             "      return\n"
             "    end\n"
             "    local t0 = tonumber(cm.data.t)\n"
             "    if t0 then n = n + 1; samples[n] = t1 - t0 end\n"
             "  end,\n"
             "}\n", opt.workers);
    write_text(path, code);

    char *server_argv[] = { luna_path, "dev-server", "--listen", "127.0.0.1:0", "--seed", seed,
                            NULL };
    pid_t server = spawn(server_argv, server_log, NULL);
    const char *line = await_line(server_log, "listening on ", 0, 60);
    char url[256];
    if (sscanf(strstr(line, "listening on ") + 13, "%255s", url) != 1)
        die("no server url");
    char kc[1024];
    snprintf(kc, sizeof kc,
             "apiVersion: v1\nkind: Config\n"
             "clusters: [{name: d, cluster: {server: \"%s\"}}]\n"
             "users: [{name: d, user: {}}]\n"
             "contexts: [{name: d, context: {cluster: d, user: d}}]\n"
             "current-context: d\n", url);
    write_text(kubeconfig, kc);

    char *luna_argv[] = { luna_path, "run", "--kubeconfig", kubeconfig,
                          "--metrics-bind-address=0", "--health-probe-bind-address=0", ctl, NULL };
    pid_t luna = spawn(luna_argv, luna_log, "LUNA_EVENT_LATENCY=1");
    await_line(luna_log, "caches synced", 0, 120);
    /* The initial adds reconcile every object once; let them finish. */
    sleep(1);

    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct load l = { .server = url, .nslots = (int)opt.connections };
    l.multi = curl_multi_init();
    curl_multi_setopt(l.multi, CURLMOPT_MAX_HOST_CONNECTIONS, opt.connections);
    l.slots = calloc((size_t)l.nslots, sizeof *l.slots);
    for (int i = 0; i < l.nslots; i++) {
        struct slot *s = &l.slots[i];
        s->easy = curl_easy_init();
        s->headers = curl_slist_append(NULL, "Content-Type: application/merge-patch+json");
        curl_easy_setopt(s->easy, CURLOPT_CUSTOMREQUEST, "PATCH");
        curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->headers);
        curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(s->easy, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(s->easy, CURLOPT_TIMEOUT, 10L);
    }

    double t0 = now_s();
    run_load(&l, t0, t0 + (double)opt.warmup);
    size_t mark = file_size(luna_log);
    kill(luna, SIGUSR1);
    report(url, 1);
    await_line(luna_log, "event latency", mark, 10);
    await_line(luna_log, "e2e latency", mark, 10);
    unsigned long writes0 = l.started, errors0 = l.errors;
    double luna_cpu0 = cpu_s(luna), server_cpu0 = cpu_s(server), self_cpu0 = cpu_s(getpid());
    long preempt0 = preempted(luna);
    double m0 = now_s();
    run_load(&l, t0, m0 + (double)opt.seconds);
    mark = file_size(luna_log);
    kill(luna, SIGUSR1);
    report(url, 2);
    double m1 = now_s();
    double luna_cpu = cpu_s(luna) - luna_cpu0, server_cpu = cpu_s(server) - server_cpu0;
    double self_cpu = cpu_s(getpid()) - self_cpu0;
    long preempts = preempted(luna) - preempt0;
    double load = 0;
    char *loadavg = read_text("/proc/loadavg");
    if (loadavg)
        load = strtod(loadavg, NULL);
    free(loadavg);
    unsigned long writes = l.started - writes0;
    char probe[4096], e2e[4096];
    snprintf(probe, sizeof probe, "%s", await_line(luna_log, "event latency", mark, 10));
    line = probe;
    snprintf(e2e, sizeof e2e, "%s", await_line(luna_log, "e2e latency", mark, 10));

    printf("bench event_latency events=%.0f rate=%ld p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f "
           "max_ms=%.3f mean_ms=%.3f recv_p50_ms=%.3f recv_p99_ms=%.3f e2e_p50_ms=%.3f "
           "e2e_p99_ms=%.3f writes=%lu write_rate=%.0f write_errors=%lu "
           "luna_cpu=%.2f server_cpu=%.2f writer_cpu=%.2f luna_preempted=%ld loadavg=%.2f\n",
           field(line, "events"), opt.rate, field(line, "p50_ms"), field(line, "p90_ms"),
           field(line, "p99_ms"), field(line, "max_ms"), field(line, "mean_ms"), field(line, "recv_p50_ms"),
           field(line, "recv_p99_ms"), field(e2e, "e2e_p50_ms"), field(e2e, "e2e_p99_ms"), writes,
           (double)writes / (m1 - m0), l.errors - errors0, luna_cpu / (m1 - m0),
           server_cpu / (m1 - m0), self_cpu / (m1 - m0), preempts, load);
    fflush(stdout);

    /* Let the last writes finish, then stop everything. */
    double end = now_s() + 5;
    while (l.inflight > 0 && now_s() < end) {
        int running;
        curl_multi_perform(l.multi, &running);
        reap(&l);
        curl_multi_poll(l.multi, NULL, 0, 10, NULL);
    }
    for (int i = 0; i < l.nslots; i++) {
        if (l.slots[i].busy)
            curl_multi_remove_handle(l.multi, l.slots[i].easy);
        curl_easy_cleanup(l.slots[i].easy);
        curl_slist_free_all(l.slots[i].headers);
    }
    curl_multi_cleanup(l.multi);
    free(l.slots);
    curl_global_cleanup();
    kill(luna, SIGTERM);
    kill(server, SIGTERM);
    waitpid(luna, NULL, 0);
    waitpid(server, NULL, 0);
    if (!getenv("LUNA_BENCH_KEEP")) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "event_latency: could not remove %s\n", dir);
    }
    return 0;
}
