/* devserver.c — see devserver.h. */
#include "devserver/devserver.h"

#include <errno.h>
#include <ev.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef __GLIBC__
#endif
#include <string.h>
#include <sys/resource.h>

#include "devserver/devserver_api.h"
#include "devserver/devserver_faults.h"
#include "devserver/devserver_http.h"
#include "devserver/devserver_seed.h"
#include "devserver/devserver_state.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_watch.h"
#include "devserver/devserver_yaml.h"
#include "base/error.h"
#include "base/heap.h"
#include "base/log.h"
#include "base/loop.h"

static void usage(FILE *out)
{
    fputs("usage: luna dev-server --listen HOST:PORT [options]\n"
          "\n"
          "An in-memory Kubernetes API server (HTTP/1.1, JSON).\n"
          "\n"
          "  --listen HOST:PORT       numeric address and port (port 0 picks a free one)\n"
          "  --seed FILE              create the objects in a YAML/JSON manifest (repeatable)\n"
          "  --token TOKEN            require 'Authorization: Bearer TOKEN' or a token the\n"
          "                           server issued (TokenRequest) (401 otherwise); TOKEN\n"
          "                           reviews as user admin in system:masters\n"
          "  --tls-cert FILE          serve HTTPS with this PEM certificate ...\n"
          "  --tls-key FILE           ... and this PEM key\n"
          "  --faults SPEC            inject faults, e.g. error-rate=0.1,error-code=429\n"
          "  --admin                  serve PUT/GET /luna/v1/faults to change faults at run time\n"
          "  --history N              watch events kept per resource (default 10000)\n"
          "  --bookmark-interval S    seconds between watch bookmarks (default 60)\n"
          "  --dump-on-exit FILE      write every object to FILE on SIGTERM/SIGINT\n"
          "  --log-level LEVEL        debug, info, warn or error (default: info)\n"
          "  --max-connections N      connections served at once; one more is answered 503\n"
          "                           and closed (default 1000)\n"
          "  --read-header-timeout S  seconds a request's head may take (default 32)\n"
          "  --idle-timeout S         seconds a connection may send and read nothing\n"
          "                           (default 90)\n"
          "  --watch-buffer BYTES     unread bytes a watcher may fall behind before its\n"
          "                           watch is ended (default 4194304)\n"
          "  --webhook-service NS/NAME=HOST:PORT\n"
          "                           where an admission webhook's clientConfig.service is\n"
          "                           reached (repeatable; TLS still verifies NAME.NS.svc)\n",
          out);
}

/* Go programs (kube-apiserver among them) raise their soft limit on open
 * files to the hard one at start: so does the dev server, so that its
 * connection cap, not the descriptor limit, is what a crowd meets. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static char *read_file(const char *path, size_t *len, luna_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        luna_error_set(err, LUNA_EIO, "cannot open: %s", strerror(errno));
        return NULL;
    }
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        luna_error_set(err, LUNA_ENOMEM, "out of memory");
        return NULL;
    }
    for (;;) {
        if (n + 4096 > cap) {
            cap *= 2;
            char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                luna_error_set(err, LUNA_ENOMEM, "out of memory");
                return NULL;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        luna_error_set(err, LUNA_EIO, "read error");
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Loads one seed file; err says what is wrong, not the file (callers name
 * it). */
static int load_seed(luna_ds *ds, const char *path, luna_error *err)
{
    size_t len;
    char *text = read_file(path, &len, err);
    if (!text)
        return LUNA_EIO;
    /* A JSON document (YAML's subset) loads with jansson, several times
     * faster than libyaml on a large seed; anything else goes to YAML. */
    json_t *docs = NULL;
    size_t lead = strspn(text, " \t\r\n");
    if (text[lead] == '{') {
        json_t *doc = json_loadb(text, len, 0, NULL);
        if (doc && (docs = json_array()) && json_array_append_new(docs, doc) < 0) {
            json_decref(docs);
            docs = NULL;
        } else if (doc && !docs) {
            json_decref(doc);
        }
    }
    if (!docs)
        docs = luna_ds_yaml_load(text, len, err);
    free(text);
    if (!docs)
        return err->code ? err->code : LUNA_EINVAL;
    size_t i;
    json_t *doc;
    json_array_foreach(docs, i, doc) {
        if (luna_ds_seed_load(ds, doc, err) < 0) {
            json_decref(docs);
            return luna_error_wrap(err, "document %zu", i + 1);
        }
    }
    json_decref(docs);
    return 0;
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)revents;
    luna_ds *ds = w->data;
    luna_ds_watch_end_all(&ds->watches);
    ev_break(loop, EVBREAK_ALL);
}

static int split_listen(const char *listen, char *host, size_t hostsize, int *port)
{
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen)
        return -1;
    size_t n = (size_t)(colon - listen);
    if (listen[0] == '[' && n >= 2 && listen[n - 1] == ']') {
        listen++;
        n -= 2;
    }
    if (n >= hostsize)
        return -1;
    memcpy(host, listen, n);
    host[n] = '\0';
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 0 || p > 65535 || colon[1] == '\0')
        return -1;
    *port = (int)p;
    return 0;
}

int luna_devserver_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "listen", required_argument, NULL, 'L' },
        { "seed", required_argument, NULL, 's' },
        { "token", required_argument, NULL, 't' },
        { "tls-cert", required_argument, NULL, 'c' },
        { "tls-key", required_argument, NULL, 'k' },
        { "faults", required_argument, NULL, 'f' },
        { "admin", no_argument, NULL, 'a' },
        { "history", required_argument, NULL, 'H' },
        { "bookmark-interval", required_argument, NULL, 'b' },
        { "dump-on-exit", required_argument, NULL, 'd' },
        { "log-level", required_argument, NULL, 'l' },
        { "max-connections", required_argument, NULL, 'C' },
        { "read-header-timeout", required_argument, NULL, 'R' },
        { "idle-timeout", required_argument, NULL, 'I' },
        { "watch-buffer", required_argument, NULL, 'W' },
        { "webhook-service", required_argument, NULL, 'S' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *listen = NULL, *token = NULL, *cert_file = NULL, *key_file = NULL;
    const char *faults = NULL, *dump = NULL;
    const char **seeds = calloc((size_t)argc + 1, sizeof *seeds);
    const char **services = calloc((size_t)argc + 1, sizeof *services);
    int nservices = 0;
    if (!seeds || !services) {
        free(services);
        free(seeds);
        fprintf(stderr, "luna dev-server: out of memory\n");
        return 1;
    }
    int nseeds = 0;
    size_t history = 0;
    bool admin = false;
    double bookmark_interval = 60;
    double idle_timeout = 0, read_header_timeout = 0;
    unsigned long max_connections = 0, watch_buffer = 0;
    int ch;
    optind = 1;
    int rc = 2;
    char *cert = NULL, *key = NULL;
    luna_ds *ds = NULL;
    luna_ds_http *srv = NULL;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'L': listen = optarg; break;
        case 's': seeds[nseeds++] = optarg; break;
        case 'S': services[nservices++] = optarg; break;
        case 't': token = optarg; break;
        case 'c': cert_file = optarg; break;
        case 'k': key_file = optarg; break;
        case 'f': faults = optarg; break;
        case 'a': admin = true; break;
        case 'd': dump = optarg; break;
        case 'H': {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1) {
                fprintf(stderr, "luna dev-server: --history must be a positive number\n");
                goto out;
            }
            history = (size_t)n;
            break;
        }
        case 'b': {
            char *end;
            bookmark_interval = strtod(optarg, &end);
            if (*end || bookmark_interval <= 0) {
                fprintf(stderr, "luna dev-server: --bookmark-interval must be a positive number\n");
                goto out;
            }
            break;
        }
        case 'C':
        case 'W': {
            char *end;
            errno = 0;
            unsigned long n = strtoul(optarg, &end, 10);
            bool conns = ch == 'C';
            if (*end || !*optarg || *optarg == '-' || n < 1 || errno ||
                (conns && n > 1000000)) {
                fprintf(stderr, "luna dev-server: --%s must be a positive number%s\n",
                        conns ? "max-connections" : "watch-buffer",
                        conns ? " (at most 1000000)" : "");
                goto out;
            }
            *(conns ? &max_connections : &watch_buffer) = n;
            break;
        }
        case 'R':
        case 'I': {
            char *end;
            double v = strtod(optarg, &end);
            if (*end || !*optarg || !(v > 0) || v > 86400) {
                fprintf(stderr, "luna dev-server: --%s must be a positive number of seconds\n",
                        ch == 'R' ? "read-header-timeout" : "idle-timeout");
                goto out;
            }
            *(ch == 'R' ? &read_header_timeout : &idle_timeout) = v;
            break;
        }
        case 'l': {
            int level = luna_log_level_parse(optarg);
            if (level < 0) {
                fprintf(stderr, "luna dev-server: unknown log level '%s'\n", optarg);
                goto out;
            }
            luna_log_set_level((enum luna_log_level)level);
            break;
        }
        case 'h':
            usage(stdout);
            rc = 0;
            goto out;
        default:
            usage(stderr);
            goto out;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "luna dev-server: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        goto out;
    }
    char host[256];
    int port;
    if (!listen || split_listen(listen, host, sizeof host, &port) < 0) {
        fprintf(stderr, "luna dev-server: --listen HOST:PORT is required (e.g. 127.0.0.1:0)\n");
        goto out;
    }
    if (!cert_file != !key_file) {
        fprintf(stderr, "luna dev-server: --tls-cert and --tls-key go together\n");
        goto out;
    }
    luna_error err = { 0 };
    luna_ds_faults checked;
    luna_ds_faults_init(&checked);
    if (faults && luna_ds_faults_set(&checked, faults, &err) < 0) {
        fprintf(stderr, "luna dev-server: --faults: %s\n", err.msg);
        goto out;
    }
    rc = 1;
    if (cert_file) {
        size_t n;
        cert = read_file(cert_file, &n, &err);
        key = cert ? read_file(key_file, &n, &err) : NULL;
        if (!cert || !key) {
            luna_error("dev-server failed", "error", err.msg);
            goto out;
        }
    }
    char address[300];
    snprintf(address, sizeof address, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    luna_ds_api_config cfg = { .server_address = address, .bookmark_interval = bookmark_interval,
                               .admin = admin, .history = history };
    if (luna_ds_api_new(&cfg, &ds, &err) < 0) {
        luna_error("dev-server failed", "error", err.msg);
        goto out;
    }
    ds->faults = checked;
    ds->watches.max_queued = watch_buffer;
    for (int i = 0; i < nservices; i++) {
        char why[600];
        if (luna_ds_admission_map_service(ds, services[i], why, sizeof why) < 0) {
            fprintf(stderr, "luna dev-server: %s\n", why);
            rc = 2;
            goto out_api;
        }
    }
    if (token && luna_ds_auth_set_admin_token(ds, token) < 0) {
        luna_error("dev-server failed", "error", "out of memory");
        goto out_api;
    }
    for (int i = 0; i < nseeds; i++)
        if (load_seed(ds, seeds[i], &err) < 0) {
            luna_error("seed failed", "seed", seeds[i], "error", err.msg);
            goto out_api;
        }
    /* A large seed's parse trees are gone: give their pages back, so the
     * server's RSS is its objects, not the seed's peak. */
    if (nseeds)
        luna_heap_trim();
    raise_fd_limit();
    luna_ds_http_opts hopts = { .ds = ds, .host = host, .port = port, .token = token,
                                .tls_cert = cert, .tls_key = key,
                                .max_connections = (unsigned)max_connections,
                                .idle_timeout = idle_timeout,
                                .read_header_timeout = read_header_timeout };
    srv = luna_ds_http_start(&hopts, &err);
    if (!srv) {
        luna_error("dev-server failed", "error", err.msg);
        goto out_api;
    }
    snprintf(address, sizeof address, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host,
             luna_ds_http_port(srv));
    /* Signals are handled before readiness is announced: a TERM right
     * after "listening on" still shuts down cleanly (and dumps). */
    struct ev_loop *loop = luna_loop();
    ev_signal sigterm, sigint;
    ev_signal_init(&sigterm, on_signal, SIGTERM);
    ev_signal_init(&sigint, on_signal, SIGINT);
    sigterm.data = sigint.data = ds;
    ev_signal_start(loop, &sigterm);
    ev_signal_start(loop, &sigint);
    signal(SIGPIPE, SIG_IGN);
    printf("listening on %s://%s\n", cert ? "https" : "http", address);
    fflush(stdout);
    ev_run(loop, 0);
    ev_signal_stop(loop, &sigterm);
    ev_signal_stop(loop, &sigint);
    rc = 0;
    if (dump) {
        json_t *all = luna_ds_seed_dump(ds);
        if (!all || json_dump_file(all, dump, JSON_INDENT(2)) < 0) {
            luna_error("dump failed", "file", dump);
            rc = 1;
        }
        json_decref(all);
    }
    luna_ds_http_stop(srv);
out_api:
    luna_ds_api_free(ds);
out:
    free(cert);
    free(key);
    free(seeds);
    free(services);
    return rc;
}

/* ---- embedded in `luna run --dev-server` ---- */

struct luna_devserver {
    luna_ds *ds;
    luna_ds_http *http;
};

static double embed_bookmark_interval; /* 0: the server's default */

void luna_devserver_embed_set_bookmark_interval(double seconds)
{
    embed_bookmark_interval = seconds > 0 ? seconds : 0;
}

uint64_t luna_devserver_embed_revision(struct luna_devserver *e)
{
    return e ? luna_ds_store_rv(e->ds->store) : 0;
}

int luna_devserver_embed_seed(struct luna_devserver *e, const char *text, size_t len,
                              luna_error *err)
{
    json_t *docs = luna_ds_yaml_load(text, len, err);
    if (!docs)
        return err && err->code ? err->code : LUNA_EINVAL;
    size_t i;
    json_t *doc;
    json_array_foreach(docs, i, doc) {
        if (luna_ds_seed_load(e->ds, doc, err) < 0) {
            json_decref(docs);
            return luna_error_wrap(err, "document %zu", i + 1);
        }
    }
    json_decref(docs);
    return 0;
}

char *luna_devserver_embed_documents(const char *text, size_t len, luna_error *err)
{
    json_t *docs = luna_ds_yaml_load(text, len, err);
    if (!docs)
        return NULL;
    char *out = json_dumps(docs, JSON_COMPACT);
    json_decref(docs);
    if (!out)
        luna_error_set(err, LUNA_ENOMEM, "documents: out of memory");
    return out;
}

bool luna_devserver_embed_settled(struct luna_devserver *e)
{
    return !e || !(e->ds->gc.timer_ready && ev_is_active(&e->ds->gc.timer));
}

int luna_devserver_embed_start(const char *const *seeds, int nseeds, const char *token,
                               char *url, size_t url_size, struct luna_devserver **out,
                               int *failed_seed, luna_error *err)
{
    *out = NULL;
    struct luna_devserver *e = calloc(1, sizeof *e);
    if (!e)
        return luna_error_set(err, LUNA_ENOMEM, "dev server: out of memory");
    luna_ds_api_config cfg = { .server_address = "127.0.0.1:0",
                              .bookmark_interval = embed_bookmark_interval };
    int rc = luna_ds_api_new(&cfg, &e->ds, err);
    if (rc == 0 && token && luna_ds_auth_set_admin_token(e->ds, token) < 0)
        rc = luna_error_set(err, LUNA_ENOMEM, "dev server: out of memory");
    *failed_seed = -1;
    for (int i = 0; rc == 0 && i < nseeds; i++)
        if ((rc = load_seed(e->ds, seeds[i], err)) < 0)
            *failed_seed = i;
    if (rc == 0) {
        luna_ds_http_opts hopts = { .ds = e->ds, .host = "127.0.0.1", .port = 0 };
        e->http = luna_ds_http_start(&hopts, err);
        if (!e->http)
            rc = err ? err->code : LUNA_EIO;
    }
    if (rc < 0) {
        luna_ds_api_free(e->ds);
        free(e);
        return rc;
    }
    signal(SIGPIPE, SIG_IGN);
    snprintf(url, url_size, "http://127.0.0.1:%d", luna_ds_http_port(e->http));
    *out = e;
    return 0;
}

void luna_devserver_embed_stop(struct luna_devserver *e)
{
    if (!e)
        return;
    luna_ds_http_stop(e->http);
    luna_ds_api_free(e->ds);
    free(e);
}
