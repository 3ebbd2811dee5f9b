/*
 * json_writer.h — JSON text written into a growable buffer: strings
 * escaped per RFC 8259, integers exactly, doubles so that they read back
 * to the same double, in the "C" locale whatever the process's.
 *
 * Uses: json.h (its event type, UTF-8 check and locale).  Runs on the loop
 * thread.
 *
 * Invariants: a writer holds well-formed JSON text if and only if
 * luna_json_writer_finish() returns 0; once a write fails, every later
 * write returns that code again without writing.
 *
 * Ownership: a writer's buffer belongs to the writer until
 * luna_json_writer_steal(); free with luna_json_writer_free().
 */
#ifndef LUNA_JSON_WRITER_H
#define LUNA_JSON_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"

/* --- writer ------------------------------------------------------------ */

/* The allocator a writer may use instead of realloc/free, with the
 * signature of Lua's lua_Alloc (so a Lua state's own allocator, which the
 * watchdog counts and caps, can be passed as is): nsize 0 frees ptr and
 * returns NULL; otherwise resizes ptr (NULL: a new block) from osize to
 * nsize bytes and returns it, or NULL (ptr untouched) when refused. */
typedef void *(*luna_json_alloc_fn)(void *ud, void *ptr, size_t osize, size_t nsize);

/* A writer appends to its own buffer.  Fields are private; the struct is
 * public so that a writer can live on the stack or inside its owner.
 * Initialise with luna_json_writer_init(), release with
 * luna_json_writer_free(). */
typedef struct luna_json_writer {
    luna_json_alloc_fn alloc; /* NULL: realloc/free */
    void *alloc_ud;
    char *buf;             /* owned; NUL-terminated when non-NULL */
    size_t len, cap;
    unsigned char *frames; /* owned: one byte per open container */
    size_t depth, frames_cap;
    bool need_comma;       /* a member was written at the current level */
    bool done;             /* a complete top-level value was written */
    int status;            /* 0 or the first error's code */
    luna_error err;        /* the first error */
} luna_json_writer;

void luna_json_writer_init(luna_json_writer *w);
/* Makes an empty writer allocate its buffers through fn(ud, ...) from now
 * on (kept across free and reset).  A growth fn refuses fails the write
 * with LUNA_ENOMEM "out of memory": how a caller bounds what one document
 * may cost, as it grows rather than after. */
void luna_json_writer_set_alloc(luna_json_writer *w, luna_json_alloc_fn fn, void *ud);
/* Frees the buffers (through the writer's allocator); w stays usable, empty,
 * with the same allocator. */
void luna_json_writer_free(luna_json_writer *w);
/* Empties the writer for a new document, keeping its capacity. */
void luna_json_writer_reset(luna_json_writer *w);

/* Each write returns 0 or a negative code; the first failure makes the
 * writer failed (later writes return it again, without writing).
 * LUNA_EINVAL: misuse (a key outside an object, a value where a key is
 * due, an END that does not match, a second top-level value), a string or
 * key that is not valid UTF-8, a non-finite double.  LUNA_ENOMEM. */
int luna_json_write_object_start(luna_json_writer *w);
int luna_json_write_object_end(luna_json_writer *w);
int luna_json_write_array_start(luna_json_writer *w);
int luna_json_write_array_end(luna_json_writer *w);
int luna_json_write_key(luna_json_writer *w, const char *s, size_t len);
int luna_json_write_string(luna_json_writer *w, const char *s, size_t len);
int luna_json_write_int(luna_json_writer *w, int64_t v);
int luna_json_write_uint(luna_json_writer *w, uint64_t v);
/* Integral values with |v| <= 2^53 are written as integers ("3", "-0");
 * others with the fewest %g digits that read back exactly (0.1, 1e+20). */
int luna_json_write_double(luna_json_writer *w, double v);
int luna_json_write_bool(luna_json_writer *w, bool v);
int luna_json_write_null(luna_json_writer *w);
/* Splices one complete JSON value (trusted: not re-validated), e.g. a
 * cached object or a number's exact text from a parser event. */
int luna_json_write_raw(luna_json_writer *w, const char *json, size_t len);
/* Writes the token of a parser event (numbers as their exact text), so a
 * handler can copy a document while leaving parts out. */
int luna_json_write_event(luna_json_writer *w, const luna_json_event *ev);

/* Returns 0 if the writer holds one complete value, else the first error
 * or LUNA_EINVAL ("incomplete document"), with the message in err. */
int luna_json_writer_finish(luna_json_writer *w, luna_error *err);
/* The text so far (borrowed until the next write, reset or free); never
 * NULL, NUL-terminated.  len may be NULL. */
const char *luna_json_writer_data(luna_json_writer *w, size_t *len);
/* Hands the buffer (NUL-terminated) to the caller, who frees it with
 * free(); the writer is left empty.  NULL only when out of memory.  Only
 * for writers without an allocator of their own. */
char *luna_json_writer_steal(luna_json_writer *w, size_t *len);

#endif
