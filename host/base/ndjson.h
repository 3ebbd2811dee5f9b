/*
 * ndjson.h — a newline framer for NDJSON streams (Kubernetes watch bodies).
 *
 * Feed it the chunks of a byte stream as they arrive; it calls back once per
 * complete line.  Lines may be split across any number of chunks (a chunk
 * boundary may fall anywhere, even inside a UTF-8 sequence: the framer only
 * looks for '\n').  A line ends at '\n'; one '\r' right before it is dropped;
 * empty lines are skipped.  Uses nothing but libc; runs on the loop thread.
 *
 * Limits: a line longer than max_line bytes (not counting "\r\n") is an
 * error (LUNA_ETOOBIG, "line exceeds N bytes"), reported as soon as the
 * buffered part of the line is known to exceed the cap, so memory stays
 * bounded by max_line + 1 bytes.  At end of stream, luna_ndjson_finish
 * reports a buffered partial line as LUNA_EPROTO ("stream ended inside a
 * line").
 *
 * Invariants:
 *   - f->len > 0 if and only if a partial line (no '\n' yet) is buffered.
 *   - f->failed != 0 if and only if a feed failed or a callback stopped it;
 *     every later feed/finish returns that code without calling back.
 *
 * Ownership: the struct is caller-owned (embed it or allocate it), set up
 * with luna_ndjson_init and released with luna_ndjson_destroy (frees the
 * line buffer).  Data passed to feed is borrowed for the call.  The `line`
 * given to the callback is borrowed until the callback returns and is NOT
 * NUL-terminated.  The callback must not feed, reset or destroy the framer
 * it is called from; to stop, it returns a negative LUNA_E* code (and may
 * fill err), which feed then returns.
 */
#ifndef LUNA_NDJSON_H
#define LUNA_NDJSON_H

#include <stddef.h>

#include "base/error.h"

/* Returns 0 to continue, or a negative LUNA_E* code to stop the stream. */
typedef int (*luna_ndjson_line_fn)(const char *line, size_t len, void *ud,
                                   luna_error *err);

typedef struct luna_ndjson {
    luna_ndjson_line_fn on_line;
    void *ud;
    size_t max_line;
    char *buf;      /* the partial line; malloc'd, grows up to max_line + 1 */
    size_t len;
    size_t cap;
    int failed;     /* 0, or the code every later call returns */
    size_t lines;   /* complete non-empty lines delivered so far */
} luna_ndjson;

/* max_line must be > 0.  Never fails (the buffer is allocated lazily). */
void luna_ndjson_init(luna_ndjson *f, size_t max_line, luna_ndjson_line_fn on_line,
                      void *ud);

/* Frames len bytes of data.  Returns 0, LUNA_ETOOBIG (line too long),
 * LUNA_ENOMEM, or the code a callback returned.  Lines completed before a
 * failure have been delivered. */
int luna_ndjson_feed(luna_ndjson *f, const char *data, size_t len, luna_error *err);

/* End of stream: 0 if nothing is buffered, LUNA_EPROTO if a partial line
 * is (it is discarded), or the earlier failure code. */
int luna_ndjson_finish(luna_ndjson *f, luna_error *err);

void luna_ndjson_destroy(luna_ndjson *f);

#endif
