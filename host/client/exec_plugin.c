/* exec_plugin.c — see exec_plugin.h. */
#include "client/exec_plugin.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "base/liblog.h"

extern char **environ;

#define EXEC_INFO_ENV "KUBERNETES_EXEC_INFO"

struct luna_exec_plugin {
    char *command;
    char **argv;              /* command, args..., NULL */
    char **env;               /* configured "NAME=value" entries, NULL-terminated */
    char *exec_info;          /* "KUBERNETES_EXEC_INFO=<json>" */
    char *api_version;
    char *install_hint;       /* NULL if none */
    char *where;
    double timeout;
    struct luna_exec_credential cred;
    bool cached;              /* cred holds a credential */
    unsigned generation;      /* of the last successful run */
    unsigned runs;
};

/* ---- small helpers ------------------------------------------------------ */

static void free_strv(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

static char **copy_strv(const char *first, const char *const *items, size_t n)
{
    size_t extra = first ? 1 : 0;
    char **v = calloc(n + extra + 1, sizeof *v);
    if (!v)
        return NULL;
    if (first && !(v[0] = strdup(first))) {
        free(v);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(v[i + extra] = strdup(items[i]))) {
            free_strv(v);
            return NULL;
        }
    }
    return v;
}

static void wipe_free(char *s, size_t len)
{
    if (s) {
        explicit_bzero(s, len);
        free(s);
    }
}

static void clear_credential(struct luna_exec_credential *c)
{
    wipe_free(c->token, c->token ? strlen(c->token) : 0);
    wipe_free(c->client_cert_data, c->client_cert_len);
    wipe_free(c->client_key_data, c->client_key_len);
    memset(c, 0, sizeof *c);
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- KUBERNETES_EXEC_INFO ----------------------------------------------- */

static void gen_str(yajl_gen g, const char *s)
{
    yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

/* Re-emits a parsed JSON value. */
static void gen_value(yajl_gen g, yajl_val v)
{
    switch (v->type) {
    case yajl_t_string: gen_str(g, v->u.string); break;
    case yajl_t_number: yajl_gen_number(g, v->u.number.r, strlen(v->u.number.r)); break;
    case yajl_t_true:   yajl_gen_bool(g, 1); break;
    case yajl_t_false:  yajl_gen_bool(g, 0); break;
    case yajl_t_null:   yajl_gen_null(g); break;
    case yajl_t_object:
        yajl_gen_map_open(g);
        for (size_t i = 0; i < v->u.object.len; i++) {
            gen_str(g, v->u.object.keys[i]);
            gen_value(g, v->u.object.values[i]);
        }
        yajl_gen_map_close(g);
        break;
    case yajl_t_array:
        yajl_gen_array_open(g);
        for (size_t i = 0; i < v->u.array.len; i++)
            gen_value(g, v->u.array.values[i]);
        yajl_gen_array_close(g);
        break;
    default:
        yajl_gen_null(g);
    }
}

/* Builds "KUBERNETES_EXEC_INFO=<ExecCredential JSON>" the way client-go
 * encodes it (field order and omitempty as in the Go types). */
static int build_exec_info(const struct luna_exec_config *cfg, char **out, luna_error *err)
{
    const struct luna_exec_cluster *c = cfg->cluster;
    yajl_val config = NULL;
    if (c && c->config_json) {
        char ebuf[256];
        config = yajl_tree_parse(c->config_json, ebuf, sizeof ebuf);
        if (!config)
            return luna_error_set(err, LUNA_EINVAL, "%s: cluster exec extension is not valid JSON",
                                  cfg->where);
    }
    char *ca64 = NULL;
    if (c && c->ca_data && c->ca_data_len > 0) {
        if (c->ca_data_len > (size_t)1 << 28 ||
            !(ca64 = malloc(4 * ((c->ca_data_len + 2) / 3) + 1))) {
            yajl_tree_free(config);
            return luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", cfg->where);
        }
        EVP_EncodeBlock((unsigned char *)ca64, c->ca_data, (int)c->ca_data_len);
    }
    yajl_gen g = yajl_gen_alloc(NULL);
    if (!g) {
        free(ca64);
        yajl_tree_free(config);
        return luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", cfg->where);
    }
    yajl_gen_map_open(g);
    gen_str(g, "kind");
    gen_str(g, "ExecCredential");
    gen_str(g, "apiVersion");
    gen_str(g, cfg->api_version);
    gen_str(g, "spec");
    yajl_gen_map_open(g);
    if (c) {
        gen_str(g, "cluster");
        yajl_gen_map_open(g);
        gen_str(g, "server");
        gen_str(g, c->server ? c->server : "");
        if (c->tls_server_name && *c->tls_server_name) {
            gen_str(g, "tls-server-name");
            gen_str(g, c->tls_server_name);
        }
        if (c->insecure) {
            gen_str(g, "insecure-skip-tls-verify");
            yajl_gen_bool(g, 1);
        }
        if (ca64) {
            gen_str(g, "certificate-authority-data");
            gen_str(g, ca64);
        }
        if (c->proxy_url && *c->proxy_url) {
            gen_str(g, "proxy-url");
            gen_str(g, c->proxy_url);
        }
        if (config) {
            gen_str(g, "config");
            gen_value(g, config);
        }
        yajl_gen_map_close(g);
    }
    gen_str(g, "interactive");
    yajl_gen_bool(g, 0);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    const unsigned char *buf;
    size_t len;
    int rc = 0;
    if (yajl_gen_get_buf(g, &buf, &len) != yajl_gen_status_ok) {
        rc = luna_error_set(err, LUNA_EINVAL, "%s: cannot encode ExecCredential", cfg->where);
    } else if (!(*out = malloc(sizeof EXEC_INFO_ENV + 1 + len))) {
        rc = luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", cfg->where);
    } else {
        memcpy(*out, EXEC_INFO_ENV "=", sizeof EXEC_INFO_ENV);
        memcpy(*out + sizeof EXEC_INFO_ENV, buf, len);
        (*out)[sizeof EXEC_INFO_ENV + len] = '\0';
    }
    yajl_gen_free(g);
    free(ca64);
    yajl_tree_free(config);
    return rc;
}

/* ---- new / free --------------------------------------------------------- */

int luna_exec_plugin_new(const struct luna_exec_config *cfg,
                         struct luna_exec_plugin **out, luna_error *err)
{
    const char *where = cfg->where ? cfg->where : "exec plugin";
    if (!cfg->command || !*cfg->command)
        return luna_error_set(err, LUNA_EINVAL, "%s: command must be specified", where);
    if (!cfg->api_version || (strcmp(cfg->api_version, LUNA_EXEC_V1) != 0 &&
                              strcmp(cfg->api_version, LUNA_EXEC_V1BETA1) != 0))
        return luna_error_set(err, LUNA_EINVAL,
                              "%s: apiVersion must be " LUNA_EXEC_V1 " or " LUNA_EXEC_V1BETA1,
                              where);
    struct luna_exec_plugin *p = calloc(1, sizeof *p);
    if (!p)
        return luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", where);
    p->where = strdup(where);
    p->command = strdup(cfg->command);
    p->api_version = strdup(cfg->api_version);
    p->argv = copy_strv(cfg->command, cfg->args, cfg->nargs);
    p->env = copy_strv(NULL, cfg->env, cfg->nenv);
    if (cfg->install_hint && *cfg->install_hint)
        p->install_hint = strdup(cfg->install_hint);
    p->timeout = cfg->timeout > 0 ? cfg->timeout : LUNA_EXEC_DEFAULT_TIMEOUT;
    if (!p->where || !p->command || !p->api_version || !p->argv || !p->env ||
        (cfg->install_hint && *cfg->install_hint && !p->install_hint)) {
        luna_exec_plugin_free(p);
        return luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", where);
    }
    int rc = build_exec_info(cfg, &p->exec_info, err);
    if (rc < 0) {
        luna_exec_plugin_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void luna_exec_plugin_free(struct luna_exec_plugin *p)
{
    if (!p)
        return;
    clear_credential(&p->cred);
    free(p->command);
    free_strv(p->argv);
    free_strv(p->env);
    free(p->exec_info);
    free(p->api_version);
    free(p->install_hint);
    free(p->where);
    free(p);
}

unsigned luna_exec_plugin_runs(const struct luna_exec_plugin *p) { return p->runs; }

void luna_exec_plugin_invalidate(struct luna_exec_plugin *p, unsigned generation)
{
    if (p->cached && (generation == 0 || generation == p->cred.generation)) {
        clear_credential(&p->cred);
        p->cached = false;
    }
}

/* ---- running the child -------------------------------------------------- */

static size_t env_name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');
    return eq ? (size_t)(eq - entry) : strlen(entry);
}

/* True if an entry in later[] (NULL-terminated) sets the same name. */
static bool overridden(const char *entry, char *const *later)
{
    size_t n = env_name_len(entry);
    for (; *later; later++)
        if (env_name_len(*later) == n && strncmp(*later, entry, n) == 0)
            return true;
    return false;
}

/* environ, then configured env, then KUBERNETES_EXEC_INFO; for a name set
 * more than once the last one wins.  The strings are borrowed. */
static char **build_envp(struct luna_exec_plugin *p)
{
    size_t ne = 0, nc = 0;
    while (environ && environ[ne])
        ne++;
    while (p->env[nc])
        nc++;
    char **all = calloc(ne + nc + 2, sizeof *all);
    char **envp = calloc(ne + nc + 2, sizeof *envp);
    if (!all || !envp) {
        free(all);
        free(envp);
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; i < ne; i++)
        all[n++] = environ[i];
    for (size_t i = 0; i < nc; i++)
        all[n++] = p->env[i];
    all[n++] = p->exec_info;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!overridden(all[i], all + i + 1))
            envp[k++] = all[i];
    free(all);
    return envp;
}

static void kill_and_reap(pid_t pid)
{
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* The plugin's stderr: read without blocking and written to a stream whose
 * lines reach luna's log (liblog.h), at most LUNA_EXEC_MAX_STDERR bytes
 * per run (the rest is read and dropped). */
struct err_relay {
    int fd;              /* read end; -1 once closed */
    struct luna_liblog_stream log; /* log.file NULL when out of memory: read, dropped */
    size_t total;
};

/* Reads what is there now; closes the read end at end of stream. */
static void relay_stderr(struct err_relay *er)
{
    while (er->fd >= 0) {
        char chunk[4096];
        ssize_t got = read(er->fd, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == EAGAIN)
            return;
        if (got <= 0) {
            close(er->fd);
            er->fd = -1;
            return;
        }
        size_t room = er->total < LUNA_EXEC_MAX_STDERR ? LUNA_EXEC_MAX_STDERR - er->total : 0;
        size_t keep = (size_t)got < room ? (size_t)got : room;
        if (keep && er->log.file)
            fwrite(chunk, 1, keep, er->log.file);
        er->total += (size_t)got;
    }
}

/* Runs the plugin; on success *out (malloc'd, NUL-terminated) holds its
 * stdout.  Its stderr is errfd (closed here, whatever happens: the child
 * has its own copy), read through er. */
static int run_child_io(struct luna_exec_plugin *p, char **out, int errfd, struct err_relay *er,
                        luna_error *err)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        int e = errno;
        close(errfd);
        return luna_error_set(err, LUNA_EIO, "%s: pipe: %s", p->where, strerror(e));
    }
    char **envp = build_envp(p);
    if (!envp) {
        close(fds[0]);
        close(fds[1]);
        close(errfd);
        return luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", p->where);
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, errfd, 2);
    posix_spawnattr_init(&attr);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETPGROUP);
    pid_t pid;
    int rc = posix_spawnp(&pid, p->command, &fa, &attr, p->argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    free(envp);
    close(fds[1]);
    close(errfd);
    p->runs++;
    if (rc != 0) {
        close(fds[0]);
        if (rc == ENOENT)
            return luna_error_set(err, LUNA_ENOTFOUND, "%s: executable %s not found%s%s",
                                  p->where, p->command, p->install_hint ? ": " : "",
                                  p->install_hint ? p->install_hint : "");
        return luna_error_set(err, LUNA_EEXEC, "%s: cannot run %s: %s", p->where,
                              p->command, strerror(rc));
    }

    double deadline = mono_now() + p->timeout;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    int result = buf ? 0 : luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", p->where);
    bool eof = false;
    while (result == 0 && !eof) {
        double left = deadline - mono_now();
        if (left <= 0) {
            result = luna_error_set(err, LUNA_ETIMEOUT, "%s: %s did not finish within %g s",
                                    p->where, p->command, p->timeout);
            break;
        }
        struct pollfd pfd[2] = { { .fd = fds[0], .events = POLLIN },
                                 { .fd = er->fd, .events = POLLIN } };
        int n = poll(pfd, 2, (int)(left * 1000) + 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            result = luna_error_set(err, LUNA_EIO, "%s: poll: %s", p->where, strerror(errno));
            break;
        }
        if (pfd[1].revents)
            relay_stderr(er);
        if (!pfd[0].revents)
            continue;
        if (len + 1 >= cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                result = luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", p->where);
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        ssize_t got = read(fds[0], buf + len, cap - 1 - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            result = luna_error_set(err, LUNA_EIO, "%s: reading %s output: %s", p->where,
                                    p->command, strerror(errno));
            break;
        }
        if (got == 0)
            eof = true;
        len += (size_t)got;
        if (len > LUNA_EXEC_MAX_OUTPUT)
            result = luna_error_set(err, LUNA_ETOOBIG, "%s: %s wrote more than %d bytes",
                                    p->where, p->command, LUNA_EXEC_MAX_OUTPUT);
    }
    close(fds[0]);

    int status = 0;
    while (result == 0) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        relay_stderr(er);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            result = luna_error_set(err, LUNA_EIO, "%s: waitpid: %s", p->where, strerror(errno));
            pid = -1;
            break;
        }
        if (mono_now() >= deadline) {
            result = luna_error_set(err, LUNA_ETIMEOUT, "%s: %s did not finish within %g s",
                                    p->where, p->command, p->timeout);
            break;
        }
        struct timespec nap = { 0, 1000000 };
        nanosleep(&nap, NULL);
    }
    if (result < 0) {
        if (pid > 0)
            kill_and_reap(pid);
        if (buf)
            explicit_bzero(buf, len);
        free(buf);
        return result;
    }
    if (WIFSIGNALED(status) || WEXITSTATUS(status) != 0) {
        explicit_bzero(buf, len);
        free(buf);
        if (WIFSIGNALED(status))
            return luna_error_set(err, LUNA_EEXEC, "%s: %s was killed by signal %d",
                                  p->where, p->command, WTERMSIG(status));
        return luna_error_set(err, LUNA_EEXEC, "%s: %s failed with exit code %d",
                              p->where, p->command, WEXITSTATUS(status));
    }
    buf[len] = '\0';
    *out = buf;
    return 0;
}

static int run_child(struct luna_exec_plugin *p, char **out, luna_error *err)
{
    /* Only the read end is non-blocking: the plugin's writes must not fail
     * with EAGAIN. */
    int efds[2] = { -1, -1 };
    if (pipe2(efds, O_CLOEXEC) < 0 || fcntl(efds[0], F_SETFL, O_NONBLOCK) < 0) {
        int e = errno;
        if (efds[0] >= 0) {
            close(efds[0]);
            close(efds[1]);
        }
        return luna_error_set(err, LUNA_EIO, "%s: pipe: %s", p->where, strerror(e));
    }
    /* Install hints, "please log in", its errors: lines in luna's log, in
     * its format, never raw on luna's stderr. */
    const struct luna_liblog_source src = {
        .msg = "exec plugin stderr", .source = p->command, .level = LUNA_LOG_WARN,
    };
    struct err_relay er = { .fd = efds[0] };
    luna_liblog_stream_open(&er.log, &src);
    int rc = run_child_io(p, out, efds[1], &er, err);
    relay_stderr(&er); /* what it wrote last, if the pipe has it */
    if (er.fd >= 0)
        close(er.fd);
    luna_liblog_stream_close(&er.log);
    return rc;
}

/* ---- parsing the ExecCredential ----------------------------------------- */

static int digits(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* RFC 3339 ("2006-01-02T15:04:05.999999999Z07:00"), as Go's time.Parse. */
static int parse_rfc3339(const char *s, time_t *out)
{
    if (strlen(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' ||
        s[13] != ':' || s[16] != ':')
        return -1;
    int year = digits(s, 4), mon = digits(s + 5, 2), day = digits(s + 8, 2);
    int hour = digits(s + 11, 2), min = digits(s + 14, 2), sec = digits(s + 17, 2);
    if (year < 0 || mon < 1 || mon > 12 || day < 1 || day > 31 || hour < 0 ||
        hour > 23 || min < 0 || min > 59 || sec < 0 || sec > 59)
        return -1;
    const char *p = s + 19;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    long offset = 0;
    if (*p == 'Z') {
        p++;
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
        int oh = digits(p + 1, 2), om = digits(p + 4, 2);
        if (oh < 0 || oh > 23 || om < 0 || om > 59)
            return -1;
        offset = (oh * 60L + om) * 60L * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -1;
    }
    if (*p)
        return -1;
    struct tm tm = { .tm_year = year - 1900, .tm_mon = mon - 1, .tm_mday = day,
                     .tm_hour = hour, .tm_min = min, .tm_sec = sec };
    time_t t = timegm(&tm);
    if (tm.tm_mday != day) /* normalised: Feb 30 and the like */
        return -1;
    *out = t - offset;
    return 0;
}

static yajl_val field(yajl_val obj, const char *name)
{
    const char *path[] = { name, NULL };
    return yajl_tree_get(obj, path, yajl_t_any);
}

static int dup_string(yajl_val v, char **out, size_t *len)
{
    if (!YAJL_IS_STRING(v) || !*v->u.string)
        return 0;
    size_t n = strlen(v->u.string);
    if (!(*out = malloc(n + 1)))
        return LUNA_ENOMEM;
    memcpy(*out, v->u.string, n + 1);
    if (len)
        *len = n;
    return 0;
}

/* Parses the plugin's stdout into p->cred. */
static int parse_credential(struct luna_exec_plugin *p, char *json, time_t now, luna_error *err)
{
    char ebuf[256];
    yajl_val root = yajl_tree_parse(json, ebuf, sizeof ebuf);
    if (!root) {
        /* yajl's verbose message quotes the input after the first line. */
        ebuf[strcspn(ebuf, "\n")] = '\0';
        return luna_error_set(err, LUNA_EEXEC, "%s: %s returned invalid JSON: %s",
                              p->where, p->command, ebuf);
    }
    int rc = 0;
    struct luna_exec_credential c = { 0 };
    yajl_val api = field(root, "apiVersion"), kind = field(root, "kind");
    yajl_val status = field(root, "status");
    if (!YAJL_IS_OBJECT(root)) {
        rc = luna_error_set(err, LUNA_EEXEC, "%s: %s returned JSON that is not an object",
                            p->where, p->command);
    } else if (!YAJL_IS_STRING(kind) || strcmp(kind->u.string, "ExecCredential") != 0) {
        rc = luna_error_set(err, LUNA_EEXEC, "%s: %s returned kind %.64s, want ExecCredential",
                            p->where, p->command,
                            YAJL_IS_STRING(kind) ? kind->u.string : "(none)");
    } else if (!YAJL_IS_STRING(api) || strcmp(api->u.string, p->api_version) != 0) {
        rc = luna_error_set(err, LUNA_EEXEC,
                            "%s: %s returned apiVersion %.64s, but the kubeconfig asks for %s",
                            p->where, p->command,
                            YAJL_IS_STRING(api) ? api->u.string : "(none)", p->api_version);
    } else if (!YAJL_IS_OBJECT(status)) {
        rc = luna_error_set(err, LUNA_EEXEC, "%s: %s returned no status", p->where, p->command);
    } else {
        yajl_val token = field(status, "token");
        yajl_val cert = field(status, "clientCertificateData");
        yajl_val key = field(status, "clientKeyData");
        yajl_val exp = field(status, "expirationTimestamp");
        if (dup_string(token, &c.token, NULL) < 0 ||
            dup_string(cert, &c.client_cert_data, &c.client_cert_len) < 0 ||
            dup_string(key, &c.client_key_data, &c.client_key_len) < 0) {
            rc = luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", p->where);
        } else if ((token && !YAJL_IS_STRING(token) && !YAJL_IS_NULL(token)) ||
                   (cert && !YAJL_IS_STRING(cert) && !YAJL_IS_NULL(cert)) ||
                   (key && !YAJL_IS_STRING(key) && !YAJL_IS_NULL(key))) {
            rc = luna_error_set(err, LUNA_EEXEC,
                                "%s: %s returned a status field that is not a string",
                                p->where, p->command);
        } else if (!c.client_cert_data != !c.client_key_data) {
            rc = luna_error_set(err, LUNA_EEXEC,
                                "%s: %s returned only one of status.clientCertificateData "
                                "and status.clientKeyData", p->where, p->command);
        } else if (!c.token && !c.client_cert_data) {
            rc = luna_error_set(err, LUNA_EEXEC,
                                "%s: %s returned neither status.token nor "
                                "status.clientCertificateData and status.clientKeyData",
                                p->where, p->command);
        } else if (exp && !YAJL_IS_NULL(exp) &&
                   (!YAJL_IS_STRING(exp) || parse_rfc3339(exp->u.string, &c.expires) < 0)) {
            rc = luna_error_set(err, LUNA_EEXEC,
                                "%s: %s returned an invalid status.expirationTimestamp "
                                "(want RFC 3339)", p->where, p->command);
        }
    }
    yajl_tree_free(root);
    if (rc < 0) {
        clear_credential(&c);
        return rc;
    }
    c.fetched = now;
    c.generation = ++p->generation;
    clear_credential(&p->cred);
    p->cred = c;
    p->cached = true;
    return 0;
}

/* ---- get ---------------------------------------------------------------- */

static bool needs_refresh(const struct luna_exec_credential *c, time_t now)
{
    if (c->expires == 0)
        return false;
    time_t margin = LUNA_EXEC_REFRESH_MARGIN;
    if (c->expires > c->fetched && (c->expires - c->fetched) / 10 < margin)
        margin = (c->expires - c->fetched) / 10;
    return now >= c->expires - margin;
}

int luna_exec_plugin_get(struct luna_exec_plugin *p, time_t now,
                         const struct luna_exec_credential **out, luna_error *err)
{
    if (p->cached && !needs_refresh(&p->cred, now)) {
        *out = &p->cred;
        return 0;
    }
    if (p->cached) {
        clear_credential(&p->cred);
        p->cached = false;
    }
    char *json = NULL;
    int rc = run_child(p, &json, err);
    if (rc < 0)
        return rc;
    rc = parse_credential(p, json, now, err);
    explicit_bzero(json, strlen(json));
    free(json);
    if (rc < 0)
        return rc;
    *out = &p->cred;
    return 0;
}
