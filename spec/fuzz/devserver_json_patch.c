/*
 * devserver_json_patch.c — libFuzzer target for the dev server's JSON
 * patch (RFC 6902, devserver/devserver_patch) driven as chains of
 * operations, copy and move above all, over one small document: the class
 * of a 2 KB patch of copies that grew the dev server past 15 GB.
 *
 * Input: byte 0 the number of operations (mod 48, plus 1); then three
 * control bytes per operation: its kind (mod 6: add, remove, replace,
 * move, copy, test), and the "path" and "from" pointers, each one of a
 * fixed set of pointers into the document (members, array indices, "-",
 * escaped names, the root, and pointers that miss); the rest of the input
 * is the JSON value the add/replace/test operations carry (the string "v"
 * when it does not parse).  Pointers are drawn from a set rather than
 * fuzzed as text so that long chains of operations that apply are
 * reached; devserver_patch's own target fuzzes the patch text.
 *
 * Checked: success leaves a document whose compact JSON is no longer than
 * the first document, plus every carried value once per operation, plus
 * the bytes all copies of one patch may add (3 MiB in the dev server as in
 * kube; 64 KiB here, so that inputs stay fast), so no chain of copies
 * grows it past the bound; failure is a Status 400, 413, 422 or
 * 500 with a message; every reference is dropped (LeakSanitizer).
 */
#include "fuzz_input.h"

#include <jansson.h>

#include "devserver/devserver_patch.h"

/* The copy bound for the fuzzer: the code's 3 MiB of dense JSON is a
 * million values, seconds per input under ASan; the bound is a parameter,
 * the counting the same. */
#define MAX_COPY_BYTES ((size_t)64 * 1024)

static const char *const pointers[] = {
    "", "/a", "/a/0", "/a/1", "/a/-", "/a/1/b", "/b", "/b/x", "/b/x/y", "/b/x/-",
    "/c~1d", "/e~0f", "/n", "/a/00", "/a/9", "/missing/x", "/b/new", "/a/1/new", "/s",
    "/b/x/y/z",
};
#define NPOINTERS (sizeof pointers / sizeof pointers[0])

static const char *const kinds[] = { "add", "remove", "replace", "move", "copy", "test" };

static const char DOC[] = "{\"a\":[1,{\"b\":\"v\"}],\"b\":{\"x\":{\"y\":[\"z\"]}},\"c/d\":\"s\","
                          "\"e~f\":{},\"n\":null,\"s\":\"0123456789abcdef0123456789abcdef\"}";

static size_t compact_size(const json_t *v)
{
    return json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = { data, size };
    size_t nops = fuzz_byte(&in) % 48 + 1;
    uint8_t ctl[48][3];
    for (size_t i = 0; i < nops; i++)
        for (int j = 0; j < 3; j++)
            ctl[i][j] = fuzz_byte(&in);
    json_t *value = json_loadb((const char *)in.p, in.n, JSON_DECODE_ANY, NULL);
    if (!value)
        value = json_string("v");
    json_t *ops = json_array();
    json_t *doc = json_loads(DOC, 0, NULL);
    if (!value || !ops || !doc)
        abort();
    for (size_t i = 0; i < nops; i++) {
        const char *kind = kinds[ctl[i][0] % 6];
        json_t *op = json_pack("{s:s,s:s}", "op", kind, "path", pointers[ctl[i][1] % NPOINTERS]);
        if (!op)
            abort();
        if (ctl[i][0] % 6 == 3 || ctl[i][0] % 6 == 4)
            json_object_set_new(op, "from", json_string(pointers[ctl[i][2] % NPOINTERS]));
        else if (ctl[i][0] % 6 != 1)
            json_object_set(op, "value", value);
        json_array_append_new(ops, op);
    }
    size_t bound = compact_size(doc) + nops * (compact_size(value) + 32) + MAX_COPY_BYTES;
    luna_ds_status st = { 0 };
    int rc = luna_ds_patch_json_bounded(&doc, ops, MAX_COPY_BYTES, &st);
    if (rc == 0) {
        FUZZ_CHECK(doc != NULL, "patched to nothing");
        size_t got = compact_size(doc);
        FUZZ_CHECK(got <= bound, "the patched document is %zu bytes, over the bound %zu", got,
                   bound);
    } else {
        FUZZ_CHECK(st.code == 400 || st.code == 413 || st.code == 422 || st.code == 500,
                   "status code %d", st.code);
        FUZZ_CHECK(st.message[0] != '\0', "status %d without a message", st.code);
    }
    luna_ds_status_clear(&st);
    json_decref(doc);
    json_decref(ops);
    json_decref(value);
    return 0;
}
