/*
 * object_stream.c — libFuzzer target for the LIST / WATCH object stream
 * (cache/object_stream): the body is fed whole to one stream and in
 * chunks split at fuzzer-chosen points to another, as libcurl may hand it
 * over, and both must deliver the same items, bookmarks and errors.
 *
 * Input: byte 0 options (bit 0 WATCH instead of LIST, bit 1 keep
 * managedFields, bit 2 a 256-byte item bound, bit 3 reset and feed the
 * split stream a second time, bit 4 metadata only), byte 1 the number of
 * split points (mod 16), then two bytes per split point; the rest is the
 * body.
 *
 * Checked: same return code and same callbacks whatever the split; every
 * item has a name and its cached JSON is itself valid JSON of one object
 * (metadata only: whose keys are apiVersion "v1", kind "Fuzz" and at most
 * metadata), whose labels as a script decodes them (each key's last value,
 * when a string) are the object's labels; LIST metadata is the same.
 * Every object reference is dropped.
 */
#include "fuzz_input.h"

#include "base/json.h"
#include "cache/object_stream.h"

struct run {
    uint64_t hash;
    size_t calls;
};

static bool metadata_only;

static int ignore(void *ud, const luna_json_event *ev, luna_error *err)
{
    return 0;
}

/* Counts the top-level keys other than apiVersion, kind and metadata. */
static int other_keys(void *ud, const luna_json_event *ev, luna_error *err)
{
    if (ev->type == LUNA_JSON_KEY && ev->depth == 1 &&
        !(ev->len == 10 && memcmp(ev->str, "apiVersion", 10) == 0) &&
        !(ev->len == 4 && memcmp(ev->str, "kind", 4) == 0) &&
        !(ev->len == 8 && memcmp(ev->str, "metadata", 8) == 0))
        ++*(size_t *)ud;
    return 0;
}

/* metadata.labels of a cached object as a script decoding it reads them:
 * each pair in order (copies), value NULL unless a string. */
struct pair {
    char *k, *v;
    size_t kn, vn;
};
struct label_scan {
    bool in_md, in_labels;
    struct pair p[512];
    size_t n;
    bool overflow;
};

static char *copy(const char *s, size_t n)
{
    char *c = malloc(n + 1);
    if (!c)
        abort();
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

static int scan_labels(void *ud, const luna_json_event *ev, luna_error *err)
{
    struct label_scan *ls = ud;
    if (ev->type == LUNA_JSON_KEY && ev->depth == 1) {
        ls->in_md = ev->len == 8 && memcmp(ev->str, "metadata", 8) == 0;
        ls->in_labels = false;
    } else if (ev->type == LUNA_JSON_KEY && ev->depth == 2) {
        ls->in_labels = ls->in_md && ev->len == 6 && memcmp(ev->str, "labels", 6) == 0;
    } else if (ls->in_labels && ev->depth == 3 && ev->type == LUNA_JSON_KEY) {
        if (ls->n == sizeof ls->p / sizeof ls->p[0]) {
            ls->overflow = true;
            return 0;
        }
        ls->p[ls->n++] = (struct pair){ .k = copy(ev->str, ev->len), .kn = ev->len };
    } else if (ls->in_labels && ev->depth == 3 && ev->type == LUNA_JSON_STRING && ls->n &&
               !ls->overflow) {
        ls->p[ls->n - 1].v = copy(ev->str, ev->len);
        ls->p[ls->n - 1].vn = ev->len;
    }
    return 0;
}

/* The object's labels (what selectors and cache lists by label read) are
 * the labels the script reads: each key's last value, when a string. */
static void check_labels(const struct luna_object *obj, const char *json, size_t len)
{
    struct label_scan ls = { 0 };
    luna_error err = { 0 };
    FUZZ_CHECK(luna_json_parse(json, len, NULL, scan_labels, &ls, &err) == 0, "%s", err.msg);
    size_t want = 0;
    for (size_t i = 0; i < ls.n; i++) {
        bool last = true;
        for (size_t j = i + 1; j < ls.n && last; j++)
            last = !(ls.p[j].kn == ls.p[i].kn && memcmp(ls.p[j].k, ls.p[i].k, ls.p[i].kn) == 0);
        if (!last || !ls.p[i].v) {
            free(ls.p[i].v);
            ls.p[i].v = NULL; /* not a label the script reads */
        } else {
            want++;
        }
    }
    size_t cursor = 0, got = 0;
    const char *k, *v;
    while (!ls.overflow && luna_object_next_label(obj, &cursor, &k, &v) == 0) {
        got++;
        size_t kn = strlen(k), vn = strlen(v), i = 0;
        while (i < ls.n && !(ls.p[i].v && ls.p[i].kn == kn && memcmp(ls.p[i].k, k, kn) == 0))
            i++;
        FUZZ_CHECK(i < ls.n && ls.p[i].vn == vn && memcmp(ls.p[i].v, v, vn) == 0,
                   "the object has the label %s=%s, the script reads otherwise: %s", k, v, json);
    }
    FUZZ_CHECK(ls.overflow || got == want, "the object has %zu labels, the script reads %zu: %s",
               got, want, json);
    for (size_t i = 0; i < ls.n; i++) {
        free(ls.p[i].k);
        free(ls.p[i].v);
    }
}

static int on_item(void *ud, enum luna_stream_event ev, struct luna_object *obj)
{
    struct run *r = ud;
    r->calls++;
    const char *name = luna_object_name(obj);
    FUZZ_CHECK(name && *name, "item without a name");
    const char *json = luna_object_json(obj);
    size_t len = strlen(json);
    luna_error err = { 0 };
    FUZZ_CHECK(luna_json_parse(json, len, NULL, ignore, NULL, &err) == 0,
               "cached item is not JSON (%s): %s", err.msg, json);
    FUZZ_CHECK(json[0] == '{', "cached item is not an object: %s", json);
    if (metadata_only) {
        size_t others = 0;
        FUZZ_CHECK(strncmp(json, "{\"apiVersion\":\"v1\",\"kind\":\"Fuzz\"", 30) == 0 &&
                   luna_json_parse(json, len, NULL, other_keys, &others, &err) == 0 &&
                   others == 0, "metadata-only item holds more: %s", json);
    }
    check_labels(obj, json, len);
    r->hash = fuzz_hash(r->hash, &ev, sizeof ev);
    r->hash = fuzz_hash(r->hash, luna_object_key(obj), strlen(luna_object_key(obj)) + 1);
    r->hash = fuzz_hash(r->hash, luna_object_uid(obj), strlen(luna_object_uid(obj)) + 1);
    const char *rv = luna_object_resource_version(obj);
    r->hash = fuzz_hash(r->hash, rv, strlen(rv) + 1);
    r->hash = fuzz_hash(r->hash, json, len);
    size_t cursor = 0;
    const char *k, *v;
    while (luna_object_next_label(obj, &cursor, &k, &v) == 0) {
        r->hash = fuzz_hash(r->hash, k, strlen(k) + 1);
        r->hash = fuzz_hash(r->hash, v, strlen(v) + 1);
    }
    luna_object_unref(obj);
    return 0;
}

static int on_bookmark(void *ud, const char *rv, bool initial_events_end)
{
    struct run *r = ud;
    r->calls++;
    r->hash = fuzz_hash(r->hash, initial_events_end ? "E" : "B", 1);
    r->hash = fuzz_hash(r->hash, rv, strlen(rv) + 1);
    return 0;
}

static int on_error(void *ud, int code, const char *reason, const char *message)
{
    struct run *r = ud;
    r->calls++;
    r->hash = fuzz_hash(r->hash, &code, sizeof code);
    r->hash = fuzz_hash(r->hash, reason ? reason : "", reason ? strlen(reason) + 1 : 0);
    r->hash = fuzz_hash(r->hash, message ? message : "", message ? strlen(message) + 1 : 0);
    return 0;
}

static int feed(struct luna_object_stream *s, const uint8_t *body, size_t len,
                const uint16_t *cuts, size_t ncuts)
{
    luna_error err = { 0 };
    size_t at = 0;
    int rc = 0;
    for (size_t i = 0; i < ncuts && rc == 0; i++) {
        size_t cut = cuts[i] % (len + 1);
        if (cut < at)
            continue;
        rc = luna_object_stream_feed(s, body + at, cut - at, &err);
        at = cut;
    }
    if (rc == 0)
        rc = luna_object_stream_feed(s, body + at, len - at, &err);
    if (rc == 0)
        rc = luna_object_stream_finish(s, &err);
    if (rc < 0)
        FUZZ_CHECK(err.msg[0] != '\0', "error %d without a message", rc);
    if (getenv("FUZZ_DEBUG") && rc < 0) /* triage: which error each feeding met */
        fprintf(stderr, "feed: %d %s\n", rc, err.msg);
    return rc;
}

static uint64_t list_meta(const struct luna_object_stream *s)
{
    uint64_t h = FUZZ_HASH_INIT;
    const char *rv = luna_object_stream_list_rv(s), *cont = luna_object_stream_continue(s);
    long long rem = luna_object_stream_remaining(s);
    size_t items = luna_object_stream_items(s);
    h = fuzz_hash(h, rv, strlen(rv) + 1);
    h = fuzz_hash(h, cont, strlen(cont) + 1);
    h = fuzz_hash(h, &rem, sizeof rem);
    return fuzz_hash(h, &items, sizeof items);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = { data, size };
    uint8_t flags = fuzz_byte(&in);
    size_t ncuts = fuzz_byte(&in) % 16;
    uint16_t cuts[16];
    for (size_t i = 0; i < ncuts; i++)
        cuts[i] = fuzz_u16(&in);
    for (size_t i = 1; i < ncuts; i++)
        for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
            uint16_t t = cuts[j];
            cuts[j] = cuts[j - 1];
            cuts[j - 1] = t;
        }
    struct luna_object_stream_options o = {
        .mode = (flags & 1) ? LUNA_STREAM_WATCH : LUNA_STREAM_LIST,
        .keep_managed_fields = flags & 2,
        .max_item_bytes = (flags & 4) ? 256 : 0,
        .metadata_only = flags & 16,
        .api_version = "v1",
        .kind = "Fuzz",
    };
    metadata_only = flags & 16;
    struct run whole = { .hash = FUZZ_HASH_INIT }, split = { .hash = FUZZ_HASH_INIT };
    luna_error err = { 0 };
    struct luna_object_stream_handler hw = { .on_item = on_item, .on_bookmark = on_bookmark,
                                             .on_error = on_error, .ud = &whole };
    struct luna_object_stream_handler hs = { .on_item = on_item, .on_bookmark = on_bookmark,
                                             .on_error = on_error, .ud = &split };
    struct luna_object_stream *sw = luna_object_stream_new(&o, &hw, &err);
    struct luna_object_stream *ss = luna_object_stream_new(&o, &hs, &err);
    if (!sw || !ss)
        abort();

    int rc_whole = feed(sw, in.p, in.n, NULL, 0);
    int rc_split = feed(ss, in.p, in.n, cuts, ncuts);
    if (flags & 8) {
        /* A reset stream must behave as a new one. */
        FUZZ_CHECK(luna_object_stream_reset(ss) == 0, "reset failed");
        split = (struct run){ .hash = FUZZ_HASH_INIT };
        rc_split = feed(ss, in.p, in.n, cuts, ncuts);
    }
    FUZZ_CHECK(rc_whole == rc_split, "whole %d, split %d", rc_whole, rc_split);
    if (rc_whole == 0) {
        FUZZ_CHECK(whole.calls == split.calls && whole.hash == split.hash,
                   "callbacks differ between whole (%zu) and split (%zu) input", whole.calls,
                   split.calls);
        FUZZ_CHECK(list_meta(sw) == list_meta(ss), "LIST metadata differs");
    }
    luna_object_stream_free(sw);
    luna_object_stream_free(ss);
    return 0;
}
