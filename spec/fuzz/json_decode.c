/*
 * json_decode.c — libFuzzer target for the JSON decoder (base/json): the
 * incremental parser fed the document whole and split at fuzzer-chosen
 * points, the writer re-emitting its events, and the path lookup.
 *
 * Input: byte 0 options (bit 0 LUNA_JSON_MULTIPLE, bit 1 a small depth
 * bound, bit 2 a small size bound), byte 1 the number of split points
 * (mod 8), then two bytes per split point; the rest is the JSON text.
 *
 * Checked: the same return code and the same events whatever the split;
 * an accepted single document re-written from its events parses again to
 * the same text; a single document is accepted if and only if jansson (an
 * independent strict parser) accepts it, except where the two differ on
 * purpose (luna's depth bound of 1000, integers beyond 64 bits that luna
 * keeps as text, jansson stopping at a raw NUL byte); luna_json_lookup never reads past the buffer.
 */
#include "fuzz_input.h"

#include <jansson.h>

#include "base/json_writer.h"

struct run {
    uint64_t hash;
    size_t events;
    luna_json_writer w;
    bool write;
};

static int on_event(void *ud, const luna_json_event *ev, luna_error *err)
{
    struct run *r = ud;
    r->events++;
    uint64_t h = r->hash;
    h = fuzz_hash(h, &ev->type, sizeof ev->type);
    h = fuzz_hash(h, &ev->depth, sizeof ev->depth);
    h = fuzz_hash(h, &ev->offset, sizeof ev->offset);
    if (ev->type == LUNA_JSON_KEY || ev->type == LUNA_JSON_STRING || ev->type == LUNA_JSON_NUMBER) {
        FUZZ_CHECK(ev->str != NULL || ev->len == 0, "string event without text");
        h = fuzz_hash(h, ev->str, ev->len);
        if (ev->type != LUNA_JSON_NUMBER)
            FUZZ_CHECK(luna_json_utf8_valid_prefix(ev->str, ev->len) == ev->len,
                       "string event with invalid UTF-8");
    }
    if (ev->type == LUNA_JSON_NUMBER) {
        h = fuzz_hash(h, &ev->kind, sizeof ev->kind);
        if (ev->kind == LUNA_JSON_INT)
            h = fuzz_hash(h, &ev->i, sizeof ev->i);
        else if (ev->kind == LUNA_JSON_UINT)
            h = fuzz_hash(h, &ev->u, sizeof ev->u);
    }
    r->hash = h;
    if (r->write)
        luna_json_write_event(&r->w, ev);
    return 0;
}

static int parse_split(const uint8_t *doc, size_t len, const luna_json_options *o,
                       const uint16_t *cuts, size_t ncuts, struct run *r)
{
    luna_error err = { 0 };
    luna_json_parser *p = luna_json_parser_new(o, on_event, r);
    if (!p)
        abort();
    size_t at = 0;
    int rc = 0;
    for (size_t i = 0; i < ncuts && rc == 0; i++) {
        size_t cut = cuts[i] % (len + 1);
        if (cut < at)
            continue;
        rc = luna_json_parser_feed(p, doc + at, cut - at, &err);
        at = cut;
    }
    if (rc == 0)
        rc = luna_json_parser_feed(p, doc + at, len - at, &err);
    if (rc == 0)
        rc = luna_json_parser_finish(p, &err);
    if (rc < 0)
        FUZZ_CHECK(err.msg[0] != '\0', "error %d without a message", rc);
    luna_json_parser_free(p);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = { data, size };
    uint8_t flags = fuzz_byte(&in);
    size_t ncuts = fuzz_byte(&in) % 8;
    uint16_t cuts[8];
    for (size_t i = 0; i < ncuts; i++)
        cuts[i] = fuzz_u16(&in);
    /* Cuts in ascending order make every chunk non-empty more often. */
    for (size_t i = 1; i < ncuts; i++)
        for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
            uint16_t t = cuts[j];
            cuts[j] = cuts[j - 1];
            cuts[j - 1] = t;
        }
    luna_json_options o = {
        .flags = (flags & 1) ? LUNA_JSON_MULTIPLE : 0,
        .max_depth = (flags & 2) ? 4 : 0,
        .max_size = (flags & 4) ? 64 : 0,
    };

    struct run whole = { .hash = FUZZ_HASH_INIT, .write = !(flags & 1) };
    luna_json_writer_init(&whole.w);
    int rc_whole = parse_split(in.p, in.n, &o, NULL, 0, &whole);
    struct run split = { .hash = FUZZ_HASH_INIT };
    int rc_split = parse_split(in.p, in.n, &o, cuts, ncuts, &split);
    FUZZ_CHECK(rc_whole == rc_split, "whole %d, split %d", rc_whole, rc_split);
    if (rc_whole == 0)
        FUZZ_CHECK(whole.hash == split.hash && whole.events == split.events,
                   "events differ between whole (%zu) and split (%zu) input", whole.events,
                   split.events);

    /* jansson's reader stops at a raw NUL byte (luna refuses one). */
    if (!(flags & 7) && !memchr(in.p, '\0', in.n)) {
        json_error_t je;
        json_t *ref = json_loadb((const char *)in.p, in.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (ref)
            FUZZ_CHECK(rc_whole == 0 || rc_whole == LUNA_ETOOBIG,
                       "jansson accepts what luna refuses (%d)", rc_whole);
        else
            /* jansson's own limits: big numbers, and a \u0000 in an object key
             * (valid JSON; luna passes keys with their length, and compares
             * them by length and bytes, so "metadata\u0000x" is not
             * "metadata") */
            FUZZ_CHECK(rc_whole != 0 || strstr(je.text, "too big") || strstr(je.text, "overflow") ||
                           strstr(je.text, "underflow") ||
                           strstr(je.text, "NUL byte in object key"),
                       "luna accepts what jansson refuses: %s", je.text);
        json_decref(ref);
    }

    if (rc_whole == 0 && whole.write) {
        luna_error err = { 0 };
        FUZZ_CHECK(luna_json_writer_finish(&whole.w, &err) == 0, "rewrite failed: %s", err.msg);
        size_t len;
        const char *text = luna_json_writer_data(&whole.w, &len);
        char *copy = fuzz_cstr(text, len);
        struct run again = { .hash = FUZZ_HASH_INIT, .write = true };
        luna_json_writer_init(&again.w);
        luna_json_options plain = { 0 };
        int rc = parse_split((const uint8_t *)copy, len, &plain, NULL, 0, &again);
        FUZZ_CHECK(rc == 0, "re-written document does not parse: %s", copy);
        FUZZ_CHECK(luna_json_writer_finish(&again.w, &err) == 0, "second rewrite failed");
        size_t len2;
        const char *text2 = luna_json_writer_data(&again.w, &len2);
        FUZZ_CHECK(len2 == len && memcmp(text2, copy, len) == 0,
                   "rewrite not stable:\n%s\n%s", copy, text2);
        luna_json_writer_free(&again.w);
        free(copy);
    }
    luna_json_writer_free(&whole.w);

    static const char *const paths[] = { "", "metadata.name", "items.0.metadata.uid",
                                         "object.metadata.resourceVersion", "a.1.b" };
    char buf[64];
    luna_json_value v;
    luna_error err = { 0 };
    luna_json_lookup(in.p, in.n, paths[flags >> 5 & 3], &v, buf, sizeof buf, &err);
    if (flags & 0x80) {
        const char *segs[] = { "metadata", "labels", "a.b" };
        luna_json_lookupv(in.p, in.n, segs, 3, &v, buf, sizeof buf, &err);
    }
    return 0;
}
