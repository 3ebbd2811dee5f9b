/*
 * selector.c — libFuzzer target for label and field selectors
 * (base/selector): parse, canonical print, match.
 *
 * Input: byte 0 options (bit 0 field selector, bit 1 field selector with
 * the dev server's allowed paths), then the selector text, then after the
 * first newline the object to match as lines `key=value` (a line without
 * '=' is a key whose value is "").
 *
 * Checked: a parsed selector prints to a canonical form that parses again
 * to the same form and matches the same object the same way; an error
 * has a message; luna_selector_format's length is exact.
 */
#include "fuzz_input.h"

#include "base/selector.h"

#define MAX_PAIRS 32

struct object {
    size_t n;
    char *key[MAX_PAIRS], *value[MAX_PAIRS];
};

static const char *lookup(const char *key, void *ud)
{
    const struct object *o = ud;
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->key[i], key) == 0)
            return o->value[i];
    return NULL;
}

static char *format(const struct luna_selector *sel)
{
    size_t need = luna_selector_format(sel, NULL, 0);
    char *buf = malloc(need + 1);
    if (!buf)
        abort();
    size_t got = luna_selector_format(sel, buf, need + 1);
    FUZZ_CHECK(got == need && strlen(buf) == need, "format length %zu, then %zu", need, got);
    /* A buffer one byte short must be truncated, not overrun. */
    if (need > 0) {
        char *small = malloc(need);
        if (!small)
            abort();
        luna_selector_format(sel, small, need);
        FUZZ_CHECK(strlen(small) == need - 1, "truncated format is %zu bytes", strlen(small));
        free(small);
    }
    return buf;
}

static int parse(const char *text, uint8_t flags, struct luna_selector **out, luna_error *err)
{
    static const char *const allowed[] = { "metadata.name", "metadata.namespace",
                                           "spec.nodeName", "status.phase", NULL };
    if (flags & 2)
        return luna_selector_parse_fields(text, allowed, out, err);
    return luna_selector_parse(text, (flags & 1) ? LUNA_SELECTOR_FIELDS : LUNA_SELECTOR_LABELS,
                               out, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = { data, size };
    uint8_t flags = fuzz_byte(&in);
    const uint8_t *text, *rest;
    size_t text_len, rest_len;
    fuzz_split(&in, "\n", &text, &text_len, &rest, &rest_len);
    char *stext = fuzz_cstr(text, text_len);
    char *objtext = fuzz_cstr(rest, rest_len);

    struct object obj = { 0 };
    char *save = NULL;
    for (char *line = strtok_r(objtext, "\n", &save); line && obj.n < MAX_PAIRS;
         line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        obj.key[obj.n] = line;
        obj.value[obj.n] = eq ? eq + 1 : line + strlen(line);
        if (eq)
            *eq = '\0';
        obj.n++;
    }

    struct luna_selector *sel = NULL;
    luna_error err = { 0 };
    int rc = parse(stext, flags, &sel, &err);
    if (rc < 0) {
        FUZZ_CHECK(sel == NULL, "a failed parse returned a selector");
        FUZZ_CHECK(err.msg[0] != '\0', "error %d without a message", rc);
    } else {
        bool m = luna_selector_matches(sel, lookup, &obj);
        bool empty = luna_selector_empty(sel);
        if (empty)
            FUZZ_CHECK(m, "the empty selector did not match");
        char *canon = format(sel);
        struct luna_selector *again = NULL;
        luna_error err2 = { 0 };
        FUZZ_CHECK(parse(canon, flags, &again, &err2) == 0,
                   "canonical form %s of %s does not parse: %s", canon, stext, err2.msg);
        char *canon2 = format(again);
        FUZZ_CHECK(strcmp(canon, canon2) == 0, "canonical form not stable: %s then %s", canon,
                   canon2);
        FUZZ_CHECK(luna_selector_matches(again, lookup, &obj) == m,
                   "%s and its canonical form %s match differently", stext, canon);
        FUZZ_CHECK(luna_selector_empty(again) == empty, "emptiness differs");
        free(canon);
        free(canon2);
        luna_selector_free(again);
    }
    luna_selector_free(sel);
    free(stext);
    free(objtext);
    return 0;
}
