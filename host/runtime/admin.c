/* admin.c — see admin.h. */
#include "runtime/admin.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_writer.h"
#include "base/log.h"
#include "base/selector.h"
#include "queue/workqueue.h"
#include "controller/controller.h"
#include "controller/generation.h"
#include "serve/runtime_metrics.h"

#define MAX_KEY_LEN 317 /* namespace (63) / name (253) */
#define AUDIT_KEYS_MAX 4000

/* The answer under construction: a JSON object. */
struct answer {
    luna_json_writer w;
};

static void put_str(struct answer *a, const char *key, const char *value)
{
    luna_json_write_key(&a->w, key, strlen(key));
    luna_json_write_string(&a->w, value, strlen(value));
}

static void put_uint(struct answer *a, const char *key, unsigned long v)
{
    luna_json_write_key(&a->w, key, strlen(key));
    luna_json_write_uint(&a->w, v);
}

static void put_bool(struct answer *a, const char *key, bool v)
{
    luna_json_write_key(&a->w, key, strlen(key));
    luna_json_write_bool(&a->w, v);
}

/* Ends the object and appends it (and a newline) to out. */
static void finish(struct answer *a, struct luna_textbuf *out)
{
    luna_json_write_object_end(&a->w);
    luna_error err = { 0 };
    size_t len = 0;
    char *text = luna_json_writer_finish(&a->w, &err) == 0 ? luna_json_writer_steal(&a->w, &len)
                                                           : NULL;
    if (!text)
        out->failed = true;
    else
        luna_textbuf_append(out, text, len);
    luna_textbuf_putc(out, '\n');
    free(text);
    luna_json_writer_free(&a->w);
}

static void start(struct answer *a)
{
    luna_json_writer_init(&a->w);
    luna_json_write_object_start(&a->w);
}

/* Logs the request with who asked and what came of it. */
static void log_request(const struct luna_admin_request *req, const char *action,
                        const char *controller, const char *what, int status, const char *error)
{
    char code[8];
    snprintf(code, sizeof code, "%d", status);
    luna_log(status < 300 ? LUNA_LOG_INFO : LUNA_LOG_WARN, "admin request",
             "user", req->user && *req->user ? req->user : "anonymous",
             "remote", req->remote && *req->remote ? req->remote : NULL,
             "action", action, "controller", controller, "what", what, LUNA_LOG_NUM("status"), code,
             "error", error, NULL);
}

static void log_reconcile(const struct luna_admin_request *req, const char *controller,
                          const char *what, size_t enqueued)
{
    char n[24];
    snprintf(n, sizeof n, "%zu", enqueued);
    luna_log(LUNA_LOG_INFO, "admin request", "user",
             req->user && *req->user ? req->user : "anonymous", "remote",
             req->remote && *req->remote ? req->remote : NULL, "action", "reconcile", "controller",
             controller, "what", what, LUNA_LOG_NUM("enqueued"), n, LUNA_LOG_NUM("status"), "200",
             NULL);
}

static int fail(const struct luna_admin_request *req, struct luna_textbuf *out, int status,
                const char *action, const char *controller, const char *error)
{
    struct answer a;
    start(&a);
    put_str(&a, "error", error);
    finish(&a, out);
    log_request(req, action, controller, NULL, status, error);
    return status;
}

static int list_controllers(const struct luna_admin_request *req, struct luna_generation *gen,
                            struct luna_textbuf *out)
{
    struct answer a;
    start(&a);
    luna_json_write_key(&a.w, "controllers", 11);
    luna_json_write_array_start(&a.w);
    for (size_t i = 0; gen && i < luna_generation_count(gen); i++) {
        struct luna_controller *c = luna_generation_controller(gen, i);
        luna_json_write_object_start(&a.w);
        put_str(&a, "name", luna_controller_name(c));
        put_bool(&a, "started", luna_controller_started(c));
        put_bool(&a, "paused", luna_controller_paused(c));
        put_uint(&a, "queued", luna_workqueue_len(luna_controller_queue(c)));
        put_uint(&a, "active", (unsigned long)luna_controller_active(c));
        put_uint(&a, "workers", (unsigned long)luna_controller_workers(c));
        luna_json_write_object_end(&a.w);
    }
    luna_json_write_array_end(&a.w);
    finish(&a, out);
    log_request(req, "list", NULL, NULL, 200, NULL);
    return 200;
}

/* "ns/name" or "name": Kubernetes-length names, printable, one slash at most. */
static bool key_ok(const char *key)
{
    size_t len = strlen(key);
    if (len == 0 || len > MAX_KEY_LEN)
        return false;
    const char *slash = strchr(key, '/');
    if (slash && (slash == key || !slash[1] || strchr(slash + 1, '/') || slash - key > 63))
        return false;
    for (const char *p = key; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return false;
    return true;
}

static int reconcile(const struct luna_admin_request *req, struct luna_controller *c,
                     struct luna_textbuf *out)
{
    const char *name = luna_controller_name(c);
    size_t nkeys = 0;
    const char *selector = NULL, *all = NULL, *first_key = NULL;
    for (size_t i = 0; i < req->nargs; i++) {
        const char *k = req->args[2 * i], *v = req->args[2 * i + 1];
        if (strcmp(k, "key") == 0) {
            if (!v || !key_ok(v))
                return fail(req, out, 400, "reconcile", name,
                            "key: want NAMESPACE/NAME or NAME (Kubernetes names)");
            /* "@every" is no object's name (no Kubernetes name has an
             * '@'): only a controller with a schedule expects it */
            if (strcmp(v, LUNA_PERIODIC_KEY) == 0 && !luna_controller_periodic(c))
                return fail(req, out, 400, "reconcile", name,
                            "key: " LUNA_PERIODIC_KEY " is periodic work, and this controller has "
                            "no 'every'");
            if (!first_key)
                first_key = v;
            nkeys++;
        } else if (strcmp(k, "selector") == 0) {
            selector = v ? v : "";
        } else if (strcmp(k, "all") == 0) {
            all = v ? v : "true";
        } else {
            return fail(req, out, 400, "reconcile", name,
                        "unknown parameter: want key, all or selector");
        }
    }
    if ((nkeys > 0) + (selector != NULL) + (all != NULL) != 1)
        return fail(req, out, 400, "reconcile", name,
                    "want one of: key=NS/NAME (repeatable), all=true, selector=LABELS");
    if (nkeys > LUNA_ADMIN_MAX_KEYS)
        return fail(req, out, 400, "reconcile", name, "at most 1000 keys per request");
    if (all && strcmp(all, "true") != 0)
        return fail(req, out, 400, "reconcile", name, "all: want true");
    struct luna_selector *sel = NULL;
    luna_error err = { 0 };
    if (selector && (luna_selector_parse(selector, LUNA_SELECTOR_LABELS, &sel, &err) < 0 ||
                     luna_selector_empty(sel))) {
        char why[sizeof err.msg + 16];
        snprintf(why, sizeof why, "selector: %s", sel ? "empty (use all=true)" : err.msg);
        luna_selector_free(sel);
        return fail(req, out, 400, "reconcile", name, why);
    }
    size_t enqueued = 0;
    char what[400];
    /* the keys asked for are logged, as many as fit in AUDIT_KEYS_MAX bytes,
     * then how many more: the log is the audit trail, but one line of
     * 1000 keys of the longest names (~320 KB) would stall the loop on a
     * slow log reader and be split by container runtimes (16 KiB lines) */
    struct luna_textbuf keys = LUNA_TEXTBUF_INIT;
    if (sel) {
        enqueued = luna_controller_enqueue_matching(c, sel);
        snprintf(what, sizeof what, "selector=%s", selector);
        luna_selector_free(sel);
    } else if (all) {
        enqueued = luna_controller_enqueue_all(c);
        snprintf(what, sizeof what, "all");
    } else {
        const char *sep = nkeys == 1 ? "key=" : "keys=";
        size_t more = 0;
        for (size_t i = 0; i < req->nargs; i++) {
            if (strcmp(req->args[2 * i], "key") != 0)
                continue;
            if (luna_controller_enqueue_key(c, req->args[2 * i + 1]) == 0)
                enqueued++;
            if (!more && keys.len + strlen(req->args[2 * i + 1]) < AUDIT_KEYS_MAX)
                luna_textbuf_printf(&keys, "%s%s", sep, req->args[2 * i + 1]);
            else
                more++;
            sep = ",";
        }
        if (more)
            luna_textbuf_printf(&keys, " (and %zu more)", more);
        if (keys.failed) /* out of memory: the count and the first at least */
            snprintf(what, sizeof what, "keys=%zu first=%s", nkeys, first_key);
    }
    luna_controller_note_trigger(c, LUNA_TRIGGER_RECONCILE, enqueued);
    struct answer a;
    start(&a);
    put_str(&a, "controller", name);
    put_str(&a, "action", "reconcile");
    put_uint(&a, "enqueued", enqueued);
    put_bool(&a, "paused", luna_controller_paused(c));
    finish(&a, out);
    log_reconcile(req, name, keys.len && !keys.failed ? keys.data : what, enqueued);
    luna_textbuf_free(&keys);
    return 200;
}

static int pause_resume(const struct luna_admin_request *req, struct luna_controller *c,
                        bool pause, struct luna_textbuf *out)
{
    const char *action = pause ? "pause" : "resume";
    if (req->nargs)
        return fail(req, out, 400, action, luna_controller_name(c), "takes no parameters");
    bool changed = luna_controller_paused(c) != pause;
    luna_controller_set_paused(c, pause);
    luna_controller_note_trigger(c, pause ? LUNA_TRIGGER_PAUSE : LUNA_TRIGGER_RESUME, 0);
    struct answer a;
    start(&a);
    put_str(&a, "controller", luna_controller_name(c));
    put_str(&a, "action", action);
    put_bool(&a, "paused", pause);
    put_bool(&a, "changed", changed);
    put_uint(&a, "queued", luna_workqueue_len(luna_controller_queue(c)));
    finish(&a, out);
    log_request(req, action, luna_controller_name(c), changed ? "changed" : "unchanged", 200,
                NULL);
    return 200;
}

int luna_admin_handle(const struct luna_admin_request *req, struct luna_generation *gen,
                      struct luna_textbuf *out)
{
    static const char list_path[] = LUNA_ADMIN_PREFIX "controllers";
    const char *path = req->path;
    bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    bool post = strcmp(req->method, "POST") == 0;
    if (strcmp(path, list_path) == 0) {
        if (!get)
            return fail(req, out, 405, "list", NULL, "method not allowed: want GET");
        return list_controllers(req, gen, out);
    }
    /* /admin/controllers/NAME/ACTION */
    size_t pl = strlen(list_path);
    if (strncmp(path, list_path, pl) != 0 || path[pl] != '/')
        return fail(req, out, 404, "unknown", NULL, "no such admin path");
    const char *name = path + pl + 1, *slash = strchr(name, '/');
    if (!slash || slash == name || strchr(slash + 1, '/'))
        return fail(req, out, 404, "unknown", NULL, "no such admin path");
    char cname[256];
    size_t nl = (size_t)(slash - name);
    if (nl >= sizeof cname)
        return fail(req, out, 404, "unknown", NULL, "no such controller");
    memcpy(cname, name, nl);
    cname[nl] = '\0';
    const char *action = slash + 1;
    bool is_reconcile = strcmp(action, "reconcile") == 0, is_pause = strcmp(action, "pause") == 0,
         is_resume = strcmp(action, "resume") == 0;
    if (!is_reconcile && !is_pause && !is_resume)
        return fail(req, out, 404, "unknown", cname,
                    "no such action: want reconcile, pause or resume");
    struct luna_controller *c = gen ? luna_generation_find(gen, cname) : NULL;
    if (!c)
        return fail(req, out, 404, action, cname, "no such controller");
    if (!post)
        return fail(req, out, 405, action, cname, "method not allowed: want POST");
    if (is_reconcile)
        return reconcile(req, c, out);
    return pause_resume(req, c, is_pause, out);
}
