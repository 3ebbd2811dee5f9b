/* devserver_api.c — see devserver_api.h. */
#include "devserver/devserver_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "devserver/devserver_auth.h"
#include "devserver/devserver_faults.h"
#include "devserver/devserver_gc.h"
#include "devserver/devserver_list.h"
#include "devserver/devserver_scale.h"
#include "devserver/devserver_seed.h"
#include "devserver/devserver_state.h"
#include "devserver/devserver_types.h"
#include "devserver/devserver_verbs.h"
#include "devserver/devserver_write.h"

/* ---- routing ---- */

#define MAX_SEGS 12

static int split_path(const char *path, char *buf, size_t bufsize, char **segs)
{
    snprintf(buf, bufsize, "%s", path);
    int n = 0;
    char *save = NULL;
    for (char *s = strtok_r(buf, "/", &save); s && n < MAX_SEGS; s = strtok_r(NULL, "/", &save))
        segs[n++] = s;
    return n;
}

static bool utf8(const char *s)
{
    size_t len = strlen(s);
    return luna_json_utf8_valid_prefix(s, len) == len;
}

/* The verb a request on a resource is (LUNA_DS_VERB_*), 0 for none. */
static unsigned request_verb(const luna_ds_request *req, const char *name)
{
    const char *m = req->method;
    if (strcmp(m, "GET") == 0) {
        const char *w = luna_ds_request_arg(req, "watch");
        if (w && (strcmp(w, "true") == 0 || strcmp(w, "1") == 0))
            return LUNA_DS_VERB_WATCH;
        return name ? LUNA_DS_VERB_GET : LUNA_DS_VERB_LIST;
    }
    if (strcmp(m, "POST") == 0)
        return LUNA_DS_VERB_CREATE;
    if (strcmp(m, "PUT") == 0)
        return LUNA_DS_VERB_UPDATE;
    if (strcmp(m, "PATCH") == 0)
        return LUNA_DS_VERB_PATCH;
    if (strcmp(m, "DELETE") == 0)
        return name ? LUNA_DS_VERB_DELETE : LUNA_DS_VERB_DELETECOLLECTION;
    return 0;
}

static void handle_resource(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                            const char *name, const char *sub, luna_ds_response *resp)
{
    const char *m = req->method;
    luna_ds_status st = { 0 };
    if (sub && strcmp(sub, "scale") == 0 && (t->subs & LUNA_DS_SUB_SCALE) && name) {
        if (t->namespaced && (!ns || !*ns))
            return luna_ds_reply_not_found(resp);
        luna_ds_scale_serve(ds, req, t, ns ? ns : "", name, resp);
        return;
    }
    if (sub && (strcmp(sub, "status") != 0 || !t->has_status)) {
        luna_ds_reply_not_found(resp);
        return;
    }
    /* Only the verbs kube serves for the resource; a kind kube serves
     * without get (the create-only reviews and bindings, not stored) is
     * listed in discovery but not implemented here beyond what
     * devserver_auth answers before this. */
    unsigned verb = request_verb(req, name);
    if (!sub && (!(t->verbs & verb) || !(t->verbs & LUNA_DS_VERB_GET))) {
        if (t->verbs & LUNA_DS_VERB_GET)
            return luna_ds_reply_not_allowed(resp);
        luna_ds_status_set(&st, 405, "MethodNotAllowed",
                           "the dev server does not implement %s (kube-apiserver serves it "
                           "without storing it; see docs/dev-server.md)", t->resource);
        luna_ds_reply_status(resp, &st);
        return;
    }
    if (t->namespaced && ns && *ns && !name && strcmp(m, "POST") != 0 && strcmp(m, "GET") != 0 &&
        strcmp(m, "DELETE") != 0) {
        luna_ds_reply_not_allowed(resp);
        return;
    }
    if (!name) {
        if (strcmp(m, "GET") == 0) {
            luna_ds_list_serve(ds, req, t, ns, resp);
        } else if (strcmp(m, "POST") == 0) {
            if (t->namespaced && (!ns || !*ns)) {
                luna_ds_reply_not_allowed(resp);
                return;
            }
            luna_ds_verbs_create(ds, req, t, ns ? ns : "", resp);
        } else if (strcmp(m, "DELETE") == 0) {
            luna_ds_verbs_delete_collection(ds, req, t, ns, resp);
        } else {
            luna_ds_reply_not_allowed(resp);
        }
        return;
    }
    if (t->namespaced && (!ns || !*ns)) {
        luna_ds_reply_not_found(resp);
        return;
    }
    if (strcmp(m, "GET") == 0)
        luna_ds_verbs_get(ds, req, t, ns ? ns : "", name, resp);
    else if (strcmp(m, "PUT") == 0)
        luna_ds_verbs_update(ds, req, t, ns ? ns : "", name, sub, resp);
    else if (strcmp(m, "PATCH") == 0)
        luna_ds_verbs_patch(ds, req, t, ns ? ns : "", name, sub, resp);
    else if (strcmp(m, "DELETE") == 0 && !sub)
        luna_ds_verbs_delete(ds, req, t, ns ? ns : "", name, resp);
    else
        luna_ds_reply_not_allowed(resp);
    (void)st;
}

static void handle_version(luna_ds_response *resp)
{
    json_t *v = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}",
                          "major", "1", "minor", "37", "gitVersion", "v1.37.2-luna." LUNA_VERSION,
                          "gitCommit", "0000000000000000000000000000000000000000",
                          "gitTreeState", "clean", "buildDate", "2025-01-01T00:00:00Z",
                          "goVersion", "go1.26.0", "compiler", "gc", "platform", "linux/amd64");
    luna_ds_reply_json(resp, 200, v);
}

static void handle_faults(luna_ds *ds, const luna_ds_request *req, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    if (strcmp(req->method, "PUT") == 0 || strcmp(req->method, "POST") == 0) {
        char *spec = strndup(req->body ? req->body : "", req->body_len);
        luna_error err = { 0 };
        int rc = spec ? luna_ds_faults_set(&ds->faults, spec, &err) : LUNA_ENOMEM;
        free(spec);
        if (rc < 0) {
            if (rc == LUNA_ENOMEM)
                luna_ds_status_oom(&st);
            else
                luna_ds_status_bad_request(&st, "%s", err.msg);
            luna_ds_reply_status(resp, &st);
            return;
        }
    } else if (strcmp(req->method, "GET") != 0) {
        luna_ds_reply_not_allowed(resp);
        return;
    }
    luna_ds_reply_json(resp, 200, luna_ds_faults_json(&ds->faults));
}

/* Whether a write is a dry run; false with `bad` set to the refused value
 * (as kube-apiserver quotes it, JSON) when it is not "All".  A DELETE with a
 * body takes its DeleteOptions, dryRun included, from the body and ignores
 * the query (kube-apiserver's delete handler decodes the query only when the
 * body is empty); a body that is not JSON is refused later, by the verb. */
static bool write_dry_run(const luna_ds_request *req, bool *dry, char *bad, size_t badsz)
{
    *dry = false;
    if (strcmp(req->method, "GET") == 0)
        return true;
    if (strcmp(req->method, "DELETE") == 0 && req->body_len > 0) {
        json_t *opts = json_loadb(req->body, req->body_len, 0, NULL);
        json_t *values = json_object_get(opts, "dryRun");
        bool ok = true;
        size_t i;
        json_t *v;
        json_array_foreach(values, i, v) {
            if (json_is_string(v) && strcmp(json_string_value(v), "All") == 0)
                *dry = true;
            else
                ok = false;
        }
        if (!ok) {
            char *text = json_dumps(values, JSON_COMPACT);
            snprintf(bad, badsz, "%s", text ? text : "[]");
            free(text);
            *dry = false;
        }
        json_decref(opts);
        return ok;
    }
    const char *q = luna_ds_request_arg(req, "dryRun");
    if (q && strcmp(q, "All") != 0) {
        snprintf(bad, badsz, "[\"%.200s\"]", q);
        return false;
    }
    *dry = q != NULL;
    return true;
}


void luna_ds_api_handle(luna_ds *ds, const luna_ds_request *req, luna_ds_response *resp)
{
    memset(resp, 0, sizeof *resp);
    /* an admission the transport did not take belongs to no one now */
    luna_ds_admit_job_free(luna_ds_admission_take(ds));
    luna_ds_convert_job_free(luna_ds_conversion_take(ds));
    char buf[2048];
    char *s[MAX_SEGS];
    int n = split_path(req->path, buf, sizeof buf, s);
    bool get = strcmp(req->method, "GET") == 0;
    if (n == 1 && strcmp(s[0], "version") == 0 && get) {
        handle_version(resp);
        return;
    }
    if (n == 1 && (strcmp(s[0], "healthz") == 0 || strcmp(s[0], "livez") == 0 ||
                   strcmp(s[0], "readyz") == 0)) {
        char *ok = strdup("ok");
        if (!ok)
            luna_ds_reply_oom(resp);
        else
            luna_ds_reply_bytes(resp, 200, ok);
        return;
    }
    if (n == 3 && strcmp(s[0], "luna") == 0 && strcmp(s[1], "v1") == 0) {
        if (strcmp(s[2], "dump") == 0 && get) {
            luna_ds_reply_json(resp, 200, luna_ds_seed_dump(ds));
            return;
        }
        if (strcmp(s[2], "faults") == 0 && ds->admin) {
            handle_faults(ds, req, resp);
            return;
        }
        luna_ds_reply_page_not_found(resp);
        return;
    }
    if (n >= 2 && strcmp(s[0], "openapi") == 0 && strcmp(s[1], "v3") == 0 && get) {
        if (n == 2) {
            luna_ds_reply_json(resp, 200, luna_ds_types_openapi_index(ds->types));
            return;
        }
        char gv[600] = "";
        for (int i = 2; i < n; i++) {
            strncat(gv, s[i], sizeof gv - strlen(gv) - 1);
            if (i + 1 < n)
                strncat(gv, "/", sizeof gv - strlen(gv) - 1);
        }
        json_t *doc = luna_ds_types_openapi_gv(ds->types, gv);
        if (!doc) {
            /* kube-apiserver: a bare 404, no body, no content type */
            char *empty = strdup("");
            if (!empty)
                return luna_ds_reply_oom(resp);
            luna_ds_reply_bytes(resp, 404, empty);
            resp->content_type = "";
            return;
        }
        luna_ds_reply_json(resp, 200, doc);
        return;
    }
    /* Reviews and token requests (devserver_auth): not stored objects. */
    if (n == 4 && strcmp(s[0], "apis") == 0 && strcmp(s[3], "tokenreviews") == 0 &&
        strcmp(s[1], "authentication.k8s.io") == 0 && strcmp(s[2], "v1") == 0)
        return luna_ds_auth_token_review(ds, req, resp);
    if (n == 4 && strcmp(s[0], "apis") == 0 && strcmp(s[3], "subjectaccessreviews") == 0 &&
        strcmp(s[1], "authorization.k8s.io") == 0 && strcmp(s[2], "v1") == 0)
        return luna_ds_auth_access_review(ds, req, resp);
    if (n == 4 && strcmp(s[0], "apis") == 0 && strcmp(s[3], "selfsubjectaccessreviews") == 0 &&
        strcmp(s[1], "authorization.k8s.io") == 0 && strcmp(s[2], "v1") == 0)
        return luna_ds_auth_self_access_review(ds, req, resp);
    if (n == 7 && strcmp(s[0], "api") == 0 && strcmp(s[1], "v1") == 0 &&
        strcmp(s[2], "namespaces") == 0 && strcmp(s[4], "serviceaccounts") == 0 &&
        strcmp(s[6], "token") == 0)
        return luna_ds_auth_token_request(ds, req, s[3], s[5], resp);
    const char *group, *version;
    int rest;
    if (n >= 1 && strcmp(s[0], "api") == 0) {
        if (n == 1) {
            if (!get)
                return luna_ds_reply_not_allowed(resp);
            if (luna_ds_types_wants_aggregated(req->accept)) {
                luna_ds_reply_json(resp, 200, luna_ds_types_aggregated(ds->types, true));
                resp->content_type = LUNA_DS_AGGREGATED_TYPE;
                return;
            }
            luna_ds_reply_json(resp, 200, luna_ds_types_api_versions(ds->server_address));
            return;
        }
        group = "";
        version = s[1];
        rest = 2;
    } else if (n >= 1 && strcmp(s[0], "apis") == 0) {
        if (n == 1) {
            if (!get)
                return luna_ds_reply_not_allowed(resp);
            if (luna_ds_types_wants_aggregated(req->accept)) {
                luna_ds_reply_json(resp, 200, luna_ds_types_aggregated(ds->types, false));
                resp->content_type = LUNA_DS_AGGREGATED_TYPE;
                return;
            }
            luna_ds_reply_json(resp, 200, luna_ds_types_group_list(ds->types));
            return;
        }
        /* A group nothing serves is outside kube-apiserver's routes: its
         * paths get the mux's plain-text 404, not a Status. */
        json_t *g = luna_ds_types_group(ds->types, s[1]);
        if (!g)
            return luna_ds_reply_page_not_found(resp);
        if (n == 2) {
            luna_ds_reply_json(resp, 200, g);
            return;
        }
        json_decref(g);
        group = s[1];
        version = s[2];
        rest = 3;
    } else {
        luna_ds_reply_page_not_found(resp);
        return;
    }
    if (n == rest) {
        json_t *rl = luna_ds_types_resource_list(ds->types, group, version);
        if (!rl || !get) {
            json_decref(rl);
            return rl ? luna_ds_reply_not_allowed(resp) : luna_ds_reply_not_found(resp);
        }
        luna_ds_reply_json(resp, 200, rl);
        return;
    }
    const char *ns = NULL, *res, *name = NULL, *sub = NULL;
    int k = rest;
    if (n - k >= 3 && strcmp(s[k], "namespaces") == 0) {
        ns = s[k + 1];
        res = s[k + 2];
        k += 3;
    } else {
        res = s[k];
        k += 1;
    }
    if (k < n)
        name = s[k++];
    if (k < n)
        sub = s[k++];
    if (k < n)
        return luna_ds_reply_not_found(resp);
    luna_ds_type *t = luna_ds_types_find(ds->types, group, version, res);
    if (!t && ns && !name && !*group && (strcmp(res, "status") == 0 || strcmp(res, "finalize") == 0)) {
        /* /api/v1/namespaces/NAME/status: the namespace's own subresource */
        t = luna_ds_types_find(ds->types, "", version, "namespaces");
        name = ns;
        sub = res;
        ns = NULL;
    }
    /* No namespace or object can have a name that is not UTF-8 (nor could
     * it be written into a JSON document). */
    if (!t || (ns && !utf8(ns)) || (name && !utf8(name))) {
        luna_ds_reply_not_found(resp);
        return;
    }
    if (!t->namespaced && ns) {
        luna_ds_reply_not_found(resp);
        return;
    }
    /* dryRun=All (the only value kube-apiserver accepts) on a write */
    bool dry;
    char bad[256];
    if (!write_dry_run(req, &dry, bad, sizeof bad)) {
        const char *m = req->method;
        const char *opts = strcmp(m, "POST") == 0    ? "CreateOptions"
                           : strcmp(m, "PUT") == 0   ? "UpdateOptions"
                           : strcmp(m, "PATCH") == 0 ? "PatchOptions"
                                                     : "DeleteOptions";
        luna_ds_status st = { 0 };
        luna_ds_status_invalid(&st, "meta.k8s.io", opts, "", "FieldValueNotSupported", "dryRun",
                               "Unsupported value: %s: supported values: \"All\"", bad);
        luna_ds_reply_status(resp, &st);
        return;
    }
    ds->dry_run = dry;
    ds->admission.req = req;
    ds->conversion.active = true;
    ds->conversion.read_key[0] = '\0';
    ds->conversion.want = t;
    ds->conversion.answers = req->conversions;
    handle_resource(ds, req, t, ns, name, sub, resp);
    ds->conversion.active = false;
    ds->conversion.want = NULL;
    ds->conversion.answers = NULL;
    ds->admission.req = NULL;
    ds->dry_run = false;
}

/* ---- init ---- */

int luna_ds_api_new(const luna_ds_api_config *cfg, luna_ds **out, luna_error *err)
{
    *out = NULL;
    luna_ds *ds = calloc(1, sizeof *ds);
    if (!ds)
        return luna_error_set(err, LUNA_ENOMEM, "dev server: out of memory");
    snprintf(ds->server_address, sizeof ds->server_address, "%s",
             cfg->server_address ? cfg->server_address : "");
    ds->bookmark_interval = cfg->bookmark_interval;
    ds->admin = cfg->admin;
    luna_ds_faults_init(&ds->faults);
    ds->write_hooks = luna_ds_gc_write_hooks();
    ds->store = luna_ds_store_new(cfg->history);
    ds->types = ds->store ? luna_ds_types_new(ds->store) : NULL;
    if (!ds->types) {
        luna_ds_api_free(ds);
        return luna_error_set(err, LUNA_ENOMEM, "dev server: out of memory");
    }
    static const char *const defaults[] = { "default", "kube-node-lease", "kube-public",
                                            "kube-system" };
    luna_ds_type *nt = luna_ds_types_namespaces(ds->types);
    for (size_t i = 0; i < 4; i++) {
        json_t *doc = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                                "metadata", "name", defaults[i]);
        json_t *created = NULL;
        luna_ds_status st = { 0 };
        int rc = doc ? luna_ds_write_create(ds, nt, doc, "kube-apiserver", &created, &st)
                     : LUNA_ENOMEM;
        json_decref(created);
        luna_ds_status_clear(&st);
        if (rc < 0) {
            luna_ds_api_free(ds);
            return luna_error_set(err, rc, "dev server: cannot create namespace %s",
                                  defaults[i]);
        }
    }
    *out = ds;
    return 0;
}

void luna_ds_api_free(luna_ds *ds)
{
    if (!ds)
        return;
    luna_ds_gc_shutdown(ds);
    luna_ds_admission_free(&ds->admission);
    luna_ds_conversion_free(&ds->conversion);
    luna_ds_auth_free(&ds->auth);
    luna_ds_types_free(ds->types);
    luna_ds_store_free(ds->store);
    free(ds);
}
