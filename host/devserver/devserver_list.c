/* devserver_list.c — see devserver_list.h. */
#include "devserver/devserver_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devserver/devserver_continue.h"
#include "devserver/devserver_doc.h"
#include "devserver/devserver_negotiate.h"
#include "devserver/devserver_state.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_watch.h"
#include "base/selector.h"
#include "base/textbuf.h"

/* ---- request parsing shared by list and watch ---- */

static bool field_known(const luna_ds_type *t, const char *path)
{
    if (strcmp(path, "metadata.name") == 0 || strcmp(path, "metadata.namespace") == 0)
        return true;
    for (const char *const *p = t->fields; p && *p; p++)
        if (strcmp(*p, path) == 0)
            return true;
    return false;
}

/* A field selector path the type does not index, refused in the words of
 * the kube-apiserver version the dev server follows: a type with its own
 * field label conversion (Pod, Node, Event, Namespace, Secret, Service, a
 * custom resource) says "field label not supported", Job names itself, and
 * every other type gets apimachinery's default. */
static int field_unknown(const luna_ds_type *t, const char *path, luna_ds_status *st)
{
    if (!t->custom && strcmp(t->group, "batch") == 0 && strcmp(t->kind, "Job") == 0)
        return luna_ds_status_bad_request(st, "field label \"%s\" not supported for Job", path);
    if (t->custom || t->fields)
        return luna_ds_status_bad_request(st, "field label not supported: %s", path);
    return luna_ds_status_bad_request(st, "\"%s\" is not a known field selector: only "
                                      "\"metadata.name\", \"metadata.namespace\"", path);
}

int luna_ds_list_filter(const luna_ds_request *req, luna_ds_type *t, const char *ns, bool shard,
                        luna_ds_filter *f, luna_ds_status *st)
{
    memset(f, 0, sizeof *f);
    luna_error err;
    int rc = luna_selector_parse(luna_ds_request_arg(req, "labelSelector"), LUNA_SELECTOR_LABELS,
                                 &f->labels, &err);
    if (rc == 0)
        rc = luna_selector_parse(luna_ds_request_arg(req, "fieldSelector"), LUNA_SELECTOR_FIELDS,
                                 &f->fields, &err);
    if (rc == 0 && ns && *ns && !(f->ns = strdup(ns)))
        rc = LUNA_ENOMEM;
    if (rc < 0) {
        luna_ds_filter_clear(f);
        if (rc == LUNA_ENOMEM)
            return luna_ds_status_oom(st);
        return luna_ds_status_bad_request(st, "%s", err.msg);
    }
    for (size_t i = 0; f->fields && i < f->fields->n; i++)
        if (!field_known(t, f->fields->reqs[i].key)) {
            rc = field_unknown(t, f->fields->reqs[i].key, st);
            luna_ds_filter_clear(f);
            return rc;
        }
    /* KEP-5866.  kube-apiserver v1.37 parses the selector in the registry
     * (not in ListOptions validation) and returns a plain error, which the
     * handler answers as 500 with no reason: so does the dev server. */
    const char *shard_text = shard ? luna_ds_request_arg(req, "shardSelector") : NULL;
    if (shard_text && *shard_text) {
        rc = luna_shard_parse(shard_text, &f->shard, &err);
        if (rc == 0 && !(f->shard_text = luna_shard_text(f->shard)))
            rc = LUNA_ENOMEM;
        if (rc < 0) {
            luna_ds_filter_clear(f);
            if (rc == LUNA_ENOMEM)
                return luna_ds_status_oom(st);
            return luna_ds_status_set(st, 500, "", "invalid shard selector: %s", err.msg);
        }
    }
    return 0;
}

static int parse_rv(const char *s, uint64_t *rv, luna_ds_status *st)
{
    char *end;
    if (!*s || strspn(s, "0123456789") != strlen(s))
        return luna_ds_status_bad_request(st, "invalid resource version: strconv.ParseUint: "
                                          "parsing \"%s\": invalid syntax", s);
    *rv = strtoull(s, &end, 10);
    return 0;
}

static int too_large(luna_ds *ds, uint64_t rv, luna_ds_status *st)
{
    luna_ds_status_set(st, 504, "Timeout", "Timeout: Too large resource version: %llu, current: %llu",
                       (unsigned long long)rv, (unsigned long long)luna_ds_store_rv(ds->store));
    st->details = json_pack("{s:[{s:s,s:s}],s:i}", "causes", "reason", "ResourceVersionTooLarge",
                            "message", "Too large resource version", "retryAfterSeconds", 1);
    return LUNA_ETIMEOUT;
}

/* ListOptions validation errors, gathered as apimachinery's
 * ValidateListOptions gathers them (every rule is checked; the message
 * lists them all, duplicates once, in brackets when more than one). */
#define MAX_CAUSES 6
struct list_options_errors {
    int n;
    struct {
        const char *field;
        const char *reason;      /* FieldValueForbidden, FieldValueNotSupported */
        char body[192];          /* field.Error's ErrorBody() */
    } c[MAX_CAUSES];
};

static void forbidden(struct list_options_errors *e, const char *field, const char *detail)
{
    if (e->n == MAX_CAUSES)
        return;
    e->c[e->n].field = field;
    e->c[e->n].reason = "FieldValueForbidden";
    snprintf(e->c[e->n].body, sizeof e->c[e->n].body, "Forbidden: %s", detail);
    e->n++;
}

/* values: the supported values, already quoted and joined. */
static void not_supported(struct list_options_errors *e, const char *field, const char *value,
                          const char *values)
{
    if (e->n == MAX_CAUSES)
        return;
    json_t *q = json_string(value);
    char *quoted = q ? json_dumps(q, JSON_ENCODE_ANY) : NULL;
    e->c[e->n].field = field;
    e->c[e->n].reason = "FieldValueNotSupported";
    snprintf(e->c[e->n].body, sizeof e->c[e->n].body, "Unsupported value: %s: supported values: %s",
             quoted ? quoted : "\"\"", values);
    free(quoted);
    json_decref(q);
    e->n++;
}

/* 422 Invalid for the gathered errors (0 if there are none). */
static int list_options_invalid(const struct list_options_errors *e, luna_ds_status *st)
{
    if (e->n == 0)
        return 0;
    char msg[900];
    size_t len = 0;
    int shown = 0;
    json_t *causes = json_array();
    for (int i = 0; i < e->n; i++) {
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup |= strcmp(e->c[i].field, e->c[j].field) == 0 &&
                   strcmp(e->c[i].body, e->c[j].body) == 0;
        json_array_append_new(causes, json_pack("{s:s,s:s,s:s}", "reason", e->c[i].reason,
                                                "message", e->c[i].body, "field", e->c[i].field));
        if (dup)
            continue;
        int n = snprintf(msg + len, sizeof msg - len, "%s%s: %s", shown ? ", " : "",
                         e->c[i].field, e->c[i].body);
        if (n > 0 && (size_t)n < sizeof msg - len)
            len += (size_t)n;
        shown++;
    }
    if (shown > 1)
        luna_ds_status_set(st, 422, "Invalid", "ListOptions.meta.k8s.io \"\" is invalid: [%s]", msg);
    else
        luna_ds_status_set(st, 422, "Invalid", "ListOptions.meta.k8s.io \"\" is invalid: %s", msg);
    st->details = json_pack("{s:s,s:s,s:o}", "group", "meta.k8s.io", "kind", "ListOptions",
                            "causes", causes);
    return LUNA_EINVAL;
}

/* ---- LIST ---- */

/* Past the JSON value at p (compact, well-formed: the store's json_dumps). */
static const char *skip_value(const char *p)
{
    int depth = 0;
    do {
        if (*p == '"') {
            for (p++; *p != '"'; p++)
                if (*p == '\\')
                    p++;
            p++;
        } else if (*p == '{' || *p == '[') {
            depth++;
            p++;
        } else if (*p == '}' || *p == ']') {
            depth--;
            p++;
        } else if (depth > 0) {
            p++; /* ':', ',' or a byte of a scalar inside the container */
        } else {
            while (*p && *p != ',' && *p != '}' && *p != ']')
                p++;
        }
    } while (depth > 0 && *p);
    return p;
}

/* An item of a LIST of a built-in kind, as kube-apiserver writes it:
 * without the object's apiVersion and kind (kubernetes#3030; a custom
 * resource's items keep theirs).  bytes: one compact JSON object. */
static void put_list_item(struct luna_textbuf *b, const char *bytes, bool keep_type)
{
    if (keep_type || bytes[0] != '{') {
        luna_textbuf_puts(b, bytes);
        return;
    }
    luna_textbuf_putc(b, '{');
    bool first = true;
    const char *p = bytes + 1;
    while (*p == '"') {
        const char *key = p;
        const char *end = skip_value(p) + 1; /* past the key and its ':' */
        const char *next = skip_value(end);
        size_t klen = (size_t)(end - key);
        bool type = (klen == 7 && memcmp(key, "\"kind\":", 7) == 0) ||
                    (klen == 13 && memcmp(key, "\"apiVersion\":", 13) == 0);
        if (!type) {
            if (!first)
                luna_textbuf_putc(b, ',');
            luna_textbuf_append(b, key, (size_t)(next - key));
            first = false;
        }
        p = *next == ',' ? next + 1 : next;
    }
    luna_textbuf_putc(b, '}');
}

/* First index in the sorted items whose key is > after (or >= prefix). */
static size_t lower_bound(luna_ds_obj **items, size_t n, const char *key, bool strictly_after)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(items[mid]->key, key);
        if (d < 0 || (strictly_after && d == 0))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void handle_watch(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                         const luna_ds_output *out, luna_ds_response *resp);

void luna_ds_list_serve(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                        luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    luna_ds_output neg;
    if (luna_ds_negotiate_route(req->accept, t, true, &st) < 0 ||
        luna_ds_negotiate(req->accept, t, &neg, &st) < 0) {
        luna_ds_reply_status(resp, &st);
        return;
    }
    if (luna_ds_request_flag(req, "watch")) {
        handle_watch(ds, req, t, ns, &neg, resp);
        return;
    }
    luna_ds_filter f;
    if (luna_ds_list_filter(req, t, ns, !ds->faults.ignore_shard_selector, &f, &st) < 0) {
        luna_ds_reply_status(resp, &st);
        return;
    }
    const char *rvs = luna_ds_request_arg(req, "resourceVersion");
    const char *match = luna_ds_request_arg(req, "resourceVersionMatch");
    const char *cont = luna_ds_request_arg(req, "continue");
    const char *lim = luna_ds_request_arg(req, "limit");
    long long limit = 0;
    if (lim && *lim) {
        char *end;
        limit = strtoll(lim, &end, 10);
        if (*end || limit < 0)
            limit = 0;
    }
    if (rvs && !*rvs)
        rvs = NULL;
    if (match && !*match)
        match = NULL;
    if (cont && !*cont)
        cont = NULL;
    uint64_t now = luna_ds_store_rv(ds->store);
    uint64_t snap = now;
    char *start = NULL;
    struct list_options_errors invalid = { 0 };
    if (match) {
        if (!rvs)
            forbidden(&invalid, "resourceVersionMatch",
                      "resourceVersionMatch is forbidden unless resourceVersion is provided");
        if (cont)
            forbidden(&invalid, "resourceVersionMatch",
                      "resourceVersionMatch is forbidden when continue is provided");
        if (strcmp(match, "Exact") != 0 && strcmp(match, "NotOlderThan") != 0)
            not_supported(&invalid, "resourceVersionMatch", match,
                          "\"Exact\", \"NotOlderThan\", \"\"");
        if (strcmp(match, "Exact") == 0 && rvs && strcmp(rvs, "0") == 0)
            forbidden(&invalid, "resourceVersionMatch",
                      "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"");
    }
    if (luna_ds_request_arg(req, "sendInitialEvents"))
        forbidden(&invalid, "sendInitialEvents", "sendInitialEvents is forbidden for list");
    int rc = list_options_invalid(&invalid, &st);
    if (rc == 0 && cont) {
        if (rvs && strcmp(rvs, "0") != 0)
            rc = luna_ds_status_bad_request(&st, "specifying resource version is not allowed "
                                            "when using continue");
        else if ((rc = luna_ds_continue_decode(cont, &snap, &start)) == LUNA_ENOMEM)
            luna_ds_status_oom(&st);
        else if (rc < 0)
            rc = luna_ds_status_bad_request(&st, "continue key is not valid: incorrect encoded "
                                            "start resourceVersion (version meta.k8s.io/v1)");
        else if (snap < luna_ds_store_floor(t->coll) || snap > now) {
            luna_ds_status_set(&st, 410, "Expired", "The provided continue parameter is too old "
                               "to display a consistent list result. You can start a new list "
                               "without the continue parameter, or use the continue token in "
                               "this response to retrieve the remainder of the results. "
                               "Continuing with the provided token results in an inconsistent "
                               "list - objects that were created, modified, or deleted between "
                               "the time the first chunk was returned and now may show up in "
                               "the list.");
            rc = LUNA_ENOTFOUND;
        }
    } else if (rc == 0 && rvs) {
        uint64_t want;
        rc = parse_rv(rvs, &want, &st);
        if (rc == 0 && want != 0) {
            if (want > now)
                rc = too_large(ds, want, &st);
            else if (match && strcmp(match, "Exact") == 0) {
                if (want < luna_ds_store_floor(t->coll)) {
                    luna_ds_status_set(&st, 410, "Expired",
                                       "The resourceVersion for the provided list is too old.");
                    rc = LUNA_ENOTFOUND;
                } else {
                    snap = want;
                }
            }
        } else if (rc == 0 && want == 0 && !match) {
            limit = 0; /* served "from the cache": kube ignores limit for RV 0 */
        }
    }
    /* kube converts the list it read: its errors come first */
    if (rc == 0 && neg.as == LUNA_DS_AS_PARTIAL)
        rc = luna_ds_negotiate_mismatch(t, true, &st);
    if (rc < 0) {
        free(start);
        luna_ds_filter_clear(&f);
        luna_ds_reply_status(resp, &st);
        return;
    }
    /* PartialObjectMetadataList: items as PartialObjectMetadata, no
     * shardInfo (kube copies resourceVersion, continue and
     * remainingItemCount only), and "items": null when empty. */
    const char *partial = neg.as == LUNA_DS_AS_PARTIAL_LIST ? neg.meta_version : NULL;
    char partial_version[32];
    snprintf(partial_version, sizeof partial_version, "meta.k8s.io/%s", partial ? partial : "");
    luna_ds_obj **items;
    size_t n;
    if (luna_ds_store_snapshot(t->coll, snap == now ? 0 : snap, &items, &n) < 0) {
        /* not too old (checked above): out of memory */
        free(start);
        luna_ds_filter_clear(&f);
        luna_ds_status_oom(&st);
        luna_ds_reply_status(resp, &st);
        return;
    }
    size_t i = 0, end = n;
    if (t->namespaced && f.ns) {
        char prefix[300];
        snprintf(prefix, sizeof prefix, "%s/", f.ns);
        i = lower_bound(items, n, prefix, false);
        prefix[strlen(prefix) - 1] = '0'; /* '/' + 1 */
        end = lower_bound(items, n, prefix, false);
    }
    if (start) {
        size_t s = lower_bound(items, n, start, true);
        if (s > i)
            i = s;
    }
    bool convert = luna_ds_types_storage_of(ds->types, t) != t;
    bool selects = luna_ds_filter_selects(&f);
    struct luna_textbuf b = LUNA_TEXTBUF_INIT;
    size_t est = 256;
    for (size_t k = i; k < end && (limit <= 0 || k - i < (size_t)limit); k++)
        est += items[k]->len + 1;
    luna_textbuf_reserve(&b, est);
    luna_textbuf_printf(&b, "{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":"
                        "{\"resourceVersion\":\"%llu\"",
                        partial ? "PartialObjectMetadataList" : t->list_kind,
                        partial ? partial_version : t->api_version, (unsigned long long)snap);
    size_t meta_end = b.len;
    if (f.shard && !partial) {
        /* KEP-5866: the applied selector, in its canonical form (the
         * server's String()), tells the client the server filtered. */
        json_t *sel = json_string(f.shard_text);
        char *s = sel ? json_dumps(sel, JSON_ENCODE_ANY) : NULL;
        if (s)
            luna_textbuf_printf(&b, ",\"shardInfo\":{\"selector\":%s}", s);
        else
            b.failed = true;
        free(s);
        json_decref(sel);
    }
    luna_textbuf_puts(&b, "},\"items\":");
    size_t items_at = b.len;
    luna_textbuf_putc(&b, '[');
    long long count = 0;
    size_t k = i;
    const char *last_key = NULL;
    for (; k < end; k++) {
        if (limit > 0 && count == limit)
            break;
        luna_ds_obj *o = items[k];
        if (selects && !luna_ds_filter_match(&f, o))
            continue;
        if (count)
            luna_textbuf_putc(&b, ',');
        if (partial && !convert && luna_ds_partial_bytes(o->bytes, o->len, partial, &b)) {
            /* the stored bytes' metadata, unparsed */
        } else if (convert || partial) {
            json_t *doc = luna_ds_doc_as(ds, t, o);
            if (partial)
                doc = luna_ds_partial_object(doc, partial);
            char *s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
            if (s)
                put_list_item(&b, s, partial || t->custom);
            else
                b.failed = true;
            free(s);
            json_decref(doc);
        } else {
            put_list_item(&b, o->bytes, t->custom);
        }
        count++;
        last_key = o->key;
    }
    if (partial && count == 0) {
        b.len = items_at;
        luna_textbuf_puts(&b, "null}\n");
    } else {
        luna_textbuf_puts(&b, "]}\n");
    }
    if (limit > 0 && k < end && last_key) {
        /* more keys remain: a continue token, and a count without selectors */
        char *tok = luna_ds_continue_encode(snap, last_key);
        if (!tok)
            b.failed = true;
        struct luna_textbuf out = LUNA_TEXTBUF_INIT;
        luna_textbuf_reserve(&out, b.len + 128);
        luna_textbuf_append(&out, b.data, meta_end);
        luna_textbuf_printf(&out, ",\"continue\":\"%s\"", tok ? tok : "");
        if (!selects)
            luna_textbuf_printf(&out, ",\"remainingItemCount\":%zu", end - k);
        free(tok);
        /* splice into the metadata */
        luna_textbuf_append(&out, b.data + meta_end, b.len - meta_end);
        out.failed |= b.failed;
        luna_textbuf_free(&b);
        b = out;
    }
    free(items);
    free(start);
    luna_ds_filter_clear(&f);
    if (b.failed) {
        luna_textbuf_free(&b);
        luna_ds_reply_oom(resp);
        return;
    }
    resp->code = 200;
    resp->body = luna_textbuf_steal(&b, &resp->len);
}

/* ---- WATCH ---- */

static void handle_watch(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                         const luna_ds_output *out, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    luna_ds_watch_opts o = {
        .watches = &ds->watches,
        .faults = &ds->faults,
        .store = ds->store,
        .type = t,
        .storage = luna_ds_types_storage_of(ds->types, t),
        .ds = ds,
        .bookmark_interval = ds->bookmark_interval,
        .partial = out->as == LUNA_DS_AS_PARTIAL ? out->meta_version : NULL,
        /* as=PartialObjectMetadataList: kube's embedded encoder fails on
         * each event's object (logged), then encoding the object as it was
         * fails too and the watch ends, 200 and nothing sent */
        .end_on_object = out->as == LUNA_DS_AS_PARTIAL_LIST,
    };
    if (luna_ds_list_filter(req, t, ns, !ds->faults.ignore_shard_selector, &o.filter, &st) < 0) {
        luna_ds_reply_status(resp, &st);
        return;
    }
    const char *rvs = luna_ds_request_arg(req, "resourceVersion");
    const char *match = luna_ds_request_arg(req, "resourceVersionMatch");
    const char *cont = luna_ds_request_arg(req, "continue");
    if (match && !*match)
        match = NULL;
    bool gate = !ds->faults.watch_list_off;  /* the WatchList feature gate */
    bool from_state = !rvs || !*rvs || strcmp(rvs, "0") == 0;
    o.bookmarks = luna_ds_request_flag(req, "allowWatchBookmarks");
    /* sendInitialEvents is a *bool: set when present, false for "0" or
     * "false"; with the gate on, kube's SetListOptionsDefaults makes a
     * watch from "" or "0" without it (and without resourceVersionMatch)
     * a watch list, so with bookmarks it ends its state with the
     * initial-events-end bookmark too. */
    bool sie = luna_ds_request_arg(req, "sendInitialEvents") != NULL;
    o.send_initial_events = luna_ds_request_flag(req, "sendInitialEvents");
    if (gate && !sie && !match && from_state) {
        sie = o.send_initial_events = true;
        match = "NotOlderThan";
    }
    const char *ts = luna_ds_request_arg(req, "timeoutSeconds");
    if (ts && *ts)
        o.timeout = strtod(ts, NULL);
    /* apimachinery's validateWatchOptions, every rule checked. */
    struct list_options_errors invalid = { 0 };
    if (sie) {
        if (!match || strcmp(match, "NotOlderThan") != 0)
            forbidden(&invalid, "resourceVersionMatch",
                      "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
        if (!gate)
            forbidden(&invalid, "sendInitialEvents", "sendInitialEvents is forbidden for watch "
                      "unless the WatchList feature gate is enabled");
    }
    if (match) {
        if (!sie)
            forbidden(&invalid, "resourceVersionMatch",
                      "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                      "provided");
        if (strcmp(match, "NotOlderThan") != 0)
            not_supported(&invalid, "resourceVersionMatch", match, "\"NotOlderThan\"");
        if (cont && *cont)
            forbidden(&invalid, "resourceVersionMatch",
                      "resourceVersionMatch is forbidden when continue is provided");
    }
    int rc = list_options_invalid(&invalid, &st);
    if (rc == 0 && !from_state) {
        rc = parse_rv(rvs, &o.rv, &st);
        /* A watch list from a version not reached yet: kube-apiserver
         * waits up to 3 s for it, then answers 200 and one ERROR event,
         * a 504 "Too large resource version" Status.  A plain watch from
         * one is accepted and waits for it in silence, as kube-apiserver's
         * does (the watch starts with the version's first event; no
         * bookmark comes before the store reaches it). */
        if (rc == 0 && sie && o.rv > luna_ds_store_rv(ds->store))
            o.too_large = true;
        o.start = LUNA_DS_WATCH_FROM_RV;
    } else if (rc == 0 && sie && !o.send_initial_events) {
        /* sendInitialEvents=false from "" or "0": no state, changes from now */
        o.start = LUNA_DS_WATCH_FROM_RV;
        o.rv = luna_ds_store_rv(ds->store);
    } else {
        o.start = LUNA_DS_WATCH_FROM_STATE;
    }
    if (rc == 0)
        rc = luna_ds_negotiate_stream(out, &st);
    if (rc < 0) {
        luna_ds_filter_clear(&o.filter);
        luna_ds_reply_status(resp, &st);
        return;
    }
    resp->watch = luna_ds_watch_start(&o);
    if (!resp->watch) {
        luna_ds_reply_oom(resp);
        return;
    }
    resp->code = 200;
}
