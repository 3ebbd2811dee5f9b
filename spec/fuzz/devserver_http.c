/*
 * devserver_http.c — libFuzzer target for the dev server's request
 * handling: the router and every verb behind luna_ds_api_handle(), fed
 * requests as devserver_http builds them from libmicrohttpd (path and
 * query parameters percent-decoded, Content-Type and User-Agent headers,
 * protobuf bodies turned into JSON first).  The socket layer itself is
 * libmicrohttpd's.
 *
 * Input: a fresh server per input (built-in types, default namespaces,
 * /luna/v1/faults enabled), then up to 16 requests separated by lines
 * `%%`, each
 *     METHOD TARGET            e.g. PATCH /api/v1/namespaces/default/pods/a?fieldManager=x
 *     Header: value            (Content-Type, User-Agent; others ignored)
 *     (blank line)
 *     body
 * so that one input can create, patch, apply, list and watch.
 *
 * Checked: every response has an HTTP code in 100..599 and, unless it is
 * a watch, a body; a watch's queued bytes can be read; everything is freed
 * with the server (LeakSanitizer).
 */
#include "fuzz_input.h"

#include <ctype.h>
#include <jansson.h>

#include "devserver/devserver_api.h"
#include "devserver/devserver_protobuf.h"
#include "devserver/devserver_request.h"
#include "devserver/devserver_watch.h"

#define MAX_ARGS 16

struct request {
    char *method, *path, *content_type, *user_agent;
    const char *body;
    size_t body_len;
    size_t nargs;
    char *name[MAX_ARGS], *value[MAX_ARGS];
};

static const char *arg(void *ctx, const char *name)
{
    const struct request *r = ctx;
    for (size_t i = 0; i < r->nargs; i++)
        if (strcmp(r->name[i], name) == 0)
            return r->value[i];
    return NULL;
}

static int hexval(int c)
{
    return isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
}

/* Percent-decodes s in place as libmicrohttpd does (an invalid escape is
 * kept as written; '+' is a space in query parameters). */
static void unescape(char *s, bool plus)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (*p == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
            *o++ = (char)(hexval(p[1]) * 16 + hexval(p[2]));
            p += 2;
        } else {
            *o++ = (plus && *p == '+') ? ' ' : *p;
        }
    }
    *o = '\0';
}

/* Parses one request out of text (modified in place; the request borrows
 * it).  Returns false when there is not even a request line. */
static bool parse(char *text, size_t len, struct request *r)
{
    memset(r, 0, sizeof *r);
    char *end = text + len;
    char *nl = memchr(text, '\n', len);
    char *line_end = nl ? nl : end;
    *line_end = '\0';
    char *sp = strchr(text, ' ');
    if (!sp)
        return false;
    *sp = '\0';
    r->method = text;
    char *target = sp + 1;
    char *q = strchr(target, '?');
    if (q) {
        *q++ = '\0';
        char *save = NULL;
        for (char *kv = strtok_r(q, "&", &save); kv && r->nargs < MAX_ARGS;
             kv = strtok_r(NULL, "&", &save)) {
            char *eq = strchr(kv, '=');
            if (eq)
                *eq++ = '\0';
            unescape(kv, true);
            if (eq)
                unescape(eq, true);
            r->name[r->nargs] = kv;
            /* MHD hands a parameter without '=' over as NULL; devserver
             * treats NULL as absent, "" as empty. */
            r->value[r->nargs] = eq ? eq : "";
            r->nargs++;
        }
    }
    unescape(target, false);
    r->path = target;
    if (!nl)
        return true;
    char *p = nl + 1;
    while (p < end) {
        char *e = memchr(p, '\n', (size_t)(end - p));
        char *le = e ? e : end;
        if (le == p) { /* blank line: the body follows */
            p = e ? e + 1 : end;
            break;
        }
        *le = '\0';
        char *colon = strchr(p, ':');
        if (colon) {
            *colon = '\0';
            char *v = colon + 1;
            while (*v == ' ')
                v++;
            if (strcasecmp(p, "Content-Type") == 0)
                r->content_type = v;
            else if (strcasecmp(p, "User-Agent") == 0)
                r->user_agent = v;
        }
        p = e ? e + 1 : end;
    }
    r->body = p < end ? p : NULL;
    r->body_len = p < end ? (size_t)(end - p) : 0;
    return true;
}

static void handle(luna_ds *ds, struct request *r)
{
    luna_ds_status st = { 0 };
    const char *ct = r->content_type;
    char *json_body = NULL;
    size_t json_len = 0;
    if (r->body_len && luna_ds_protobuf_is(ct)) {
        json_body = luna_ds_protobuf_to_json(r->body, r->body_len, &json_len, &st);
        if (!json_body) {
            FUZZ_CHECK(st.code >= 400 && st.code < 600, "protobuf error code %d", st.code);
            luna_ds_status_clear(&st);
            return;
        }
        ct = "application/json";
    }
    luna_ds_request req = {
        .method = r->method,
        .path = r->path,
        .arg = arg,
        .arg_ctx = r,
        .content_type = ct,
        .user_agent = r->user_agent,
        .body = json_body ? json_body : r->body,
        .body_len = json_body ? json_len : r->body_len,
    };
    luna_ds_response resp;
    memset(&resp, 0, sizeof resp);
    luna_ds_api_handle(ds, &req, &resp);
    free(json_body);
    FUZZ_CHECK(resp.code >= 100 && resp.code < 600, "HTTP code %d for %s %s", resp.code,
               r->method, r->path);
    if (resp.watch) {
        char buf[4096];
        for (int i = 0; i < 4; i++)
            if (luna_ds_watch_read(resp.watch, buf, sizeof buf) <= 0)
                break;
        luna_ds_watch_free(resp.watch);
    } else {
        FUZZ_CHECK(resp.body != NULL || resp.len == 0, "no body for %s %s", r->method, r->path);
    }
    free(resp.body);
    json_decref(resp.warnings);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    luna_ds_api_config cfg = { .server_address = "127.0.0.1:6443", .bookmark_interval = 60,
                               .admin = true, .history = 64 };
    luna_ds *ds = NULL;
    luna_error err = { 0 };
    if (luna_ds_api_new(&cfg, &ds, &err) < 0)
        abort();
    char *text = fuzz_cstr(data, size);
    char *p = text, *end = text + size;
    for (int n = 0; n < 16 && p < end; n++) {
        char *sep = memmem(p, (size_t)(end - p), "\n%%\n", 4);
        size_t len = sep ? (size_t)(sep - p) : (size_t)(end - p);
        /* The request gets its own NUL-terminated copy: it is parsed in place. */
        char *one = fuzz_cstr(p, len);
        struct request r;
        if (parse(one, len, &r))
            handle(ds, &r);
        free(one);
        p = sep ? sep + 4 : end;
    }
    free(text);
    luna_ds_api_free(ds);
    return 0;
}
