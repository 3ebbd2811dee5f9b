/*
 * informer_bench.h — what the informer benchmarks (informer_sync,
 * informer_relist, informer_watch) share: realistic ConfigMaps for a dev
 * server seed, starting `luna dev-server`, an informer on the C API, running
 * the loop until a condition holds, and reading this process's memory from
 * /proc/self/status.
 *
 * Each benchmark is one process holding the informer (the "host" whose RSS
 * is measured); the dev server runs in a child process.  Static functions:
 * included by one .c each.
 *
 * Knobs (environment): LUNA_BENCH_OBJECTS (object count), LUNA_BIN (the
 * luna executable, default build/luna), LUNA_BENCH_URL (informer_sync only:
 * a dev server already seeded with the same objects, to profile the
 * informer side alone).
 */
#ifndef LUNA_INFORMER_BENCH_H
#define LUNA_INFORMER_BENCH_H

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/discovery.h"
#include "client/http.h"
#include "cache/informer_factory.h"
#include "client/kube_client.h"
#include "client/kubeconfig.h"
#include "base/log.h"
#include "base/loop.h"

extern char **environ;

static inline void bench_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline double bench_thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time (user + system) of this process so far, seconds. */
static inline double bench_process_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline long bench_env_long(const char *name, long def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n <= 0)
        bench_die("%s must be a positive number", name);
    return n;
}

/* VmRSS / VmHWM ("VmRSS:" etc.) of this process in bytes. */
static inline size_t bench_status_bytes(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        bench_die("cannot read /proc/self/status");
    char line[256];
    size_t kb = 0, n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0)
            kb = strtoul(line + n, NULL, 10);
    fclose(f);
    return kb * 1024;
}

/* Resets VmHWM to the current RSS, so a later VmHWM is the peak since now. */
static inline void bench_reset_peak(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd < 0 || write(fd, "5", 1) != 1)
        bench_die("cannot reset the peak RSS through /proc/self/clear_refs");
    close(fd);
}

static inline const char *bench_tmpdir(void)
{
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/luna-bench-XXXXXX");
        if (!mkdtemp(dir))
            bench_die("mkdtemp: %s", strerror(errno));
    }
    return dir;
}

static inline void bench_cleanup_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", bench_tmpdir());
    if (system(cmd) != 0)
        fprintf(stderr, "bench: could not remove %s\n", bench_tmpdir());
}

/* ---- realistic ConfigMaps --------------------------------------------- */

/* One ConfigMap as a dev server seed item: five recommended labels, a
 * checksum annotation, a properties file, a YAML file and two plain keys.
 * The dev server adds uid, resourceVersion, creationTimestamp and one
 * managedFields entry (manager luna-seed): about 1.7 KB of JSON in all,
 * about 1.24 KB without managedFields.  `version` varies the content. */
static inline void bench_write_configmap(FILE *f, long i, long version)
{
    fprintf(f,
            "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
            "\"name\":\"app-config-%06ld\",\"namespace\":\"bench\","
            "\"labels\":{\"app.kubernetes.io/name\":\"shop-%ld\","
            "\"app.kubernetes.io/instance\":\"shop-%ld-prod\","
            "\"app.kubernetes.io/component\":\"config\","
            "\"app.kubernetes.io/part-of\":\"shop\","
            "\"app.kubernetes.io/managed-by\":\"luna-bench\"},"
            "\"annotations\":{\"config.luna.example.com/checksum\":"
            "\"sha256:%016lx%016lx%016lx%016lx\"}},"
            "\"data\":{"
            "\"application.properties\":\"server.port=8080\\nserver.shutdown=graceful\\n"
            "spring.datasource.url=jdbc:postgresql://db-%ld.shop.svc:5432/shop\\n"
            "spring.datasource.hikari.maximum-pool-size=20\\n"
            "management.endpoints.web.exposure.include=health,info,prometheus\\n"
            "logging.level.root=INFO\\nfeature.checkout.v2=%s\\n\","
            "\"config.yaml\":\"replicas: 3\\nimage: registry.example.com/shop/app:1.%ld.%ld\\n"
            "resources:\\n  requests:\\n    cpu: 250m\\n    memory: 256Mi\\n  limits:\\n"
            "    memory: 512Mi\\nprobes:\\n  liveness: /healthz\\n  readiness: /readyz\\n"
            "tracing:\\n  endpoint: http://otel-collector.observability:4317\\n"
            "  sampleRate: 0.1\\nautoscaling:\\n  minReplicas: 2\\n  maxReplicas: 10\\n\","
            "\"LOG_LEVEL\":\"info\",\"REVISION\":\"%ld\"}}",
            i, i % 500, i % 500, (unsigned long)i * 0x9e3779b97f4a7c15ul,
            (unsigned long)version * 0xbf58476d1ce4e5b9ul, (unsigned long)i ^ 0x94d049bb133111ebul,
            (unsigned long)(i + version), i % 16, (i + version) % 2 ? "true" : "false", i % 100,
            version, version);
}

/* Writes a List seed file of objects first..last (inclusive) at version. */
static inline void bench_write_seed(const char *path, long first, long last, long version)
{
    FILE *f = fopen(path, "w");
    if (!f)
        bench_die("cannot write %s: %s", path, strerror(errno));
    fputs("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[", f);
    for (long i = first; i <= last; i++) {
        if (i > first)
            fputc(',', f);
        bench_write_configmap(f, i, version);
    }
    fputs("]}\n", f);
    if (fclose(f) != 0)
        bench_die("cannot write %s", path);
}

/* ---- the dev server ----------------------------------------------------- */

struct bench_server {
    pid_t pid;
    char url[128];
};

/* Starts `luna dev-server --listen 127.0.0.1:0 ARGS...` (NULL-terminated)
 * and waits for its "listening on" line. */
static inline void bench_server_start(struct bench_server *s, const char *const *args)
{
    const char *bin = getenv("LUNA_BIN") ? getenv("LUNA_BIN") : "build/luna";
    const char *argv[32] = { bin, "dev-server", "--listen", "127.0.0.1:0", "--log-level",
                             "warn" };
    int n = 6;
    for (; args && *args && n < 31; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    int fds[2];
    if (pipe(fds) < 0)
        bench_die("pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    int rc = posix_spawn(&s->pid, bin, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0)
        bench_die("cannot start %s: %s", bin, strerror(rc));
    FILE *out = fdopen(fds[0], "r");
    char line[256];
    s->url[0] = '\0';
    while (fgets(line, sizeof line, out)) {
        if (sscanf(line, "listening on %127s", s->url) == 1)
            break;
    }
    fclose(out);
    if (!s->url[0])
        bench_die("the dev server did not start");
}

static inline void bench_server_stop(struct bench_server *s)
{
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
}

/* ---- blocking HTTP for set-up (libcurl easy) ------------------------------ */

struct bench_body {
    char *p;
    size_t len, cap;
};

static inline size_t bench_body_write(char *data, size_t size, size_t n, void *ud)
{
    struct bench_body *b = ud;
    size_t add = size * n;
    if (b->len + add + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->len + add + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, add);
    b->len += add;
    b->p[b->len] = '\0';
    return add;
}

/* method url [body]: returns the HTTP status; the response body goes to
 * *out (NUL-terminated, free() it) when out is not NULL. */
static inline long bench_http(const char *method, const char *url, const char *body,
                              struct bench_body *out)
{
    CURL *c = curl_easy_init();
    struct bench_body sink = { 0 };
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: text/plain");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, bench_body_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out ? out : &sink);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(sink.p);
    if (rc != CURLE_OK)
        bench_die("%s %s: %s", method, url, curl_easy_strerror(rc));
    return status;
}

/* ---- an informer on the C API -------------------------------------------- */

struct bench_env {
    struct luna_kubeconfig *cfg;
    luna_http_client *http;
    struct luna_kube_client *kc;
    struct luna_discovery *disc;
    struct luna_informer_factory *factory;
};

static inline void bench_env_open(struct bench_env *e, const char *url)
{
    char path[256];
    snprintf(path, sizeof path, "%s/kubeconfig", bench_tmpdir());
    FILE *f = fopen(path, "w");
    if (!f)
        bench_die("cannot write %s", path);
    fprintf(f, "apiVersion: v1\nkind: Config\n"
               "clusters: [{name: dev, cluster: {server: \"%s\"}}]\n"
               "users: [{name: dev, user: {}}]\n"
               "contexts: [{name: dev, context: {cluster: dev, user: dev}}]\n"
               "current-context: dev\n", url);
    fclose(f);
    luna_error err = { 0 };
    struct luna_kubeconfig_options ko = { .path = path };
    if (luna_kubeconfig_load(&ko, &e->cfg, &err) < 0 ||
        !(e->http = luna_http_client_new(luna_loop(), &err)) ||
        luna_kube_client_new(e->cfg, e->http, &e->kc, &err) < 0 ||
        luna_discovery_new(e->kc, &e->disc, &err) < 0 ||
        luna_informer_factory_new(e->kc, e->disc, &e->factory, &err) < 0)
        bench_die("%s", err.msg);
}

static inline void bench_env_close(struct bench_env *e)
{
    luna_informer_factory_free(e->factory);
    luna_discovery_free(e->disc);
    luna_kube_client_free(e->kc);
    luna_http_client_free(e->http);
    luna_kubeconfig_free(e->cfg);
}

static inline void bench_tick(struct ev_loop *loop, ev_timer *w, int revents) {}

/* Runs the loop until pred(ud) is true; dies after `secs`. */
static inline void bench_run_until(bool (*pred)(void *), void *ud, double secs, const char *what)
{
    struct ev_loop *loop = luna_loop();
    ev_timer tick;
    ev_timer_init(&tick, bench_tick, 0.001, 0.001);
    ev_timer_start(loop, &tick);
    double deadline = bench_now() + secs;
    while (!pred(ud)) {
        if (bench_now() > deadline)
            bench_die("timed out waiting for %s", what);
        ev_run(loop, EVRUN_ONCE);
    }
    ev_timer_stop(loop, &tick);
}

#endif
