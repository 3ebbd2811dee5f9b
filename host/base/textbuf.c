/* textbuf.c — see textbuf.h. */
#include "base/textbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool luna_textbuf_reserve(struct luna_textbuf *b, size_t more)
{
    if (b->failed)
        return false;
    if (more < b->cap - b->len && b->data)
        return true;
    if (more > SIZE_MAX / 2 - b->len - 1) {
        b->failed = true;
        return false;
    }
    size_t need = b->len + more + 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data) {
        b->failed = true;
        return false;
    }
    b->data = data;
    b->cap = cap;
    b->data[b->len] = '\0';   /* the invariant holds from the first allocation */
    return true;
}

void luna_textbuf_append(struct luna_textbuf *b, const char *s, size_t n)
{
    if (!luna_textbuf_reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void luna_textbuf_puts(struct luna_textbuf *b, const char *s)
{
    luna_textbuf_append(b, s, strlen(s));
}

void luna_textbuf_putc(struct luna_textbuf *b, char c)
{
    if (!luna_textbuf_reserve(b, 1))
        return;
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void luna_textbuf_printf(struct luna_textbuf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        luna_textbuf_append(b, small, (size_t)n);
        return;
    }
    if (!luna_textbuf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void luna_textbuf_reset(struct luna_textbuf *b)
{
    b->len = 0;
    b->failed = false;
    if (b->data)
        b->data[0] = '\0';
}

char *luna_textbuf_steal(struct luna_textbuf *b, size_t *len)
{
    char *data = b->data;
    if (len)
        *len = b->len;
    *b = (struct luna_textbuf)LUNA_TEXTBUF_INIT;
    return data;
}

void luna_textbuf_free(struct luna_textbuf *b)
{
    free(b->data);
    *b = (struct luna_textbuf)LUNA_TEXTBUF_INIT;
}
