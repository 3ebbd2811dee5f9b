/*
 * textbuf.h — a growable text buffer for building response bodies (the
 * metrics exposition, health check output).
 *
 * Appends never fail loudly: on allocation failure the buffer records it
 * (`failed`) and ignores further appends, so a producer writes its whole
 * output and checks once at the end.  Runs on whichever thread owns the
 * buffer; nothing here is shared.
 *
 * Invariants: data is NULL if and only if cap is 0; otherwise data[len] is
 * a NUL byte (data is a C string, though it may also contain NULs).
 *
 * Ownership: the struct is caller storage (zero-initialise it, or
 * LUNA_TEXTBUF_INIT); the bytes are owned by it and released with
 * luna_textbuf_free().  luna_textbuf_steal() hands them to the caller
 * (free with free()), e.g. for MHD_RESPMEM_MUST_FREE.
 */
#ifndef LUNA_TEXTBUF_H
#define LUNA_TEXTBUF_H

#include <stdbool.h>
#include <stddef.h>

struct luna_textbuf {
    char *data;
    size_t len;
    size_t cap;
    bool failed; /* an allocation failed; the content is incomplete */
};

#define LUNA_TEXTBUF_INIT { NULL, 0, 0, false }

/* Makes room for `more` bytes after len; false (and `failed` set) on
 * allocation failure. */
bool luna_textbuf_reserve(struct luna_textbuf *b, size_t more);
void luna_textbuf_append(struct luna_textbuf *b, const char *s, size_t n);
void luna_textbuf_puts(struct luna_textbuf *b, const char *s);
void luna_textbuf_putc(struct luna_textbuf *b, char c);
void luna_textbuf_printf(struct luna_textbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Empties the buffer (keeps its memory) and clears `failed`. */
void luna_textbuf_reset(struct luna_textbuf *b);
/* Returns the bytes (a malloc'd C string, or NULL if nothing was ever
 * allocated) and leaves the buffer empty; *len receives the length. */
char *luna_textbuf_steal(struct luna_textbuf *b, size_t *len);
void luna_textbuf_free(struct luna_textbuf *b);

#endif
