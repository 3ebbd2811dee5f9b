/* admin_cli.c — see admin_cli.h. */
#include "runtime/admin_cli.h"

#include <curl/curl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/textbuf.h"
#include "base/url.h"
#include "client/token_file.h"
#include "runtime/admin.h"

#define DEFAULT_SERVER "https://127.0.0.1:8443"
#define INCLUSTER_TOKEN "/var/run/secrets/kubernetes.io/serviceaccount/token"
#define TIMEOUT_S 30L
/* What a trigger answer may hold: the list of 1,000s of controllers is tens
 * of KB.  Past this the server is not luna's admin endpoint, or a hostile
 * one: reading on would hold its whole answer in memory (issue 24 saw a
 * 200 MB one buffered whole). */
#define MAX_ANSWER_BYTES (4u << 20)

static void usage(FILE *out)
{
    fputs("usage: luna trigger [options] COMMAND\n"
          "\n"
          "commands (to a running `luna run`, through its admin endpoints):\n"
          "  reconcile CONTROLLER KEY...    reconcile these keys now (NAMESPACE/NAME or NAME)\n"
          "  reconcile CONTROLLER --all     every object in the controller's cache\n"
          "  reconcile CONTROLLER --selector LABELS\n"
          "                                 cached objects whose labels match (app=web,tier!=db)\n"
          "  pause CONTROLLER               start no reconcile; keys keep queueing\n"
          "  resume CONTROLLER              reconcile what queued meanwhile\n"
          "  list                           controllers: started, paused, queued, active\n"
          "\n"
          "options:\n"
          "  --server URL           luna's metrics server (default: $LUNA_ADMIN_SERVER, else\n"
          "                         " DEFAULT_SERVER ")\n"
          "  --token TOKEN          bearer token (default: --token-file, $LUNA_TOKEN, else the\n"
          "                         in-cluster service account token)\n"
          "  --token-file FILE      read the bearer token from FILE\n"
          "  --certificate-authority FILE\n"
          "                         verify the server's certificate against FILE\n"
          "  --insecure-skip-tls-verify\n"
          "                         do not verify it (luna's self-signed certificate)\n"
          "  --insecure             send the token even to a plain http:// URL, where anyone on\n"
          "                         the path can read it (refused otherwise)\n",
          out);
}

static int usage_error(const char *why)
{
    fprintf(stderr, "luna trigger: %s\n", why);
    usage(stderr);
    return 2;
}

/* The answer, bounded: past MAX_ANSWER_BYTES curl is told to stop. */
struct answer {
    struct luna_textbuf body;
    bool too_big;
};

static size_t collect(char *data, size_t size, size_t n, void *ud)
{
    struct answer *a = ud;
    if (n > MAX_ANSWER_BYTES - a->body.len) { /* size is 1 (curl's contract) */
        a->too_big = true;
        return 0; /* CURLE_WRITE_ERROR */
    }
    luna_textbuf_append(&a->body, data, size * n);
    return size * n;
}

/* Appends "name=value" (value percent-encoded) to the query in b. */
static bool add_arg(CURL *h, struct luna_textbuf *b, const char *name, const char *value)
{
    char *enc = curl_easy_escape(h, value, 0);
    if (!enc)
        return false;
    luna_textbuf_printf(b, "%c%s=%s", strchr(b->data ? b->data : "", '?') ? '&' : '?', name, enc);
    curl_free(enc);
    return !b->failed;
}

enum { OPT_SERVER = 256, OPT_TOKEN, OPT_TOKEN_FILE, OPT_CA, OPT_INSECURE, OPT_PLAIN_HTTP, OPT_ALL,
       OPT_SELECTOR, OPT_HELP };

int luna_admin_cli_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "server", required_argument, NULL, OPT_SERVER },
        { "token", required_argument, NULL, OPT_TOKEN },
        { "token-file", required_argument, NULL, OPT_TOKEN_FILE },
        { "certificate-authority", required_argument, NULL, OPT_CA },
        { "insecure-skip-tls-verify", no_argument, NULL, OPT_INSECURE },
        { "insecure", no_argument, NULL, OPT_PLAIN_HTTP },
        { "all", no_argument, NULL, OPT_ALL },
        { "selector", required_argument, NULL, OPT_SELECTOR },
        { "help", no_argument, NULL, OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    const char *server = getenv("LUNA_ADMIN_SERVER");
    const char *token = NULL, *token_file = NULL, *ca = NULL, *selector = NULL;
    bool insecure = false, plain_http_token = false, all = false;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case OPT_SERVER: server = optarg; break;
        case OPT_TOKEN: token = optarg; break;
        case OPT_TOKEN_FILE: token_file = optarg; break;
        case OPT_CA: ca = optarg; break;
        case OPT_INSECURE: insecure = true; break;
        case OPT_PLAIN_HTTP: plain_http_token = true; break;
        case OPT_ALL: all = true; break;
        case OPT_SELECTOR: selector = optarg; break;
        case 'h':
        case OPT_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!server || !*server)
        server = DEFAULT_SERVER;
    if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0)
        return usage_error("--server: want an http:// or https:// URL");
    if (ca && insecure)
        return usage_error("--certificate-authority and --insecure-skip-tls-verify exclude "
                           "each other");
    if (token && token_file)
        return usage_error("--token and --token-file exclude each other");
    int nargs = argc - optind;
    char **args = argv + optind;
    if (nargs < 1)
        return usage_error("missing command");
    const char *cmd = args[0];
    bool reconcile = strcmp(cmd, "reconcile") == 0;
    if ((all || selector) && !reconcile)
        return usage_error("--all and --selector go with reconcile");
    if (strcmp(cmd, "list") == 0) {
        if (nargs != 1)
            return usage_error("list takes no arguments");
    } else if (strcmp(cmd, "pause") == 0 || strcmp(cmd, "resume") == 0) {
        if (nargs != 2)
            return usage_error("pause and resume take one controller");
    } else if (reconcile) {
        if (nargs < 2)
            return usage_error("reconcile: missing the controller");
        int ways = (nargs > 2) + all + (selector != NULL);
        if (ways != 1)
            return usage_error("reconcile: give keys, --all or --selector (one of them)");
        if (nargs - 2 > LUNA_ADMIN_MAX_KEYS)
            return usage_error("reconcile: at most 1000 keys at once");
    } else {
        return usage_error("unknown command (want reconcile, pause, resume or list)");
    }

    /* the token: never printed */
    struct luna_token_file *tf = NULL;
    const char *tf_path = token_file;
    if (!token && !tf_path && !(token = getenv("LUNA_TOKEN")) && access(INCLUSTER_TOKEN, R_OK) == 0)
        tf_path = INCLUSTER_TOKEN;
    if (!token && tf_path) {
        luna_error err = { 0 };
        if (!(tf = luna_token_file_new(tf_path)) ||
            luna_token_file_get(tf, time(NULL), &token, &err) < 0) {
            fprintf(stderr, "luna trigger: %s\n", tf ? err.msg : "out of memory");
            luna_token_file_free(tf);
            return 1;
        }
    }

    /* A bearer token over plain http is readable by anything on the path
     * (kubectl's own rule for basic auth): only when the user says so. */
    if (token && *token && strncmp(server, "http://", 7) == 0 && !plain_http_token) {
        luna_token_file_free(tf);
        fputs("luna trigger: refusing to send the bearer token over plain http://, where anyone "
              "on the path can read it: use the https:// URL, or --insecure to send it anyway\n",
              stderr);
        return 2;
    }

    int status = 1;
    bool oom = true; /* until the request is sent: every failure before is one */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *h = curl_easy_init();
    struct curl_slist *headers = NULL;
    struct luna_textbuf url = LUNA_TEXTBUF_INIT;
    struct answer answer = { .body = LUNA_TEXTBUF_INIT, .too_big = false };
    struct luna_textbuf *body = &answer.body;
    struct luna_textbuf auth = LUNA_TEXTBUF_INIT;
    if (!h)
        goto out;
    size_t sl = strlen(server);
    while (sl > 0 && server[sl - 1] == '/')
        sl--;
    luna_textbuf_printf(&url, "%.*s%scontrollers", (int)sl, server, LUNA_ADMIN_PREFIX);
    bool ok = true;
    if (strcmp(cmd, "list") != 0) {
        char *name = curl_easy_escape(h, args[1], 0);
        if (!name)
            goto out;
        luna_textbuf_printf(&url, "/%s/%s", name, cmd);
        curl_free(name);
        for (int i = 2; reconcile && ok && i < nargs; i++)
            ok = add_arg(h, &url, "key", args[i]);
        if (all)
            ok = ok && add_arg(h, &url, "all", "true");
        if (selector)
            ok = ok && add_arg(h, &url, "selector", selector);
    }
    if (!ok || url.failed)
        goto out;
    if (token && *token) {
        luna_textbuf_printf(&auth, "Authorization: Bearer %s", token);
        if (auth.failed || !(headers = curl_slist_append(headers, auth.data)))
            goto out;
    }
    curl_easy_setopt(h, CURLOPT_URL, url.data);
    if (strcmp(cmd, "list") != 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &answer);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    if (insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    oom = false;
    CURLcode rc = curl_easy_perform(h);
    if (answer.too_big) {
        char shown[512];
        fprintf(stderr, "luna trigger: the answer is larger than %u MiB: is %s luna's metrics "
                "server? (nothing of it is printed)\n", MAX_ANSWER_BYTES >> 20,
                luna_url_redact_buf(server, shown, sizeof shown));
        goto out;
    }
    if (body->failed) {
        oom = true;
        goto out;
    }
    if (rc != CURLE_OK) {
        char shown[512];
        fprintf(stderr, "luna trigger: %s: %s%s\n", luna_url_redact_buf(server, shown, sizeof shown),
                curl_easy_strerror(rc),
                rc == CURLE_PEER_FAILED_VERIFICATION
                    ? " (luna's certificate is self-signed unless --metrics-cert-path is set: "
                      "pass --certificate-authority FILE or --insecure-skip-tls-verify)"
                    : "");
        goto out;
    }
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (body->len)
        fwrite(body->data, 1, body->len, code >= 200 && code < 300 ? stdout : stderr);
    if (code >= 200 && code < 300) {
        status = 0;
    } else {
        fprintf(stderr, "luna trigger: HTTP %ld%s\n", code,
                code == 401   ? " (no token, or one the API server does not authenticate)"
                : code == 403 ? " (RBAC: the user needs the verb on the path, see "
                                "deploy/rbac.yaml's luna-admin)"
                : code == 404 && !body->len ? " (no admin endpoints there: --admin-endpoints)"
                              : "");
    }
out:
    if (oom)
        fputs("luna trigger: out of memory\n", stderr);
    if (auth.data)
        memset(auth.data, 0, auth.len); /* the token */
    luna_textbuf_free(&auth);
    luna_textbuf_free(&url);
    luna_textbuf_free(body);
    curl_slist_free_all(headers);
    if (h)
        curl_easy_cleanup(h);
    curl_global_cleanup();
    luna_token_file_free(tf);
    return status;
}
