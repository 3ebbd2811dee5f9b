/*
 * json.h — the one JSON wrapper: an incremental (push) parser (and, in
 * json_writer.h, a writer).
 *
 * Every JSON byte luna reads or writes goes through this unit.  The parser
 * is a thin layer over yajl 2 (libyajl, chosen by measurement: see
 * bench/json.c and docs/json.md): chunks of any size are fed as they arrive
 * from the network, and a handler gets one event per token; no tree is ever
 * built here.  On top of yajl the wrapper adds what yajl leaves out or gets
 * wrong: strict UTF-8 (no overlong forms, no encoded surrogates, nothing
 * above U+10FFFF), rejection of lone or unpaired \uD800-\uDFFF escapes
 * (yajl would silently produce "?" or a wrong code point), exact number
 * classification (int64 / uint64 / beyond 64 bits / double, with the
 * number's exact text), a nesting-depth bound, a size bound, and the byte
 * offset of every event and every error.
 *
 * Runs on the loop thread (no global state except a lazily created "C"
 * locale for number conversion, which is never freed).
 *
 * Invariants:
 *   - a parser is failed if and only if a feed/finish returned a negative
 *     code; from then on every feed/finish returns that code again (with the
 *     same message) until luna_json_parser_reset();
 *   - the handler sees the events of a prefix of a well-formed document;
 *     when the input turns out malformed the error comes after the events of
 *     the longest valid prefix, never instead of them;
 *   - every KEY and STRING event carries valid UTF-8 (possibly with NUL
 *     bytes, from \u0000).
 *
 * Ownership: the parser borrows its input chunk for the duration of one
 * feed call only (it copies what it must keep); event strings are borrowed
 * until the handler returns.  Parsers are freed with luna_json_parser_free().
 */
#ifndef LUNA_JSON_H
#define LUNA_JSON_H

#include <locale.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* Default bound on nesting (objects plus arrays open at once). */
#define LUNA_JSON_DEFAULT_MAX_DEPTH 1000

enum luna_json_event_type {
    LUNA_JSON_NULL = 1,
    LUNA_JSON_FALSE,
    LUNA_JSON_TRUE,
    LUNA_JSON_NUMBER,
    LUNA_JSON_STRING,
    LUNA_JSON_KEY,
    LUNA_JSON_OBJECT_START,
    LUNA_JSON_OBJECT_END,
    LUNA_JSON_ARRAY_START,
    LUNA_JSON_ARRAY_END,
    /* Only with LUNA_JSON_SOFT_LIMITS: a value past a bound (a container
     * deeper than max_depth, a number out of double range).  str/len: the
     * reason.  The value's own events are not delivered. */
    LUNA_JSON_LIMIT,
};

/* What a NUMBER event's text is, exactly. */
enum luna_json_number_kind {
    LUNA_JSON_INT = 1, /* integer text in [-2^63, 2^63): .i exact, .d rounded */
    LUNA_JSON_UINT,    /* integer text in [2^63, 2^64): .u exact, .d rounded */
    LUNA_JSON_BIGINT,  /* integer text outside 64 bits: only .str is exact,
                          .d is the nearest double */
    LUNA_JSON_DOUBLE,  /* fraction or exponent, or "-0": .d (always finite) */
};

typedef struct luna_json_event {
    enum luna_json_event_type type;
    /* Containers open around this token: 0 for a top-level value; a
     * container's START and END carry the depth of the container itself
     * (the depth its KEY had), its members depth + 1. */
    int depth;
    /* KEY, STRING: the decoded UTF-8 text (escapes resolved), not
     * NUL-terminated.  NUMBER: the number's exact JSON text.  Borrowed
     * until the handler returns. */
    const char *str;
    size_t len;
    /* Absolute byte offset (from the first byte fed since the last reset)
     * just past this token. */
    uint64_t offset;
    /* NUMBER only. */
    enum luna_json_number_kind kind;
    int64_t i;
    uint64_t u;
    double d;
} luna_json_event;

/* Called for every event.  Returns 0 to go on, or a negative LUNA_E* code
 * to stop the parse: the feed in progress then returns that code, and the
 * message is what the handler wrote into err (it may leave it empty: a
 * generic message is used), prefixed with the byte offset. */
typedef int (*luna_json_handler)(void *ud, const luna_json_event *ev,
                                 luna_error *err);

enum luna_json_flags {
    /* Accept a stream of top-level values (watch streams: one JSON object
     * per event, separated by optional whitespace).  Without it, a second
     * value is an error ("trailing garbage"). */
    LUNA_JSON_MULTIPLE = 1 << 0,
    /* A value past max_depth or out of number range is a LUNA_JSON_LIMIT
     * event, not an error, so that a stream of many objects (a LIST page,
     * a watch) can refuse the one object and keep the others.  The bytes
     * are still checked to be JSON; nothing inside the too-deep container
     * is delivered. */
    LUNA_JSON_SOFT_LIMITS = 1 << 1,
};

typedef struct luna_json_options {
    int max_depth;     /* 0: LUNA_JSON_DEFAULT_MAX_DEPTH; deeper input fails
                          with LUNA_ETOOBIG */
    uint64_t max_size; /* 0: unlimited.  Bytes per document; with
                          LUNA_JSON_MULTIPLE per value (counted from the end
                          of the previous value).  Over it: LUNA_ETOOBIG. */
    unsigned flags;    /* enum luna_json_flags */
} luna_json_options;

/* --- incremental parser ------------------------------------------------ */

typedef struct luna_json_parser luna_json_parser;

/* opts may be NULL (defaults); it is copied.  fn and ud are borrowed for
 * the parser's life.  Returns NULL only when out of memory.  Free with
 * luna_json_parser_free(). */
luna_json_parser *luna_json_parser_new(const luna_json_options *opts,
                                       luna_json_handler fn, void *ud);
void luna_json_parser_free(luna_json_parser *p);

/* Forgets all input (and any error): the next feed starts a new document
 * at offset 0.  opts replaces the options when non-NULL (copied).  Returns
 * 0, or LUNA_ENOMEM (the parser is then failed). */
int luna_json_parser_reset(luna_json_parser *p, const luna_json_options *opts);

/* Parses len more bytes (any split, even inside a token).  Events of every
 * token completed by this chunk are delivered before it returns (a number
 * at the very end of the input waits for the next byte or for finish).
 * Returns 0, LUNA_EPROTO (malformed JSON, invalid UTF-8, bad escape,
 * number out of double range), LUNA_ETOOBIG (depth or size bound),
 * LUNA_ENOMEM, or the handler's code; err's message names the byte offset. */
int luna_json_parser_feed(luna_json_parser *p, const void *data, size_t len,
                          luna_error *err);

/* Declares the end of input.  Returns 0 if the input was one complete value
 * (with LUNA_JSON_MULTIPLE: zero or more complete values), else
 * LUNA_EPROTO ("unexpected end of input at byte N") or a sticky error. */
int luna_json_parser_finish(luna_json_parser *p, luna_error *err);

/* Bytes fed since the last reset. */
uint64_t luna_json_parser_offset(const luna_json_parser *p);

/* One-shot: new + feed + finish + free.  Same returns. */
int luna_json_parse(const void *data, size_t len, const luna_json_options *opts,
                    luna_json_handler fn, void *ud, luna_error *err);

/* --- cheap lookups ----------------------------------------------------- */

/* The value found by luna_json_lookup(). */
typedef struct luna_json_value {
    /* NULL, FALSE, TRUE, NUMBER, STRING, OBJECT_START or ARRAY_START. */
    enum luna_json_event_type type;
    /* NUMBER: as in luna_json_event (text in the caller's buffer). */
    enum luna_json_number_kind kind;
    int64_t i;
    uint64_t u;
    double d;
    /* STRING and NUMBER: the text's length (the text itself, NUL-terminated,
     * is in the caller's buffer).  OBJECT_START / ARRAY_START: the value's
     * raw bytes are json[start, end). */
    size_t len;
    uint64_t start, end;
} luna_json_value;

/* Finds the value at `path` in the document json[0..len): segments
 * separated by '.', each an object key or, inside an array, a decimal
 * index ("metadata.name", "items.0.metadata.uid", "" for the root).  A key
 * holding a '.' cannot be named this way: use luna_json_lookupv().  Stops
 * reading as soon as the value is complete, so it is cheap on a large
 * document when the path is near the front, and only the part read is
 * checked.  Strings and number texts are copied NUL-terminated into buf
 * (cap bytes); for a container only its byte range is reported.  Returns 0,
 * LUNA_ENOTFOUND, LUNA_ETOOBIG (the text does not fit in buf), or a parse
 * error. */
int luna_json_lookup(const void *json, size_t len, const char *path,
                     luna_json_value *out, char *buf, size_t cap,
                     luna_error *err);
/* The same with the path as nsegs separate segments (borrowed). */
int luna_json_lookupv(const void *json, size_t len, const char *const *segs,
                      size_t nsegs, luna_json_value *out, char *buf, size_t cap,
                      luna_error *err);

/* --- strings ----------------------------------------------------------- */

/* Returns the length of the longest valid UTF-8 (RFC 3629) prefix of s;
 * equal to len if and only if s is valid UTF-8. */
size_t luna_json_utf8_valid_prefix(const char *s, size_t len);

/* --- shared with json_writer.c ------------------------------------------ */

/* Number conversion must not depend on the process locale (a script could
 * change LC_NUMERIC): both directions run under this "C" locale (created
 * on first use, never freed; (locale_t)0 if it could not be). */
locale_t luna_json_c_locale(void);
/* strtod in the "C" locale. */
double luna_json_strtod_c(const char *s, char **end);

#endif
