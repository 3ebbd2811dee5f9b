/* ndjson.c — see ndjson.h. */
#include "base/ndjson.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void luna_ndjson_init(luna_ndjson *f, size_t max_line, luna_ndjson_line_fn on_line,
                      void *ud)
{
    memset(f, 0, sizeof *f);
    if (max_line == 0)
        max_line = 1;
    if (max_line > SIZE_MAX / 4)
        max_line = SIZE_MAX / 4;
    f->max_line = max_line;
    f->on_line = on_line;
    f->ud = ud;
}

void luna_ndjson_destroy(luna_ndjson *f)
{
    free(f->buf);
    f->buf = NULL;
    f->len = f->cap = 0;
}

static int fail(luna_ndjson *f, int code)
{
    f->failed = code;
    f->len = 0;
    return code;
}

static int too_long(luna_ndjson *f, luna_error *err)
{
    luna_error_set(err, LUNA_ETOOBIG, "line exceeds %zu bytes", f->max_line);
    return fail(f, LUNA_ETOOBIG);
}

/* Length of a line's content: without one trailing '\r'. */
static size_t content_len(const char *s, size_t n)
{
    return (n > 0 && s[n - 1] == '\r') ? n - 1 : n;
}

static int deliver(luna_ndjson *f, const char *line, size_t n, luna_error *err)
{
    n = content_len(line, n);
    if (n == 0)
        return 0;
    if (n > f->max_line)
        return too_long(f, err);
    f->lines++;
    int rc = f->on_line(line, n, f->ud, err);
    return rc ? fail(f, rc) : 0;
}

/* Appends n bytes of a line still being assembled; the result must stay a
 * possible prefix of a line of at most max_line bytes (+ "\r"). */
static int append(luna_ndjson *f, const char *data, size_t n, luna_error *err)
{
    size_t total = f->len + n;
    if (total > f->max_line + 1)
        return too_long(f, err);
    if (total > f->cap) {
        size_t cap = f->cap ? f->cap : 256;
        while (cap < total)
            cap *= 2;
        if (cap > f->max_line + 1)
            cap = f->max_line + 1;
        char *buf = realloc(f->buf, cap);
        if (!buf) {
            luna_error_set(err, LUNA_ENOMEM, "out of memory buffering a %zu-byte line", total);
            return fail(f, LUNA_ENOMEM);
        }
        f->buf = buf;
        f->cap = cap;
    }
    memcpy(f->buf + f->len, data, n);
    f->len = total;
    if (content_len(f->buf, f->len) > f->max_line)
        return too_long(f, err);
    return 0;
}

static int already_failed(luna_ndjson *f, luna_error *err)
{
    return luna_error_set(err, f->failed, "stream already failed (%s)",
                          luna_errcode_name(f->failed));
}

int luna_ndjson_feed(luna_ndjson *f, const char *data, size_t len, luna_error *err)
{
    if (f->failed)
        return already_failed(f, err);
    const char *p = data;
    const char *end = data + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return append(f, p, (size_t)(end - p), err);
        int rc;
        if (f->len == 0) {
            /* Fast path: the whole line is in this chunk, no copy. */
            rc = deliver(f, p, (size_t)(nl - p), err);
        } else {
            rc = append(f, p, (size_t)(nl - p), err);
            if (rc == 0) {
                size_t n = f->len;
                f->len = 0;
                rc = deliver(f, f->buf, n, err);
            }
        }
        if (rc)
            return rc;
        p = nl + 1;
    }
    return 0;
}

int luna_ndjson_finish(luna_ndjson *f, luna_error *err)
{
    if (f->failed)
        return already_failed(f, err);
    if (content_len(f->buf, f->len) > 0) {
        size_t n = f->len;
        luna_error_set(err, LUNA_EPROTO, "stream ended inside a line (%zu bytes after the last newline)", n);
        return fail(f, LUNA_EPROTO);
    }
    f->len = 0;
    return 0;
}
