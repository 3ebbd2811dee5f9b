/*
 * main.c — the luna command line.
 *
 *   luna --version | --help
 *   luna run [options] DIR     (options: see usage below)
 *   luna dev-server [options]
 *   luna test [options] [DIR|FILE]...   (lua/luna/testing_cli.lua)
 *   luna stubs DIR                      (the same Lua program)
 *   luna rbac [options] DIR             (the same Lua program)
 *   luna trigger [options] COMMAND   (runtime/admin_cli.h)
 *
 * Flag names follow controller-runtime's (--leader-elect,
 * --metrics-bind-address, ...) so deployments read the same.  Durations
 * are seconds ("15", "1.5") or Go durations ("15s", "500ms", "1m30s").
 */
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>
#include <unistd.h>

#include "devserver/devserver.h"
#include "base/error.h"
#include "runtime/admin_cli.h"
#include "serve/httpd.h"
#include "cluster/leader.h"
#include "client/kubeconfig.h"
#include "base/liblog.h"
#include "base/log.h"
#include "controller/loader.h"
#include "runtime/runtime.h"
#include "cluster/shard_set.h"
#include "script/watchdog.h"
#include "lua/lua_core.h"
#include "runtime/rbac_sources.h"

static void usage(FILE *out)
{
    fputs("usage: luna [--version] [--help] <command> [options]\n"
          "\n"
          "commands:\n"
          "  run [options] DIR     run the controllers in DIR/*.lua\n"
          "  dev-server [options]  run an in-memory Kubernetes API server (--help for options)\n"
          "  test [DIR|FILE]...    run controller specs (*_test.lua) against the real runtime\n"
          "                        and an embedded dev server (--help for options)\n"
          "  stubs DIR             write LuaLS definitions of the script API into DIR\n"
          "  webhooks manifest [options] DIR\n"
          "                        print the webhook configurations of DIR's webhooks and\n"
          "                        the CRD conversion patches of its converters\n"
          "                        (docs/webhooks.md)\n"
          "  rbac [options] DIR    print the ClusterRole DIR's controllers need, from their\n"
          "                        sources and the calls their specs make (--help for options)\n"
          "  trigger [options] ... reconcile keys now, pause or resume a controller of a\n"
          "                        running luna (--help for options)\n"
          "\n"
          "run options:\n"
          "  --kubeconfig FILE     kubeconfig to use (default: $KUBECONFIG, ~/.kube/config,\n"
          "                        or the in-cluster service account)\n"
          "  --context NAME        kubeconfig context (default: current-context)\n"
          "  --log-level LEVEL     debug, info, warn or error (default: info)\n"
          "  --log-format FORMAT   text or json (default: text)\n"
          "  --metrics-bind-address ADDR\n"
          "                        serve /metrics on HOST:PORT (default :8443, or :8080 with\n"
          "                        --metrics-secure=false; with --dev-server 127.0.0.1:0;\n"
          "                        port 0: any free port, logged; 0: off)\n"
          "  --metrics-secure[=BOOL]\n"
          "                        serve /metrics over HTTPS to scrapers the API server\n"
          "                        authenticates (TokenReview) and authorizes\n"
          "                        (SubjectAccessReview: get on /metrics) (default true;\n"
          "                        false: plain HTTP, no authentication)\n"
          "  --metrics-cert-path DIR\n"
          "                        the metrics server's certificate and key, re-read when\n"
          "                        they change (default: a self-signed certificate)\n"
          "  --metrics-cert-name NAME  certificate file in DIR (default tls.crt)\n"
          "  --webhook-bind-address ADDR\n"
          "                        serve the webhooks and converters the files declare on\n"
          "                        HOST:PORT over HTTPS (default :9443; with --dev-server\n"
          "                        127.0.0.1:0; 0: off); only when a file declares one\n"
          "  --webhook-cert-path DIR\n"
          "                        the webhook server's tls.crt and tls.key, re-read when\n"
          "                        they change (default: a self-signed certificate)\n"
          "  --webhook-cert-mode MODE\n"
          "                        files (--webhook-cert-path), managed (luna's own CA in\n"
          "                        a Secret; it writes the webhook configurations and their\n"
          "                        caBundle) or self-signed (default: files with\n"
          "                        --webhook-cert-path, else self-signed)\n"
          "  --webhook-service-name NAME, --webhook-service-namespace NS,\n"
          "  --webhook-service-port PORT\n"
          "                        managed: the Service in front of luna (default\n"
          "                        luna-webhooks, $POD_NAMESPACE, 443)\n"
          "  --webhook-url https://HOST[:PORT]\n"
          "                        managed: call this base instead of a Service (with\n"
          "                        --dev-server, default: the address bound)\n"
          "  --webhook-secret-name NAME  managed: the Secret (default luna-webhook-certs)\n"
          "  --webhook-configuration-name NAME\n"
          "                        managed: the configurations' name (default luna)\n"
          "  --webhook-conversion-crds CRD,...\n"
          "                        managed: CRDs whose conversion caBundle luna keeps\n"
          "  --webhook-cert-validity D, --webhook-ca-validity D\n"
          "                        managed: lifetimes (default 2160h, 87600h); each is\n"
          "                        renewed at 2/3 of its life\n"
          "  --metrics-cert-key NAME   key file in DIR (default tls.key)\n"
          "  --admin-endpoints[=BOOL]\n"
          "                        serve /admin/ (luna trigger: reconcile now, pause, resume)\n"
          "                        on the metrics server, authorized like /metrics (default:\n"
          "                        true when metrics are secure; true with\n"
          "                        --metrics-secure=false serves them open)\n"
          "  --shadow              send every write as a server-side dry run (dryRun=All)\n"
          "                        and log what it would have changed; writes nothing (not\n"
          "                        with --leader-elect)\n"
          "  --shadow-reload D     on a reload, run the new code in shadow beside the live\n"
          "                        code for D, report the keys where it would change what\n"
          "                        the live code keeps, then swap (default: off)\n"
          "  --health-probe-bind-address ADDR\n"
          "                        serve /healthz and /readyz on HOST:PORT (default :8081;\n"
          "                        with --dev-server 127.0.0.1:0; 0: off)\n"
          "  --http-read-header-timeout D\n"
          "                        the metrics and probe servers close a connection whose\n"
          "                        request head is not in D after reading it began, however\n"
          "                        often bytes come (default 10s)\n"
          "  --http-read-timeout D the same for the whole request, body included (default 30s)\n"
          "  --leader-elect        reconcile only while holding the leader Lease\n"
          "  --leader-election-id NAME\n"
          "                        the Lease's name (default: luna)\n"
          "  --leader-election-namespace NS\n"
          "                        the Lease's namespace (default: $POD_NAMESPACE, else the\n"
          "                        kubeconfig's); the holder is $POD_NAME, else\n"
          "                        hostname_<random UUID>\n"
          "  --leader-elect-lease-duration D   (default 15s)\n"
          "  --leader-elect-renew-deadline D   (default 10s)\n"
          "  --leader-elect-retry-period D     (default 2s)\n"
          "  --shards[=auto]       split the objects among the replicas: each holds a Lease\n"
          "                        (in the leader election namespace, with its timings)\n"
          "                        and reconciles its share of the hash space; a hand-off\n"
          "                        never lets two replicas reconcile one key at once\n"
          "                        (docs/sharding.md)\n"
          "  --shard-by uid|namespace   what is hashed (default uid)\n"
          "  --shard-set NAME      the replica set's name, the Leases' prefix (default luna)\n"
          "  --shard-skew-margin D how long past a peer's lease duration it is taken over\n"
          "                        (default 2s)\n"
          "  --shutdown-grace-period D\n"
          "                        how long SIGTERM waits for reconciles in flight (default 30s)\n"
          "  --watch               reload the controllers when files in DIR change\n"
          "  --require-all         exit 1 when a controller file fails to load at start\n"
          "                        (default: run the files that load, report the others)\n"
          "  --dev-server          run against an embedded dev server instead of a\n"
          "                        cluster (it logs a kubeconfig kubectl can use)\n"
          "  --seed FILE           with --dev-server: objects to start with (repeatable)\n"
          "  --test-control        take commands from `luna test` on stdin (its dev server or cluster)\n"
          "  --fake-clock          with --test-control: delays run on a clock the test steps\n"
          "  --reconcile-instruction-limit N\n"
          "                        Lua instructions a reconcile may run without yielding\n"
          "                        (default: 100000000; 0: unlimited)\n"
          "  --reconcile-time-limit SECONDS\n"
          "                        seconds a reconcile may run without yielding\n"
          "                        (default: 2; 0: unlimited)\n"
          "  --watch-list MODE     how informers get their state: auto (a streaming\n"
          "                        watch list, a LIST where the server refuses it), on\n"
          "                        (watch list only) or off (LIST only) (default:\n"
          "                        $LUNA_WATCH_LIST, else auto)\n"
          "  --watch-idle-timeout D\n"
          "                        a watch that brings nothing (no event, no bookmark) for D\n"
          "                        is replaced, after a check that the server has reached\n"
          "                        the version it resumes from (default 3m)\n"
          "  --min-watch-timeout DURATION\n"
          "                        watches ask the server to end them after a random\n"
          "                        time in [d, 2d), and are given up after that plus\n"
          "                        a grace (a watch list that never sends its\n"
          "                        initial-events-end bookmark included) (default: 5m;\n"
          "                        1s to 1h)\n"
          "  --lua-memory-limit MIB\n"
          "                        cap on the scripts' Lua heap (default: 128; 0: none)\n"
          "  --controller-memory-limit MIB\n"
          "                        cap on each controller's share of that heap, which\n"
          "                        limits = { memory = MIB } can lower (default: half\n"
          "                        of --lua-memory-limit; 0 without a heap cap: none)\n"
          "durations: seconds (1.5) or Go durations (1500ms, 1m30s)\n",
          out);
}

/* Seconds from "1.5" or a Go duration ("1h2m3.5s", "500ms", "2us"); -1
 * if malformed, negative or absurdly large. */
static double parse_duration(const char *text)
{
    char *end;
    double v = strtod(text, &end);
    if (end != text && *end == '\0')
        return v >= 0 && v < 1e12 ? v : -1;
    static const struct { const char *unit; double secs; } units[] = {
        { "ns", 1e-9 }, { "us", 1e-6 }, { "\xc2\xb5s", 1e-6 }, { "ms", 1e-3 },
        { "s", 1 }, { "m", 60 }, { "h", 3600 },
    };
    const char *p = text;
    double total = 0;
    if (!*p)
        return -1;
    while (*p) {
        if (!((*p >= '0' && *p <= '9') || *p == '.'))
            return -1;
        double n = strtod(p, &end);
        if (end == p)
            return -1;
        p = end;
        size_t best = 0, which = 0;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            size_t len = strlen(units[i].unit);
            if (strncmp(p, units[i].unit, len) == 0 && len > best) {
                best = len;
                which = i;
            }
        }
        if (!best)
            return -1;
        total += n * units[which].secs;
        p += best;
    }
    return total >= 0 && total < 1e12 ? total : -1;
}

/* Go-style boolean flag values ("--watch" alone is true). */
static int parse_bool(const char *text, bool *out)
{
    if (!text || strcmp(text, "true") == 0 || strcmp(text, "1") == 0 || strcmp(text, "t") == 0) {
        *out = true;
        return 0;
    }
    if (strcmp(text, "false") == 0 || strcmp(text, "0") == 0 || strcmp(text, "f") == 0) {
        *out = false;
        return 0;
    }
    return -1;
}

static int parse_log_opts(const char *name, const char *value)
{
    if (strcmp(name, "log-level") == 0) {
        int level = luna_log_level_parse(value);
        if (level < 0) {
            fprintf(stderr, "luna: unknown log level '%s'\n", value);
            return -1;
        }
        luna_log_set_level((enum luna_log_level)level);
    } else if (strcmp(name, "log-format") == 0) {
        if (strcmp(value, "json") == 0)
            luna_log_set_format(LUNA_LOG_JSON);
        else if (strcmp(value, "text") == 0)
            luna_log_set_format(LUNA_LOG_TEXT);
        else {
            fprintf(stderr, "luna: unknown log format '%s'\n", value);
            return -1;
        }
    }
    return 0;
}

enum run_flag {
    OPT_KUBECONFIG = 256, OPT_CONTEXT, OPT_LOG_LEVEL, OPT_LOG_FORMAT, OPT_HELP,
    OPT_METRICS_ADDR, OPT_HEALTH_ADDR, OPT_LEADER_ELECT, OPT_LEADER_ID, OPT_LEADER_NS,
    OPT_LEASE_DURATION, OPT_RENEW_DEADLINE, OPT_RETRY_PERIOD, OPT_GRACE, OPT_WATCH, OPT_REQUIRE_ALL,
    OPT_DEV_SERVER, OPT_SEED, OPT_INSTR_LIMIT, OPT_TIME_LIMIT, OPT_MEM_LIMIT,
    OPT_METRICS_SECURE, OPT_METRICS_CERT_PATH, OPT_METRICS_CERT_NAME, OPT_METRICS_CERT_KEY,
    OPT_WEBHOOK_ADDR, OPT_WEBHOOK_CERT_PATH, OPT_WEBHOOK_CERT_MODE, OPT_WEBHOOK_SERVICE,
    OPT_WEBHOOK_SERVICE_NS, OPT_WEBHOOK_SERVICE_PORT, OPT_WEBHOOK_URL, OPT_WEBHOOK_SECRET,
    OPT_WEBHOOK_CONFIGURATION, OPT_WEBHOOK_CONVERSION_CRDS, OPT_WEBHOOK_CERT_VALIDITY,
    OPT_WEBHOOK_CA_VALIDITY,
    OPT_TEST_CONTROL, OPT_FAKE_CLOCK,
    OPT_ADMIN, OPT_SHADOW, OPT_SHADOW_RELOAD, OPT_WATCH_LIST, OPT_MIN_WATCH_TIMEOUT, OPT_SHARDS,
    OPT_SHARD_BY, OPT_SHARD_SET, OPT_SHARD_MARGIN, OPT_WATCH_IDLE, OPT_CTL_MEM_LIMIT,
    OPT_HTTP_HEADER_TIMEOUT, OPT_HTTP_READ_TIMEOUT,
};

/* A number >= 0 for a limit flag, or -1. */
static double parse_limit(const char *value)
{
    char *end;
    double v = strtod(value, &end);
    if (end == value || *end || !(v >= 0) || v > 1e15)
        return -1;
    return v;
}

#define MAX_SEEDS 32

/* A DNS subdomain (RFC 1123): what Kubernetes names objects with. */
static bool dns_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253 || strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-.") != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        bool edge = i == 0 || i == n - 1 || s[i - 1] == '.' || s[i + 1] == '.';
        if ((s[i] == '-' || s[i] == '.') && edge)
            return false;
    }
    return true;
}

static int bad_flag(const char *name, const char *value, const char *why)
{
    fprintf(stderr, "luna run: --%s=%s: %s\n", name, value ? value : "", why);
    return 2;
}

static int cmd_run(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "kubeconfig", required_argument, NULL, OPT_KUBECONFIG },
        { "context", required_argument, NULL, OPT_CONTEXT },
        { "log-level", required_argument, NULL, OPT_LOG_LEVEL },
        { "log-format", required_argument, NULL, OPT_LOG_FORMAT },
        { "help", no_argument, NULL, OPT_HELP },
        { "metrics-bind-address", required_argument, NULL, OPT_METRICS_ADDR },
        { "metrics-secure", optional_argument, NULL, OPT_METRICS_SECURE },
        { "metrics-cert-path", required_argument, NULL, OPT_METRICS_CERT_PATH },
        { "webhook-bind-address", required_argument, NULL, OPT_WEBHOOK_ADDR },
        { "webhook-cert-path", required_argument, NULL, OPT_WEBHOOK_CERT_PATH },
        { "webhook-cert-mode", required_argument, NULL, OPT_WEBHOOK_CERT_MODE },
        { "webhook-service-name", required_argument, NULL, OPT_WEBHOOK_SERVICE },
        { "webhook-service-namespace", required_argument, NULL, OPT_WEBHOOK_SERVICE_NS },
        { "webhook-service-port", required_argument, NULL, OPT_WEBHOOK_SERVICE_PORT },
        { "webhook-url", required_argument, NULL, OPT_WEBHOOK_URL },
        { "webhook-secret-name", required_argument, NULL, OPT_WEBHOOK_SECRET },
        { "webhook-configuration-name", required_argument, NULL, OPT_WEBHOOK_CONFIGURATION },
        { "webhook-conversion-crds", required_argument, NULL, OPT_WEBHOOK_CONVERSION_CRDS },
        { "webhook-cert-validity", required_argument, NULL, OPT_WEBHOOK_CERT_VALIDITY },
        { "webhook-ca-validity", required_argument, NULL, OPT_WEBHOOK_CA_VALIDITY },
        { "metrics-cert-name", required_argument, NULL, OPT_METRICS_CERT_NAME },
        { "metrics-cert-key", required_argument, NULL, OPT_METRICS_CERT_KEY },
        { "health-probe-bind-address", required_argument, NULL, OPT_HEALTH_ADDR },
        { "leader-elect", optional_argument, NULL, OPT_LEADER_ELECT },
        { "leader-election-id", required_argument, NULL, OPT_LEADER_ID },
        { "leader-election-namespace", required_argument, NULL, OPT_LEADER_NS },
        { "leader-elect-lease-duration", required_argument, NULL, OPT_LEASE_DURATION },
        { "leader-elect-renew-deadline", required_argument, NULL, OPT_RENEW_DEADLINE },
        { "leader-elect-retry-period", required_argument, NULL, OPT_RETRY_PERIOD },
        { "shutdown-grace-period", required_argument, NULL, OPT_GRACE },
        { "watch", optional_argument, NULL, OPT_WATCH },
        { "require-all", optional_argument, NULL, OPT_REQUIRE_ALL },
        { "dev-server", no_argument, NULL, OPT_DEV_SERVER },
        { "seed", required_argument, NULL, OPT_SEED },
        { "reconcile-instruction-limit", required_argument, NULL, OPT_INSTR_LIMIT },
        { "reconcile-time-limit", required_argument, NULL, OPT_TIME_LIMIT },
        { "lua-memory-limit", required_argument, NULL, OPT_MEM_LIMIT },
        { "controller-memory-limit", required_argument, NULL, OPT_CTL_MEM_LIMIT },
        { "test-control", no_argument, NULL, OPT_TEST_CONTROL },
        { "fake-clock", no_argument, NULL, OPT_FAKE_CLOCK },
        { "admin-endpoints", optional_argument, NULL, OPT_ADMIN },
        { "shadow", no_argument, NULL, OPT_SHADOW },
        { "shadow-reload", required_argument, NULL, OPT_SHADOW_RELOAD },
        { "watch-list", required_argument, NULL, OPT_WATCH_LIST },
        { "watch-idle-timeout", required_argument, NULL, OPT_WATCH_IDLE },
        { "http-read-header-timeout", required_argument, NULL, OPT_HTTP_HEADER_TIMEOUT },
        { "http-read-timeout", required_argument, NULL, OPT_HTTP_READ_TIMEOUT },
        { "min-watch-timeout", required_argument, NULL, OPT_MIN_WATCH_TIMEOUT },
        { "shards", optional_argument, NULL, OPT_SHARDS },
        { "shard-by", required_argument, NULL, OPT_SHARD_BY },
        { "shard-set", required_argument, NULL, OPT_SHARD_SET },
        { "shard-skew-margin", required_argument, NULL, OPT_SHARD_MARGIN },
        { NULL, 0, NULL, 0 },
    };
    struct luna_run_config cfg = { .argv0 = argv[0] };
    static const char *seeds[MAX_SEEDS];
    int nseeds = 0;
    static struct luna_watchdog_config limits;
    limits = luna_watchdog_config_default();
    cfg.limits = &limits;
    size_t ctl_memory = 0;
    bool ctl_memory_set = false;
    const char *wl = getenv("LUNA_WATCH_LIST");
    if (wl && *wl && luna_watch_list_mode_parse(wl, &cfg.watch_list) < 0) {
        fprintf(stderr, "luna run: LUNA_WATCH_LIST=%s: want auto, on or off\n", wl);
        return 2;
    }
    int ch, idx = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
        const char *name = ch >= OPT_KUBECONFIG ? longopts[idx].name : "";
        double secs;
        char host[256];
        int port;
        luna_error err = { 0 };
        switch (ch) {
        case OPT_KUBECONFIG: cfg.kubeconfig = optarg; break;
        case OPT_CONTEXT: cfg.context = optarg; break;
        case OPT_LOG_LEVEL:
        case OPT_LOG_FORMAT:
            if (parse_log_opts(name, optarg) < 0)
                return 2;
            break;
        case OPT_METRICS_ADDR:
        case OPT_HEALTH_ADDR:
            if (strcmp(optarg, "0") != 0 &&
                luna_httpd_parse_address(optarg, host, sizeof host, &port, &err) < 0)
                return bad_flag(name, optarg, err.msg);
            if (ch == OPT_METRICS_ADDR)
                cfg.metrics_bind_address = optarg;
            else
                cfg.health_probe_bind_address = optarg;
            break;
        case OPT_LEADER_ELECT:
        case OPT_WATCH:
        case OPT_REQUIRE_ALL:
            if (parse_bool(optarg, ch == OPT_WATCH          ? &cfg.watch
                                   : ch == OPT_REQUIRE_ALL ? &cfg.require_all
                                                           : &cfg.leader_elect) < 0)
                return bad_flag(name, optarg, "want true or false");
            break;
        case OPT_METRICS_SECURE: {
            bool secure;
            if (parse_bool(optarg, &secure) < 0)
                return bad_flag(name, optarg, "want true or false");
            cfg.metrics_insecure = !secure;
            break;
        }
        case OPT_ADMIN: {
            bool on;
            if (parse_bool(optarg, &on) < 0)
                return bad_flag(name, optarg, "want true or false");
            cfg.admin = on ? LUNA_ADMIN_ON : LUNA_ADMIN_OFF;
            break;
        }
        case OPT_METRICS_CERT_PATH:
        case OPT_METRICS_CERT_NAME:
        case OPT_METRICS_CERT_KEY:
            if (!*optarg || (ch != OPT_METRICS_CERT_PATH && strchr(optarg, '/')))
                return bad_flag(name, optarg, ch == OPT_METRICS_CERT_PATH
                                                  ? "want a directory"
                                                  : "want a file name in --metrics-cert-path");
            if (ch == OPT_METRICS_CERT_PATH) cfg.metrics_cert_path = optarg;
            else if (ch == OPT_METRICS_CERT_NAME) cfg.metrics_cert_name = optarg;
            else cfg.metrics_cert_key = optarg;
            break;
        case OPT_WEBHOOK_ADDR: cfg.webhook_bind_address = optarg; break;
        case OPT_WEBHOOK_CERT_PATH:
            if (!*optarg)
                return bad_flag(name, optarg, "want a directory");
            cfg.webhook_cert_path = optarg;
            break;
        case OPT_WEBHOOK_CERT_MODE:
            if (strcmp(optarg, "self-signed") == 0)
                cfg.webhook_cert_mode = LUNA_WEBHOOK_CERT_SELF_SIGNED;
            else if (strcmp(optarg, "files") == 0)
                cfg.webhook_cert_mode = LUNA_WEBHOOK_CERT_FILES;
            else if (strcmp(optarg, "managed") == 0)
                cfg.webhook_cert_mode = LUNA_WEBHOOK_CERT_MANAGED;
            else
                return bad_flag(name, optarg, "want files, managed or self-signed");
            break;
        case OPT_WEBHOOK_SERVICE:
        case OPT_WEBHOOK_SERVICE_NS:
        case OPT_WEBHOOK_SECRET:
        case OPT_WEBHOOK_CONFIGURATION:
            if (!dns_name(optarg))
                return bad_flag(name, optarg, "want a DNS name (lowercase letters, digits, '-' "
                                "and '.')");
            if (ch == OPT_WEBHOOK_SERVICE) cfg.webhook_service_name = optarg;
            else if (ch == OPT_WEBHOOK_SERVICE_NS) cfg.webhook_service_namespace = optarg;
            else if (ch == OPT_WEBHOOK_SECRET) cfg.webhook_secret_name = optarg;
            else cfg.webhook_configuration_name = optarg;
            break;
        case OPT_WEBHOOK_CONVERSION_CRDS:
            for (const char *p = optarg; *p; p++)
                if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789-.,", *p))
                    return bad_flag(name, optarg, "want CRD names separated by commas");
            cfg.webhook_conversion_crds = optarg;
            break;
        case OPT_WEBHOOK_SERVICE_PORT: {
            double v = parse_limit(optarg);
            if (v < 1 || v > 65535 || v != (int)v)
                return bad_flag(name, optarg, "want a port from 1 to 65535");
            cfg.webhook_service_port = (int)v;
            break;
        }
        case OPT_WEBHOOK_URL:
            if (strncmp(optarg, "https://", 8) != 0 || !optarg[8] || optarg[8] == '/' ||
                strlen(optarg) > 250)
                return bad_flag(name, optarg, "want https://HOST[:PORT]");
            cfg.webhook_url = optarg;
            break;
        case OPT_WEBHOOK_CERT_VALIDITY:
        case OPT_WEBHOOK_CA_VALIDITY:
            secs = parse_duration(optarg);
            if (secs < 3 || secs > 100.0 * 365 * 86400)
                return bad_flag(name, optarg, "want a duration from 3s to 100 years (2160h)");
            if (ch == OPT_WEBHOOK_CERT_VALIDITY) cfg.webhook_cert_validity = secs;
            else cfg.webhook_ca_validity = secs;
            break;
        case OPT_LEADER_ID: cfg.leader_election_id = optarg; break;
        case OPT_LEADER_NS: cfg.leader_election_namespace = optarg; break;
        case OPT_LEASE_DURATION:
        case OPT_RENEW_DEADLINE:
        case OPT_RETRY_PERIOD:
        case OPT_GRACE:
            secs = parse_duration(optarg);
            if (secs <= 0)
                return bad_flag(name, optarg, "want a positive duration (15, 1.5, 15s, 500ms)");
            if (ch == OPT_LEASE_DURATION) cfg.lease_duration = secs;
            else if (ch == OPT_RENEW_DEADLINE) cfg.renew_deadline = secs;
            else if (ch == OPT_RETRY_PERIOD) cfg.retry_period = secs;
            else cfg.grace_period = secs;
            break;
        case OPT_DEV_SERVER: cfg.dev_server = true; break;
        case OPT_TEST_CONTROL: cfg.test_control = true; break;
        case OPT_FAKE_CLOCK: cfg.fake_clock = true; break;
        case OPT_SHADOW: cfg.shadow = true; break;
        case OPT_SHADOW_RELOAD:
            secs = parse_duration(optarg);
            if (secs <= 0 || secs > 86400)
                return bad_flag(name, optarg, "want a duration up to 24h (30, 30s, 2m)");
            cfg.shadow_reload = secs;
            break;
        case OPT_WATCH_LIST:
            if (luna_watch_list_mode_parse(optarg, &cfg.watch_list) < 0)
                return bad_flag(name, optarg, "want auto, on or off");
            break;
        case OPT_WATCH_IDLE:
            secs = parse_duration(optarg);
            if (secs < 1 || secs > 3600)
                return bad_flag(name, optarg, "want a duration from 1s to 1h (90, 90s, 3m)");
            cfg.watch_idle_timeout = secs;
            break;
        case OPT_HTTP_HEADER_TIMEOUT:
        case OPT_HTTP_READ_TIMEOUT:
            secs = parse_duration(optarg);
            if (secs < 0.1 || secs > 3600)
                return bad_flag(name, optarg, "want a duration from 100ms to 1h (10, 10s, 1m)");
            if (ch == OPT_HTTP_HEADER_TIMEOUT) cfg.http_read_header_timeout = secs;
            else cfg.http_read_timeout = secs;
            break;
        case OPT_MIN_WATCH_TIMEOUT:
            secs = parse_duration(optarg);
            if (secs < 1 || secs > 3600)
                return bad_flag(name, optarg, "want a duration from 1s to 1h (300, 5m)");
            cfg.min_watch_timeout = secs;
            break;
        case OPT_SHARDS:
            if (optarg && strcmp(optarg, "auto") != 0 && strcmp(optarg, "off") != 0)
                return bad_flag(name, optarg, "want auto (replicas split the objects by their "
                                "Leases) or off");
            cfg.shards = !optarg || strcmp(optarg, "auto") == 0;
            break;
        case OPT_SHARD_BY:
            if (strcmp(optarg, "uid") != 0 && strcmp(optarg, "namespace") != 0)
                return bad_flag(name, optarg, "want uid or namespace");
            cfg.shard_by_namespace = strcmp(optarg, "namespace") == 0;
            cfg.shard_option = true;
            break;
        case OPT_SHARD_SET:
            cfg.shard_set = optarg;
            cfg.shard_option = true;
            break;
        case OPT_SHARD_MARGIN:
            secs = parse_duration(optarg);
            if (secs <= 0)
                return bad_flag(name, optarg, "want a positive duration (2, 2s, 500ms)");
            cfg.shard_skew_margin = secs;
            cfg.shard_option = true;
            break;
        case OPT_INSTR_LIMIT:
        case OPT_TIME_LIMIT:
        case OPT_MEM_LIMIT:
        case OPT_CTL_MEM_LIMIT: {
            double v = parse_limit(optarg);
            if (v < 0)
                return bad_flag(name, optarg, "wants a number >= 0");
            size_t bytes = v * 1048576.0 >= (double)SIZE_MAX ? SIZE_MAX : (size_t)(v * 1048576.0);
            if (ch == OPT_INSTR_LIMIT)
                limits.limits.instructions = v;
            else if (ch == OPT_TIME_LIMIT)
                limits.limits.seconds = v;
            else if (ch == OPT_MEM_LIMIT)
                limits.memory = bytes;
            else
                ctl_memory = bytes, ctl_memory_set = true;
            break;
        }
        case OPT_SEED:
            if (nseeds == MAX_SEEDS)
                return bad_flag(name, optarg, "too many seed files");
            seeds[nseeds++] = optarg;
            break;
        case 'h':
        case OPT_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    /* Each controller's share: half the heap unless the operator says;
     * never more than the heap (the ceiling). */
    if (!ctl_memory_set)
        ctl_memory = LUNA_WATCHDOG_DEFAULT_ACCOUNT_MEMORY(limits.memory);
    else if (limits.memory && (ctl_memory == 0 || ctl_memory > limits.memory)) {
        fprintf(stderr, "luna run: --controller-memory-limit must be > 0 and at most "
                        "--lua-memory-limit (%zu MiB): a controller's share is part of the "
                        "heap\n", limits.memory >> 20);
        return 2;
    }
    limits.account_memory = ctl_memory;
    if (optind != argc - 1) {
        fputs("luna run: expected one controllers directory\n", stderr);
        usage(stderr);
        return 2;
    }
    luna_error err = { 0 };
    if (luna_leader_check_timing(cfg.lease_duration, cfg.renew_deadline, cfg.retry_period,
                                 &err) < 0) {
        fprintf(stderr, "luna run: %s\n", err.msg);
        return 2;
    }
    if (cfg.metrics_insecure && (cfg.metrics_cert_path || cfg.metrics_cert_name ||
                                 cfg.metrics_cert_key)) {
        fputs("luna run: --metrics-cert-* need --metrics-secure (the default)\n", stderr);
        return 2;
    }
    if (!cfg.metrics_cert_path && (cfg.metrics_cert_name || cfg.metrics_cert_key)) {
        fputs("luna run: --metrics-cert-name and --metrics-cert-key need --metrics-cert-path\n",
              stderr);
        return 2;
    }
    if (cfg.webhook_cert_mode == LUNA_WEBHOOK_CERT_AUTO)
        cfg.webhook_cert_mode = cfg.webhook_cert_path ? LUNA_WEBHOOK_CERT_FILES
                                                      : LUNA_WEBHOOK_CERT_SELF_SIGNED;
    if ((cfg.webhook_cert_mode == LUNA_WEBHOOK_CERT_FILES) != (cfg.webhook_cert_path != NULL)) {
        fputs(cfg.webhook_cert_path
                  ? "luna run: --webhook-cert-path is the files mode: not with "
                    "--webhook-cert-mode managed or self-signed\n"
                  : "luna run: --webhook-cert-mode files needs --webhook-cert-path DIR\n",
              stderr);
        return 2;
    }
    if (cfg.shadow && cfg.webhook_cert_mode == LUNA_WEBHOOK_CERT_MANAGED) {
        /* shadow writes nothing; the managed mode writes a Secret, the
         * webhook configurations and CRDs, which the running luna's own
         * would then fight over */
        fputs("luna run: --shadow writes nothing to the cluster, and --webhook-cert-mode "
              "managed writes a Secret and the webhook configurations: give the shadow "
              "--webhook-cert-path (or the self-signed default)\n", stderr);
        return 2;
    }
    if (cfg.webhook_cert_mode != LUNA_WEBHOOK_CERT_MANAGED &&
        (cfg.webhook_service_name || cfg.webhook_service_namespace || cfg.webhook_url ||
         cfg.webhook_service_port || cfg.webhook_secret_name || cfg.webhook_configuration_name ||
         cfg.webhook_conversion_crds || cfg.webhook_cert_validity || cfg.webhook_ca_validity)) {
        fputs("luna run: --webhook-service-*, --webhook-url, --webhook-secret-name, "
              "--webhook-configuration-name, --webhook-conversion-crds and "
              "--webhook-*-validity are for --webhook-cert-mode managed\n", stderr);
        return 2;
    }
    if (cfg.webhook_url && (cfg.webhook_service_name || cfg.webhook_service_port)) {
        fputs("luna run: --webhook-url replaces the Service: not with --webhook-service-name "
              "or --webhook-service-port\n", stderr);
        return 2;
    }
    if (cfg.webhook_ca_validity && cfg.webhook_cert_validity &&
        cfg.webhook_ca_validity < cfg.webhook_cert_validity) {
        fputs("luna run: --webhook-ca-validity must be at least --webhook-cert-validity\n",
              stderr);
        return 2;
    }
    if (cfg.shadow && cfg.leader_elect) {
        fputs("luna run: --shadow runs beside the live controllers: it takes no lease "
              "(drop --leader-elect)\n", stderr);
        return 2;
    }
    if (cfg.shard_option && !cfg.shards) {
        fputs("luna run: --shard-by, --shard-set and --shard-skew-margin need --shards\n",
              stderr);
        return 2;
    }
    if (cfg.shards && (cfg.leader_elect || cfg.shadow || cfg.test_control)) {
        fputs("luna run: --shards splits the objects among replicas that all reconcile: not "
              "with --leader-elect, --shadow or --test-control\n", stderr);
        return 2;
    }
    if (cfg.shards && luna_shard_set_check_timing(cfg.lease_duration, cfg.renew_deadline,
                                                  cfg.retry_period, cfg.shard_skew_margin,
                                                  &err) < 0) {
        fprintf(stderr, "luna run: %s\n", err.msg);
        return 2;
    }
    if (cfg.shadow && cfg.shadow_reload > 0) {
        fputs("luna run: --shadow-reload tries reloads in shadow before they go live; with "
              "--shadow nothing goes live\n", stderr);
        return 2;
    }
    if (nseeds && !cfg.dev_server) {
        fputs("luna run: --seed needs --dev-server\n", stderr);
        return 2;
    }
    if (cfg.fake_clock && !cfg.test_control) {
        fputs("luna run: --fake-clock needs --test-control\n", stderr);
        return 2;
    }
    if (cfg.test_control)
        luna_devserver_embed_set_bookmark_interval(0.05);
    cfg.dev_server_revision = luna_devserver_embed_revision;
    cfg.dev_server_settled = luna_devserver_embed_settled;
    cfg.dev_server_seed = luna_devserver_embed_seed;
    cfg.documents = luna_devserver_embed_documents;
    cfg.seeds = seeds;
    cfg.dev_server_start = luna_devserver_embed_start;
    cfg.dev_server_stop = luna_devserver_embed_stop;
    cfg.nseeds = nseeds;
    cfg.dir = argv[optind];
    return luna_runtime_run(&cfg);
}

/* `luna test`, `luna stubs` and `luna rbac`: lua/luna/testing_cli.lua in a plain LuaJIT
 * state (not the controllers' sandbox: specs drive the runtime from
 * outside) with the script-facing luna.core (json, crypto).  The runtime
 * under test is this executable, run as a child process; the runner talks
 * to it, and through it to the dev server, over its stdin and stdout
 * (runtime/test_control.h), so no spec-only binding is linked into luna. */
static int cmd_lua_tool(int argc, char **argv)
{
    const char *lib;
    luna_error err = { 0 };
    if (luna_loader_find_lib(argv[0], &lib, &err) < 0) {
        fprintf(stderr, "luna %s: %s\n", argv[1], err.msg);
        return 2;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "luna %s: cannot find the luna executable: %m\n", argv[1]);
        return 2;
    }
    self[n] = '\0';
    /* A runtime under test that died must not kill the runner through a
     * write on its closed stdin: the write fails (EPIPE) and is reported. */
    signal(SIGPIPE, SIG_IGN);
    lua_State *L = luaL_newstate();
    if (!L) {
        fputs("luna: out of memory\n", stderr);
        return 2;
    }
    luaL_openlibs(L);
    lua_getglobal(L, "package");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua", lib, lib);
    lua_setfield(L, -2, "path");
    lua_getfield(L, -1, "loaded");
    luna_lua_core_push(L);
    /* `luna rbac` reads the controllers' specs in a state of their own
     * (runtime/rbac_sources.h). */
    luna_lua_rbac_sources_register(L);
    lua_setfield(L, -2, "luna.core");
    lua_pop(L, 2);
    lua_getglobal(L, "debug");
    lua_getfield(L, -1, "traceback");
    lua_remove(L, -2);
    int handler = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushstring(L, "luna.testing_cli");
    int rc = 2;
    if (lua_pcall(L, 1, 1, handler) == 0) {
        lua_getfield(L, -1, "main");
        lua_pushstring(L, self);
        lua_pushstring(L, lib);
        lua_newtable(L);
        for (int i = 1; i < argc; i++) {
            lua_pushstring(L, argv[i]);
            lua_rawseti(L, -2, i);
        }
        if (lua_pcall(L, 3, 1, handler) == 0)
            rc = (int)lua_tointeger(L, -1);
        else
            fprintf(stderr, "luna %s: %s\n", argv[1], lua_tostring(L, -1));
    } else {
        fprintf(stderr, "luna %s: %s\n", argv[1], lua_tostring(L, -1));
    }
    lua_close(L);
    return rc;
}

int main(int argc, char **argv)
{
    /* Before any library runs: their messages go through the logger. */
    luna_liblog_install();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("luna %s\n", LUNA_VERSION);
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "dev-server") == 0)
        return luna_devserver_main(argc - 1, argv + 1);
    if (strcmp(cmd, "test") == 0 || strcmp(cmd, "stubs") == 0 || strcmp(cmd, "rbac") == 0 ||
        strcmp(cmd, "webhooks") == 0)
        return cmd_lua_tool(argc, argv);
    if (strcmp(cmd, "trigger") == 0)
        return luna_admin_cli_main(argc - 1, argv + 1);
    fprintf(stderr, "luna: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
