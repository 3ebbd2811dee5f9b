/* object_stream.c — see object_stream.h.
 *
 * One concept over ~900 lines: the one decoder of LIST and WATCH streams
 * (items, events, the watch list's bookmarks), each check beside the state
 * it guards; splitting it would split that state machine.
 */
#include "cache/object_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

#define DEFAULT_MAX_ITEM (64u << 20)

/* Which item field a string event fills. */
enum field { F_NONE = -1, F_NAME, F_NAMESPACE, F_UID, F_RV, F_REASON, F_MESSAGE, F_KIND,
             F_API_VERSION, F_INITIAL_END, F_NFIELDS };

/* A growable byte arena for one item's captured strings. */
struct arena {
    char *buf;
    size_t len, cap;
};

struct luna_object_stream {
    struct luna_object_stream_options opts;
    struct luna_object_stream_handler h;
    luna_json_parser *parser;
    luna_json_options json_opts;

    /* Input bytes: the chunk being fed starts at absolute offset
     * chunk_base; raw holds the bytes from raw_base up to chunk_base that
     * the item in progress (or an item starting soon) may need. */
    const char *chunk;
    uint64_t chunk_base, fed;
    struct arena raw;
    uint64_t raw_base;
    /* The item's JSON as stored: its raw bytes less managedFields (or, for
     * metadata only, md_head then its metadata's bytes less managedFields). */
    struct arena out;
    char *md_head;        /* metadata only: {"apiVersion":"..","kind":".." */
    /* LIST of whole objects: "apiVersion":".." and "kind":".." (one
     * allocation, fill_kind points into it), put into an item that lacks
     * them; NULL when the caller named no plain apiVersion and kind. */
    char *fill_api, *fill_kind;
    /* The kind and apiVersion every item must have if it names them ("":
     * not checked). */
    char want_kind[128], want_api[320];

    /* Outside items. */
    int top_key;          /* LIST: 1 metadata, 2 items, 3 kind; WATCH: 1 type, 2 object */
    int list_meta_key;    /* 1 resourceVersion, 2 continue, 3 remainingItemCount, 4 shardInfo */
    bool shard_selector_key;  /* the last key inside shardInfo was "selector" */
    char *shard_info;     /* metadata.shardInfo.selector, or NULL */
    bool in_items;
    bool saw_items;       /* LIST: the "items" key was there */
    char list_kind[64];   /* LIST: the top-level "kind", or "" */
    char list_rv[64];
    char *continue_token;
    long long remaining;
    char watch_type[16];
    bool have_item;       /* WATCH: an object was copied for this event */

    /* Inside an item. */
    bool in_item;
    int item_depth;
    int k1;               /* item-level key: 1 metadata, 2 code, 3 reason, 4 message,
                           * 5 kind, 6 apiVersion */
    bool has_api, has_kind;  /* the item has a top-level apiVersion, kind */
    unsigned seen_keys;   /* the picked-out keys met so far (KEY_* bits) */
    int k2;               /* metadata key: 1 labels, 2 annotations, or a field */
    enum field pending;   /* the field the next string fills */
    bool skip_next;       /* leave the next value out (managedFields) */
    int skip_depth;       /* >= 0 while leaving a container out */
    uint64_t item_start;  /* absolute offset of the item's '{' */
    uint64_t last_end;    /* offset just past the item's previous token */
    bool after_md_start;  /* the previous token opened metadata */
    uint64_t drop_from, drop_to;  /* managedFields and its separator */
    bool drop_first;      /* it was metadata's first key */
    uint64_t labels_abs;  /* offset + 1 of metadata.labels' '{' (absolute) */
    uint64_t md_from, md_to;  /* metadata's value [from, to) (absolute); equal: none */
    struct arena strings;
    size_t field_at[F_NFIELDS];  /* offset + 1 into strings; 0 = absent */
    size_t *label_at;            /* pairs of offsets into strings (value 0: null) */
    size_t nlabels, labels_cap;
    size_t pending_label_key;    /* offset + 1 of a label key awaiting its value */
    size_t labels_at;            /* offset + 1 of metadata.labels' '{' in out */
    long long status_code;
    char bad[96];         /* why the item is refused (past a bound), or "" */

    size_t items, filtered, bad_items;
    luna_error *feed_err;
};

static int arena_add(struct arena *a, const char *s, size_t len, size_t *at)
{
    if (a->len + len + 1 > a->cap) {
        size_t cap = a->cap ? a->cap : 256;
        while (cap < a->len + len + 1)
            cap *= 2;
        char *buf = realloc(a->buf, cap);
        if (!buf)
            return LUNA_ENOMEM;
        a->buf = buf;
        a->cap = cap;
    }
    memcpy(a->buf + a->len, s, len);
    a->buf[a->len + len] = '\0';
    *at = a->len + 1;
    a->len += len + 1;
    return 0;
}

/* Appends bytes (no separator); keeps a NUL after them. */
static int arena_put(struct arena *a, const char *p, size_t len, size_t *at)
{
    if (a->len + len + 1 > a->cap) {
        size_t cap = a->cap ? a->cap : 4096;
        while (cap < a->len + len + 1)
            cap *= 2;
        char *buf = realloc(a->buf, cap);
        if (!buf)
            return LUNA_ENOMEM;
        a->buf = buf;
        a->cap = cap;
    }
    memcpy(a->buf + a->len, p, len);
    *at = a->len;
    a->len += len;
    a->buf[a->len] = '\0';
    return 0;
}

static const char *field(const struct luna_object_stream *s, enum field f)
{
    return s->field_at[f] ? s->strings.buf + s->field_at[f] - 1 : NULL;
}

static void item_reset(struct luna_object_stream *s)
{
    s->in_item = false;
    s->k1 = s->k2 = 0;
    s->has_api = s->has_kind = false;
    s->seen_keys = 0;
    s->pending = F_NONE;
    s->skip_next = false;
    s->skip_depth = -1;
    s->strings.len = 0;
    memset(s->field_at, 0, sizeof s->field_at);
    s->nlabels = 0;
    s->pending_label_key = 0;
    s->labels_at = 0;
    s->labels_abs = 0;
    s->md_from = s->md_to = 0;
    s->status_code = 0;
    s->bad[0] = '\0';
    s->drop_from = s->drop_to = 0;
    s->drop_first = false;
    s->after_md_start = false;
}

static bool key_is(const luna_json_event *ev, const char *k)
{
    size_t n = strlen(k);
    return ev->len == n && memcmp(ev->str, k, n) == 0;
}

/* The keys the stream reads or cuts out of an item, each allowed once: with
 * two "metadata" members the item's identity would come from one and its
 * cached bytes from the other (and the cut of managedFields from one fell
 * inside the other: invalid JSON in the cache, found by fuzzing); with two
 * names, the cache key would say one and the object the other.  JSON leaves
 * duplicate keys undefined and kube-apiserver never sends them. */
enum {
    KEY_API = 1u << 0, KEY_KIND = 1u << 1, KEY_METADATA = 1u << 2,
    KEY_NAME = 1u << 3, KEY_NAMESPACE = 1u << 4, KEY_UID = 1u << 5, KEY_RV = 1u << 6,
    KEY_LABELS = 1u << 7, KEY_ANNOTATIONS = 1u << 8, KEY_MANAGED = 1u << 9,
};

static const char *const picked_keys[] = {
    "apiVersion", "kind", "metadata", "metadata.name", "metadata.namespace", "metadata.uid",
    "metadata.resourceVersion", "metadata.labels", "metadata.annotations",
    "metadata.managedFields",
};

/* Which KEY_* bit ev (a key at item level, or in metadata) is; 0: none. */
static unsigned picked_key(const luna_json_event *ev, bool in_metadata)
{
    if (!in_metadata)
        return key_is(ev, "apiVersion") ? KEY_API : key_is(ev, "kind") ? KEY_KIND
             : key_is(ev, "metadata") ? KEY_METADATA : 0;
    return key_is(ev, "name") ? KEY_NAME : key_is(ev, "namespace") ? KEY_NAMESPACE
         : key_is(ev, "uid") ? KEY_UID : key_is(ev, "resourceVersion") ? KEY_RV
         : key_is(ev, "labels") ? KEY_LABELS : key_is(ev, "annotations") ? KEY_ANNOTATIONS
         : key_is(ev, "managedFields") ? KEY_MANAGED : 0;
}

static int refuse_duplicate(struct luna_object_stream *s, const luna_json_event *ev,
                            bool in_metadata, luna_error *err)
{
    unsigned bit = picked_key(ev, in_metadata);
    if (!bit)
        return 0;
    if (!(s->seen_keys & bit)) {
        s->seen_keys |= bit;
        return 0;
    }
    size_t i = 0;
    while ((1u << i) != bit)
        i++;
    return luna_error_set(err, LUNA_EPROTO, "item %zu has %s twice", s->items, picked_keys[i]);
}

/* Labels (metadata.labels: an object of strings, or null) are read into
 * the object as they come; a value of another type was left out of them
 * while the script, decoding the object, read it ({"app":"web","app":5}
 * kept app=web for selectors and gave the script app = 5).  Go's decoder,
 * kube-apiserver and the dev server refuse such labels, so the check in
 * item_event refuses the item.  A null value (the dev server stores one)
 * is no label, and hides a value the key had before it.
 *
 * A label key or value with a NUL byte (\u0000): the object keeps its
 * labels as C strings, which would end at the NUL, so selectors and the
 * reflector's check of its label selector would match labels ("web" for
 * "web\0x") the script, decoding the object's JSON, never sees.  Kubernetes
 * allows no NUL in a label. */
static int label_nul(const struct luna_object_stream *s, luna_error *err)
{
    return luna_error_set(err, LUNA_EPROTO, "item %zu has a label with a NUL byte", s->items);
}

/* An item of another kind or apiVersion than the stream's (a Secret in a
 * watch of ConfigMaps, a ConfigMap of apps/v1): cached, a controller would
 * read it as the kind it watches.  An item that names neither (a LIST's
 * items of built-in types) is the stream's kind.  A metadata-only stream
 * also takes meta.k8s.io/v1 PartialObjectMetadata. */
static int check_kind(const struct luna_object_stream *s, luna_error *err)
{
    const char *kind = field(s, F_KIND), *api = field(s, F_API_VERSION);
    bool partial = s->md_head && kind && strcmp(kind, "PartialObjectMetadata") == 0 &&
                   (!api || strcmp(api, "meta.k8s.io/v1") == 0);
    if (partial || ((!kind || !s->want_kind[0] || strcmp(kind, s->want_kind) == 0) &&
                    (!api || !s->want_api[0] || strcmp(api, s->want_api) == 0)))
        return 0;
    return luna_error_set(err, LUNA_EPROTO,
                          "the server sent %.200s/%.200s of kind %.100s apiVersion %.100s in a "
                          "stream of %s %s",
                          field(s, F_NAMESPACE) ? field(s, F_NAMESPACE) : "",
                          field(s, F_NAME) ? field(s, F_NAME) : "", kind ? kind : s->want_kind,
                          api ? api : s->want_api, s->want_kind, s->want_api);
}

/* Builds the cached object from the item just copied and hands it over. */
static int deliver(struct luna_object_stream *s, enum luna_stream_event type, luna_error *err)
{
    if (s->bad[0]) {
        /* One object past the bounds must not stop the stream: the
         * rest of the page, the next events are applied. */
        s->bad_items++;
        int brc = s->h.on_bad ? s->h.on_bad(s->h.ud, type, field(s, F_NAMESPACE),
                                            field(s, F_NAME), s->bad) : 0;
        return brc < 0 ? luna_error_set(err, brc, "bad item handler stopped the stream") : 0;
    }
    int krc = check_kind(s, err);
    if (krc < 0)
        return krc;
    if (s->h.on_filter && !s->h.on_filter(s->h.ud, type, field(s, F_NAMESPACE), field(s, F_UID),
                                          field(s, F_RV))) {
        s->filtered++;
        return 0;
    }
    size_t len = s->out.len;
    const char *json = s->out.buf ? s->out.buf : "";
    const char **pairs = NULL;
    if (s->nlabels) {
        pairs = malloc(s->nlabels * 2 * sizeof *pairs);
        if (!pairs)
            return luna_error_set(err, LUNA_ENOMEM, "out of memory");
        for (size_t i = 0; i < 2 * s->nlabels; i++)
            pairs[i] = s->label_at[i] ? s->strings.buf + s->label_at[i] - 1 : NULL;
    }
    struct luna_object_fields f = {
        .namespace_ = field(s, F_NAMESPACE),
        .name = field(s, F_NAME),
        .uid = field(s, F_UID),
        .resource_version = field(s, F_RV),
        .labels = pairs,
        .nlabels = s->nlabels,
        .json = json,
        .json_len = len,
        .labels_json_at = s->labels_at,
    };
    struct luna_object *obj;
    int rc = luna_object_new(&f, &obj, err);
    free(pairs);
    if (rc < 0)
        return rc;
    s->items++;
    rc = s->h.on_item(s->h.ud, type, obj);
    if (rc < 0)
        return luna_error_set(err, rc, "item handler stopped the stream");
    return 0;
}

static int finish_watch_event(struct luna_object_stream *s, luna_error *err)
{
    const char *t = s->watch_type;
    int rc = 0;
    if (!s->have_item) {
        rc = luna_error_set(err, LUNA_EPROTO, "watch event \"%s\" has no object", t);
    } else if (strcmp(t, "ADDED") == 0) {
        rc = deliver(s, LUNA_STREAM_ADDED, err);
    } else if (strcmp(t, "MODIFIED") == 0) {
        rc = deliver(s, LUNA_STREAM_MODIFIED, err);
    } else if (strcmp(t, "DELETED") == 0) {
        rc = deliver(s, LUNA_STREAM_DELETED, err);
    } else if (strcmp(t, "BOOKMARK") == 0) {
        const char *rv = field(s, F_RV);
        if (!rv || !*rv)
            rc = luna_error_set(err, LUNA_EPROTO, "BOOKMARK event without a resourceVersion");
        else if (s->h.on_bookmark) {
            const char *end = field(s, F_INITIAL_END);
            rc = s->h.on_bookmark(s->h.ud, rv, end && strcmp(end, "true") == 0);
        }
    } else if (strcmp(t, "ERROR") == 0) {
        if (s->h.on_error)
            rc = s->h.on_error(s->h.ud, (int)s->status_code,
                               field(s, F_REASON) ? field(s, F_REASON) : "",
                               field(s, F_MESSAGE) ? field(s, F_MESSAGE) : "");
    } else {
        rc = luna_error_set(err, LUNA_EPROTO, "unknown watch event type \"%s\"", t);
    }
    s->have_item = false;
    s->watch_type[0] = '\0';
    item_reset(s);
    return rc;
}

static int add_label(struct luna_object_stream *s, size_t key_at, size_t value_at)
{
    if (s->nlabels == s->labels_cap) {
        size_t cap = s->labels_cap ? s->labels_cap * 2 : 8;
        size_t *v = realloc(s->label_at, cap * 2 * sizeof *v);
        if (!v)
            return LUNA_ENOMEM;
        s->label_at = v;
        s->labels_cap = cap;
    }
    s->label_at[2 * s->nlabels] = key_at;
    s->label_at[2 * s->nlabels + 1] = value_at;
    s->nlabels++;
    return 0;
}

/* Appends input bytes [from, to) (absolute offsets) to a. They are in raw
 * (before chunk_base) and in the chunk being fed. */
static int append_input(struct luna_object_stream *s, struct arena *a, uint64_t from, uint64_t to)
{
    if (from >= to)
        return 0;
    if (from < s->raw_base)
        return LUNA_EPROTO; /* not kept: cannot happen with a consistent parser */
    uint64_t raw_end = s->raw_base + s->raw.len;
    if (from < raw_end) {
        uint64_t upto = to < raw_end ? to : raw_end;
        size_t at;
        if (arena_put(a, s->raw.buf + (from - s->raw_base), (size_t)(upto - from), &at) < 0)
            return LUNA_ENOMEM;
        from = upto;
    }
    if (from < to) {
        if (!s->chunk || from < s->chunk_base)
            return LUNA_EPROTO;
        size_t at;
        if (arena_put(a, s->chunk + (from - s->chunk_base), (size_t)(to - from), &at) < 0)
            return LUNA_ENOMEM;
    }
    return 0;
}

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* Removes whitespace outside strings in place (input already validated);
 * returns the new length.  Compact input (what API servers send) is only
 * scanned: memchr from quote to quote. */
static size_t compact(char *p, size_t n)
{
    size_t i = 0, w = 0;
    bool moved = false;
    while (i < n) {
        /* Outside a string: copy up to the next quote, dropping blanks. */
        const char *q = memchr(p + i, '"', n - i);
        size_t stop = q ? (size_t)(q - p) : n;
        for (; i < stop; i++) {
            if (is_space(p[i])) {
                moved = true;
                continue;
            }
            if (moved)
                p[w] = p[i];
            w++;
        }
        if (!q)
            break;
        /* A string: up to its closing quote (one not escaped). */
        size_t j = i + 1;
        for (;;) {
            const char *e = memchr(p + j, '"', n - j);
            if (!e) {
                j = n;
                break;
            }
            size_t k = (size_t)(e - p), bs = 0;
            while (k - bs > i + 1 && p[k - 1 - bs] == '\\')
                bs++;
            j = k + 1;
            if (bs % 2 == 0)
                break;
        }
        if (moved)
            memmove(p + w, p + i, j - i);
        w += j - i;
        i = j;
    }
    return w;
}

/* kube-apiserver leaves apiVersion and kind out of the items of a LIST of
 * built-in kinds (kubernetes#3030), while its watch events and GETs have
 * them: cached as listed, an object would lack them until its first watch
 * event (client-go's unstructured list decoder fills them in too).  Puts
 * what the item lacks right after its '{'. */
static int fill_type(struct luna_object_stream *s, luna_error *err)
{
    char ins[512];
    int n = snprintf(ins, sizeof ins, "%s%s%s%s", s->has_api ? "" : s->fill_api,
                     s->has_api ? "" : ",", s->has_kind ? "" : s->fill_kind,
                     s->has_kind ? "" : ",");
    if (n <= 0 || (size_t)n >= sizeof ins || s->out.len < 2 || s->out.buf[0] != '{')
        return 0;
    if (s->out.buf[1] == '}')
        n--; /* an empty object: no comma after the last */
    size_t len = s->out.len, at;
    if (arena_put(&s->out, ins, (size_t)n, &at) < 0)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    memmove(s->out.buf + 1 + n, s->out.buf + 1, len - 1);
    memcpy(s->out.buf + 1, ins, (size_t)n);
    if (s->labels_at)
        s->labels_at += (size_t)n;
    return 0;
}

/* The item ended at `end`: its JSON for the cache is its input bytes less
 * managedFields (when dropped), without blanks between tokens.  Copying the
 * input bytes costs a memcpy where writing each token again cost a third of
 * the parse.  Metadata only: md_head, then ,"metadata": and the bytes of
 * its value less managedFields, then '}'; every other field the server sent
 * (a server that ignored the Accept's as=) is left out. */
static int take_item(struct luna_object_stream *s, uint64_t end, luna_error *err)
{
    s->out.len = 0;
    uint64_t from = s->item_start;
    size_t at0;
    int rc = 0;
    if (s->md_head) {
        bool md = s->md_to > s->md_from;
        rc = arena_put(&s->out, s->md_head, strlen(s->md_head), &at0);
        if (rc == 0 && md)
            rc = arena_put(&s->out, ",\"metadata\":", 12, &at0);
        from = md ? s->md_from : end;
        end = md ? s->md_to : end;
    }
    size_t base = s->out.len; /* where the input bytes start in out */
    uint64_t cut_from = end, cut_to = end;
    if (s->drop_to > s->drop_from) {
        cut_from = s->drop_from;
        cut_to = s->drop_to;
    }
    if (rc == 0)
        rc = append_input(s, &s->out, from, cut_from);
    size_t rest_at = s->out.len;
    if (rc == 0)
        rc = append_input(s, &s->out, cut_to, end);
    if (rc == 0 && s->md_head)
        rc = arena_put(&s->out, "}", 1, &at0);
    if (rc < 0)
        return luna_error_set(err, rc, rc == LUNA_ENOMEM ? "out of memory"
                                                         : "item bytes were not kept");
    if (cut_to > cut_from && s->drop_first) {
        /* managedFields was metadata's first key: drop the comma after it. */
        size_t k = rest_at;
        while (k < s->out.len && is_space(s->out.buf[k]))
            k++;
        if (k < s->out.len && s->out.buf[k] == ',') {
            memmove(s->out.buf + rest_at, s->out.buf + k + 1, s->out.len - k - 1);
            s->out.len -= k + 1 - rest_at;
        }
    }
    size_t before = s->out.len;
    s->out.len = compact(s->out.buf, s->out.len);
    s->out.buf[s->out.len] = '\0';
    s->labels_at = 0;
    if (s->labels_abs && s->labels_abs > from && s->out.len == before) {
        uint64_t at = s->labels_abs - 1; /* the '{' */
        if (cut_to > cut_from && at >= cut_to)
            at -= cut_to - cut_from;
        else if (cut_to > cut_from && at >= cut_from)
            at = UINT64_MAX;
        if (at != UINT64_MAX && s->drop_first && at > cut_from)
            at = UINT64_MAX; /* shifted by the comma too: copy the labels instead */
        if (at != UINT64_MAX && base + (at - from) < s->out.len)
            s->labels_at = base + (size_t)(at - from) + 1;
    }
    if (s->fill_api && s->opts.mode == LUNA_STREAM_LIST && (!s->has_api || !s->has_kind))
        return fill_type(s, err);
    return 0;
}

/* An event inside an item: copy it (unless left out) and pick out fields. */
static int item_event(struct luna_object_stream *s, const luna_json_event *ev, luna_error *err)
{
    int r = ev->depth - s->item_depth;
    bool start = ev->type == LUNA_JSON_OBJECT_START || ev->type == LUNA_JSON_ARRAY_START;
    bool end = ev->type == LUNA_JSON_OBJECT_END || ev->type == LUNA_JSON_ARRAY_END;

    if (ev->offset - s->item_start > s->opts.max_item_bytes)
        return luna_error_set(err, LUNA_ETOOBIG, "object exceeds %llu bytes",
                              (unsigned long long)s->opts.max_item_bytes);
    if (ev->type == LUNA_JSON_LIMIT) {
        if (!s->bad[0])
            snprintf(s->bad, sizeof s->bad, "%.*s", (int)ev->len, ev->str);
        /* The refused value (its events are not delivered) stands for
         * one value: what waited for it gets none.  The item is not
         * delivered, so its bytes need no cut. */
        s->skip_next = false;
        s->pending = F_NONE;
        s->pending_label_key = 0;
        return 0;
    }
    if (s->skip_depth >= 0) {
        if (end && ev->depth == s->skip_depth) {
            s->skip_depth = -1;
            s->drop_to = ev->offset;
            s->last_end = ev->offset;
        }
        return 0;
    }
    if (s->skip_next) {
        s->skip_next = false;
        if (start)
            s->skip_depth = ev->depth;
        else
            s->drop_to = s->last_end = ev->offset;
        return 0;
    }

    if (ev->type == LUNA_JSON_KEY && (r == 1 || (r == 2 && s->k1 == 1))) {
        int dup = refuse_duplicate(s, ev, r == 2, err);
        if (dup < 0)
            return dup;
    }
    if (s->k1 == 1 && s->k2 == 1 &&
        ((r == 2 && ev->type != LUNA_JSON_KEY && ev->type != LUNA_JSON_OBJECT_START &&
          ev->type != LUNA_JSON_OBJECT_END && ev->type != LUNA_JSON_NULL) ||
         (r == 3 && ev->type != LUNA_JSON_KEY && ev->type != LUNA_JSON_STRING &&
          ev->type != LUNA_JSON_NULL)))
        return luna_error_set(err, LUNA_EPROTO, "item %zu has a label that is not a string",
                              s->items);
    if (ev->type == LUNA_JSON_KEY) {
        if (r == 1) {
            if (key_is(ev, "apiVersion"))
                s->has_api = true;
            else if (key_is(ev, "kind"))
                s->has_kind = true;
            s->k1 = key_is(ev, "metadata") ? 1 : key_is(ev, "code") ? 2
                  : key_is(ev, "reason") ? 3 : key_is(ev, "message") ? 4
                  : key_is(ev, "kind") ? 5 : key_is(ev, "apiVersion") ? 6 : 0;
            s->pending = s->k1 == 3 ? F_REASON : s->k1 == 4 ? F_MESSAGE : s->k1 == 5 ? F_KIND
                       : s->k1 == 6 ? F_API_VERSION : F_NONE;
        } else if (r == 2 && s->k1 == 1) {
            s->pending = F_NONE;
            s->k2 = 0;
            if (key_is(ev, "managedFields") && !s->opts.keep_managed_fields) {
                /* Left out from the end of the previous token (so with the
                 * comma before the key) to the end of the value. */
                s->skip_next = true;
                s->drop_from = s->last_end;
                s->drop_first = s->after_md_start;
                return 0;
            }
            if (key_is(ev, "labels"))
                s->k2 = 1;
            else if (key_is(ev, "annotations"))
                s->k2 = 2;
            else if (key_is(ev, "name"))
                s->pending = F_NAME;
            else if (key_is(ev, "namespace"))
                s->pending = F_NAMESPACE;
            else if (key_is(ev, "uid"))
                s->pending = F_UID;
            else if (key_is(ev, "resourceVersion"))
                s->pending = F_RV;
        } else if (r == 3 && s->k1 == 1 && s->k2 == 1) {
            if (memchr(ev->str, '\0', ev->len))
                return label_nul(s, err);
            if (arena_add(&s->strings, ev->str, ev->len, &s->pending_label_key) < 0)
                return luna_error_set(err, LUNA_ENOMEM, "out of memory");
        } else if (r == 3 && s->k1 == 1 && s->k2 == 2 && s->opts.mode == LUNA_STREAM_WATCH) {
            /* Only the WatchList end marker is read from annotations. */
            s->pending = key_is(ev, "k8s.io/initial-events-end") ? F_INITIAL_END : F_NONE;
        }
    } else if (ev->type == LUNA_JSON_STRING) {
        if (s->pending != F_NONE && ((r == 1 && s->k1 >= 3) || (r == 2 && s->k1 == 1) ||
                                     (r == 3 && s->pending == F_INITIAL_END))) {
            if (arena_add(&s->strings, ev->str, ev->len, &s->field_at[s->pending]) < 0)
                return luna_error_set(err, LUNA_ENOMEM, "out of memory");
            if (memchr(ev->str, '\0', ev->len))
                return luna_error_set(err, LUNA_EPROTO, "object identity field contains NUL");
        } else if (r == 3 && s->k1 == 1 && s->k2 == 1 && s->pending_label_key) {
            if (memchr(ev->str, '\0', ev->len))
                return label_nul(s, err);
            size_t at;
            if (arena_add(&s->strings, ev->str, ev->len, &at) < 0 ||
                add_label(s, s->pending_label_key, at) < 0)
                return luna_error_set(err, LUNA_ENOMEM, "out of memory");
            s->pending_label_key = 0;
        }
        s->pending = r <= 2 || s->pending == F_INITIAL_END ? F_NONE : s->pending;
    } else if (ev->type == LUNA_JSON_NULL && r == 3 && s->k1 == 1 && s->k2 == 1 &&
               s->pending_label_key) {
        /* "k": null is no label, but it hides a value "k" had before
         * (the script reads null there): a pair with no value. */
        if (add_label(s, s->pending_label_key, 0) < 0)
            return luna_error_set(err, LUNA_ENOMEM, "out of memory");
        s->pending_label_key = 0;
    } else if (ev->type == LUNA_JSON_NUMBER && r == 1 && s->k1 == 2) {
        s->status_code = ev->kind == LUNA_JSON_INT ? ev->i : 0;
    }

    int rc;
    if (ev->type == LUNA_JSON_OBJECT_START && r == 2 && s->k1 == 1 && s->k2 == 1)
        s->labels_abs = ev->offset; /* just past the '{' */
    if (ev->type == LUNA_JSON_OBJECT_START && r == 1 && s->k1 == 1)
        s->md_from = s->md_to = ev->offset - 1; /* metadata's '{' */
    else if (ev->type == LUNA_JSON_OBJECT_END && r == 1 && s->k1 == 1)
        s->md_to = ev->offset;
    s->after_md_start = ev->type == LUNA_JSON_OBJECT_START && r == 1 && s->k1 == 1;
    s->last_end = ev->offset;
    if (end && ev->depth == s->item_depth) {
        s->in_item = false;
        if ((rc = take_item(s, ev->offset, err)) < 0)
            return rc;
        if (s->opts.mode == LUNA_STREAM_LIST) {
            if (!field(s, F_NAME) || !*field(s, F_NAME))
                return luna_error_set(err, LUNA_EPROTO, "list item %zu has no metadata.name",
                                      s->items);
            rc = deliver(s, LUNA_STREAM_LISTED, err);
            item_reset(s);
            return rc;
        }
        s->have_item = true;
    }
    return 0;
}

static int on_event(void *ud, const luna_json_event *ev, luna_error *err)
{
    struct luna_object_stream *s = ud;
    if (s->in_item)
        return item_event(s, ev, err);
    if (ev->type == LUNA_JSON_LIMIT)
        /* Outside an item there is nothing to leave out: the stream fails,
         * with the code the parser's hard limits give (an out-of-range
         * number is a protocol error, as malformed bytes are; a number
         * ends only at the byte after it, so which of the two a stream
         * meets first depends on where its chunks were cut). */
        return luna_error_set(err, strncmp(ev->str, "number", 6) == 0 ? LUNA_EPROTO : LUNA_ETOOBIG,
                              "%.*s outside an item", (int)ev->len, ev->str);

    bool list = s->opts.mode == LUNA_STREAM_LIST;
    if (ev->depth == 0) {
        if (ev->type == LUNA_JSON_OBJECT_START) {
            s->top_key = 0;
            return 0;
        }
        if (ev->type == LUNA_JSON_OBJECT_END)
            return list ? 0 : finish_watch_event(s, err);
        return luna_error_set(err, LUNA_EPROTO, "expected a JSON object at the top level");
    }
    if (ev->depth == 1 && ev->type == LUNA_JSON_KEY) {
        s->top_key = list ? (key_is(ev, "metadata") ? 1 : key_is(ev, "items") ? 2
                             : key_is(ev, "kind") ? 3 : 0)
                          : (key_is(ev, "type") ? 1 : key_is(ev, "object") ? 2 : 0);
        if (list && s->top_key == 2) {
            /* The first array's items went out as they came; Go would
             * keep only the second's (kube-apiserver never repeats it). */
            if (s->saw_items)
                return luna_error_set(err, LUNA_EPROTO, "the list has \"items\" twice");
            s->saw_items = true;
        }
        return 0;
    }
    if (list) {
        if (s->top_key == 3 && ev->depth == 1 && ev->type == LUNA_JSON_STRING) {
            snprintf(s->list_kind, sizeof s->list_kind, "%.*s", (int)ev->len, ev->str);
            return 0;
        }
        if (s->top_key == 2) {
            if (ev->depth == 1 && ev->type == LUNA_JSON_ARRAY_START) {
                s->in_items = true;
                return 0;
            }
            if (ev->depth == 1 && ev->type == LUNA_JSON_ARRAY_END) {
                s->in_items = false;
                return 0;
            }
            if (ev->depth == 1 && ev->type == LUNA_JSON_NULL)
                return 0; /* "items": null is an empty list */
            if (s->in_items && ev->depth == 2 && ev->type == LUNA_JSON_OBJECT_START) {
                item_reset(s);
                s->in_item = true;
                s->item_depth = 2;
                s->item_start = ev->offset - 1;
                return item_event(s, ev, err);
            }
            return luna_error_set(err, LUNA_EPROTO, "list \"items\" must be an array of objects");
        }
        if (s->top_key == 1 && s->list_meta_key == 4 && ev->depth == 3) {
            /* metadata.shardInfo: {"selector": "..."} */
            if (ev->type == LUNA_JSON_KEY) {
                s->shard_selector_key = key_is(ev, "selector");
            } else if (ev->type == LUNA_JSON_STRING && s->shard_selector_key) {
                free(s->shard_info);
                s->shard_info = strndup(ev->str, ev->len);
                if (!s->shard_info)
                    return luna_error_set(err, LUNA_ENOMEM, "out of memory");
            }
            return 0;
        }
        if (s->top_key == 1 && ev->depth == 2) {
            if (ev->type == LUNA_JSON_KEY)
                s->list_meta_key = key_is(ev, "resourceVersion") ? 1 : key_is(ev, "continue") ? 2
                                 : key_is(ev, "remainingItemCount") ? 3
                                 : key_is(ev, "shardInfo") ? 4 : 0;
            else if (ev->type == LUNA_JSON_STRING && s->list_meta_key == 1)
                snprintf(s->list_rv, sizeof s->list_rv, "%.*s", (int)ev->len, ev->str);
            else if (ev->type == LUNA_JSON_STRING && s->list_meta_key == 2) {
                free(s->continue_token);
                s->continue_token = strndup(ev->str, ev->len);
                if (!s->continue_token)
                    return luna_error_set(err, LUNA_ENOMEM, "out of memory");
            } else if (ev->type == LUNA_JSON_NUMBER && s->list_meta_key == 3)
                s->remaining = ev->kind == LUNA_JSON_INT ? ev->i : -1;
        }
        return 0;
    }
    /* WATCH */
    if (s->top_key == 1 && ev->depth == 1 && ev->type == LUNA_JSON_STRING) {
        snprintf(s->watch_type, sizeof s->watch_type, "%.*s", (int)ev->len, ev->str);
        return 0;
    }
    if (s->top_key == 2 && ev->depth == 1) {
        if (ev->type != LUNA_JSON_OBJECT_START)
            return luna_error_set(err, LUNA_EPROTO, "watch event \"object\" must be an object");
        item_reset(s);
        s->in_item = true;
        s->item_depth = 1;
        s->item_start = ev->offset - 1;
        return item_event(s, ev, err);
    }
    return 0;
}

/* Non-empty, and nothing JSON would have to escape. */
static bool plain_text(const char *t)
{
    if (!t || !*t)
        return false;
    for (; *t; t++)
        if ((unsigned char)*t < 0x20 || *t == '"' || *t == '\\')
            return false;
    return true;
}

struct luna_object_stream *luna_object_stream_new(const struct luna_object_stream_options *o,
                                                  const struct luna_object_stream_handler *h,
                                                  luna_error *err)
{
    struct luna_object_stream *s = calloc(1, sizeof *s);
    if (!s) {
        luna_error_set(err, LUNA_ENOMEM, "out of memory");
        return NULL;
    }
    s->opts = *o;
    s->opts.api_version = s->opts.kind = NULL; /* borrowed for the call only */
    if (o->kind && o->api_version && strlen(o->kind) < sizeof s->want_kind &&
        strlen(o->api_version) < sizeof s->want_api) {
        strcpy(s->want_kind, o->kind);
        strcpy(s->want_api, o->api_version);
    }
    if (o->metadata_only) {
        if (!plain_text(o->api_version) || !plain_text(o->kind)) {
            free(s);
            luna_error_set(err, LUNA_EINVAL, "metadata-only stream needs a plain apiVersion "
                                             "and kind");
            return NULL;
        }
        size_t n = strlen(o->api_version) + strlen(o->kind) + 32;
        s->md_head = malloc(n);
        if (!s->md_head) {
            free(s);
            luna_error_set(err, LUNA_ENOMEM, "out of memory");
            return NULL;
        }
        snprintf(s->md_head, n, "{\"apiVersion\":\"%s\",\"kind\":\"%s\"", o->api_version,
                 o->kind);
    } else if (o->mode == LUNA_STREAM_LIST && plain_text(o->api_version) && plain_text(o->kind) &&
               strlen(o->api_version) + strlen(o->kind) < 400) {
        size_t na = strlen(o->api_version) + 16, nk = strlen(o->kind) + 10;
        s->fill_api = malloc(na + nk);
        if (!s->fill_api) {
            free(s);
            luna_error_set(err, LUNA_ENOMEM, "out of memory");
            return NULL;
        }
        snprintf(s->fill_api, na, "\"apiVersion\":\"%s\"", o->api_version);
        s->fill_kind = s->fill_api + na;
        snprintf(s->fill_kind, nk, "\"kind\":\"%s\"", o->kind);
    }
    if (!s->opts.max_item_bytes)
        s->opts.max_item_bytes = DEFAULT_MAX_ITEM;
    s->json_opts.flags = (o->mode == LUNA_STREAM_WATCH ? LUNA_JSON_MULTIPLE : 0) |
                         LUNA_JSON_SOFT_LIMITS;
    /* Items are at depth 2 of a LIST ({"items":[...]}), 1 of a watch
     * event ({"object":...}). */
    s->json_opts.max_depth = LUNA_OBJECT_MAX_DEPTH + (o->mode == LUNA_STREAM_WATCH ? 1 : 2);
    if (o->mode == LUNA_STREAM_WATCH)
        s->json_opts.max_size = s->opts.max_item_bytes + 4096;
    s->h = *h;
    s->parser = luna_json_parser_new(&s->json_opts, on_event, s);
    if (!s->parser) {
        free(s->md_head);
        free(s->fill_api);
        free(s);
        luna_error_set(err, LUNA_ENOMEM, "out of memory");
        return NULL;
    }
    s->remaining = -1;
    item_reset(s);
    return s;
}

void luna_object_stream_free(struct luna_object_stream *s)
{
    if (!s)
        return;
    luna_json_parser_free(s->parser);
    free(s->raw.buf);
    free(s->out.buf);
    free(s->md_head);
    free(s->fill_api);
    free(s->strings.buf);
    free(s->label_at);
    free(s->continue_token);
    free(s->shard_info);
    free(s);
}

int luna_object_stream_reset(struct luna_object_stream *s)
{
    item_reset(s);
    s->top_key = s->list_meta_key = 0;
    s->in_items = false;
    s->saw_items = false;
    s->list_kind[0] = '\0';
    s->list_rv[0] = '\0';
    free(s->continue_token);
    s->continue_token = NULL;
    free(s->shard_info);
    s->shard_info = NULL;
    s->shard_selector_key = false;
    s->remaining = -1;
    s->watch_type[0] = '\0';
    s->have_item = false;
    s->items = s->filtered = s->bad_items = 0;
    s->fed = s->chunk_base = s->raw_base = 0;
    s->raw.len = 0;
    return luna_json_parser_reset(s->parser, &s->json_opts);
}

/* Bytes kept before an item starts: the parser may report an item's '{'
 * only in the feed after the one that carried it. */
#define RAW_TAIL 64

/* After a feed: keep the input from the start of the item in progress (or
 * the last RAW_TAIL bytes) so the item can be copied when it ends. */
static int keep_raw(struct luna_object_stream *s, const char *data, size_t len)
{
    /* raw holds [raw_base, chunk_base); the chunk holds [chunk_base, end). */
    uint64_t end = s->chunk_base + len;
    uint64_t keep = s->in_item ? s->item_start : (end > RAW_TAIL ? end - RAW_TAIL : 0);
    uint64_t cut_to = keep < s->chunk_base ? keep : s->chunk_base;
    if (cut_to > s->raw_base) {
        size_t cut = (size_t)(cut_to - s->raw_base);
        memmove(s->raw.buf, s->raw.buf + cut, s->raw.len - cut);
        s->raw.len -= cut;
        s->raw_base = cut_to;
    }
    uint64_t from = keep > s->chunk_base ? keep : s->chunk_base;
    if (s->raw.len == 0)
        s->raw_base = from;
    size_t at;
    if (from < end && arena_put(&s->raw, data + (from - s->chunk_base), (size_t)(end - from), &at) < 0)
        return LUNA_ENOMEM;
    return 0;
}

int luna_object_stream_feed(struct luna_object_stream *s, const void *data, size_t len,
                            luna_error *err)
{
    s->chunk = data;
    s->chunk_base = s->fed;
    int rc = luna_json_parser_feed(s->parser, data, len, err);
    if (rc == 0 && keep_raw(s, data, len) < 0)
        rc = luna_error_set(err, LUNA_ENOMEM, "out of memory");
    s->chunk = NULL;
    s->fed += len;
    return rc;
}

int luna_object_stream_finish(struct luna_object_stream *s, luna_error *err)
{
    int rc = luna_json_parser_finish(s->parser, err);
    if (rc < 0 || s->opts.mode != LUNA_STREAM_LIST)
        return rc;
    /* A document without items is not a list (a Status sent with 200, a
     * single object): read as an empty list it would empty the cache. */
    if (!s->saw_items)
        return luna_error_set(err, LUNA_EPROTO, "the answer is not a list: it has no \"items\"%s%s%s",
                              s->list_kind[0] ? " (kind " : "", s->list_kind, s->list_kind[0] ? ")" : "");
    return 0;
}

const char *luna_object_stream_list_kind(const struct luna_object_stream *s) { return s->list_kind; }

const char *luna_object_stream_list_rv(const struct luna_object_stream *s) { return s->list_rv; }

const char *luna_object_stream_continue(const struct luna_object_stream *s)
{
    return s->continue_token ? s->continue_token : "";
}

long long luna_object_stream_remaining(const struct luna_object_stream *s) { return s->remaining; }
size_t luna_object_stream_items(const struct luna_object_stream *s) { return s->items; }
size_t luna_object_stream_filtered(const struct luna_object_stream *s) { return s->filtered; }
size_t luna_object_stream_bad(const struct luna_object_stream *s) { return s->bad_items; }
const char *luna_object_stream_shard_info(const struct luna_object_stream *s)
{
    return s->shard_info;
}
