/* liblog.c — see liblog.h. */
#include "base/liblog.h"

#include <errno.h>
#include <ev.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void log_line(const struct luna_liblog_source *src, const char *line, size_t len)
{
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
        len--;
    if (len == 0)
        return;
    char text[LUNA_LIBLOG_LINE_MAX + 1];
    if (len > LUNA_LIBLOG_LINE_MAX)
        len = LUNA_LIBLOG_LINE_MAX;
    memcpy(text, line, len);
    text[len] = '\0';
    luna_log(src->level, src->msg ? src->msg : "library message", "source", src->source,
             "server", src->server, "message", text, NULL);
}

/* One log line per line of text. */
static void log_text(const struct luna_liblog_source *src, const char *text, size_t len)
{
    while (len > 0) {
        const char *nl = memchr(text, '\n', len);
        size_t n = nl ? (size_t)(nl - text) : len;
        log_line(src, text, n);
        if (!nl)
            break;
        text += n + 1;
        len -= n + 1;
    }
}

void luna_liblog_vmessage(const struct luna_liblog_source *src, const char *fmt, va_list ap)
{
    if (!luna_log_enabled(src->level))
        return;
    /* The library may read errno after logging (a failed bind is logged,
     * then reported): logging must not change it. */
    int saved = errno;
    char buf[LUNA_LIBLOG_LINE_MAX + 1];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n >= 0)
        log_text(src, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    errno = saved;
}

void luna_liblog_mhd(void *cls, const char *fmt, va_list ap)
{
    luna_liblog_vmessage(cls, fmt, ap);
}

/* ---- streams ------------------------------------------------------------- */

static ssize_t stream_write(void *cookie, const char *buf, size_t size)
{
    struct luna_liblog_stream *s = cookie;
    for (size_t i = 0; i < size; i++) {
        if (buf[i] == '\n') {
            if (!s->cut)
                log_line(s->src, s->line, s->len);
            s->len = 0;
            s->cut = 0;
        } else if (s->len < sizeof s->line) {
            s->line[s->len++] = buf[i];
        } else if (!s->cut) {
            log_line(s->src, s->line, s->len);
            s->cut = 1;
        }
    }
    return (ssize_t)size;
}

static int stream_close(void *cookie)
{
    struct luna_liblog_stream *s = cookie;
    if (s->len > 0 && !s->cut)
        log_line(s->src, s->line, s->len);
    s->len = 0;
    s->cut = 0;
    return 0;
}

int luna_liblog_stream_open(struct luna_liblog_stream *s, const struct luna_liblog_source *src)
{
    s->src = src;
    s->len = 0;
    s->cut = 0;
    cookie_io_functions_t io = { .write = stream_write, .close = stream_close };
    s->file = fopencookie(s, "w", io);
    if (!s->file)
        return LUNA_ENOMEM;
    /* Line buffered: a library's line is logged when it ends, not later. */
    setvbuf(s->file, NULL, _IOLBF, 0);
    return 0;
}

void luna_liblog_stream_close(struct luna_liblog_stream *s)
{
    if (s->file)
        fclose(s->file);
    s->file = NULL;
}

/* ---- fatal hooks ------------------------------------------------------------ */

_Noreturn void luna_liblog_fatal(const char *library, const char *message)
{
    luna_log(LUNA_LOG_ERROR, "library failure", "source", library, "error", message, NULL);
    luna_log_flush(1.0); /* what is buffered, this line last, before the process goes */
    abort();
}

static void ev_syserr(const char *msg)
{
    /* libev passes what failed; errno says why. */
    char text[512];
    snprintf(text, sizeof text, "%s: %s", msg ? msg : "(libev)", strerror(errno));
    luna_liblog_fatal("libev", text);
}

static void *ev_alloc(void *ptr, long size)
{
    if (size <= 0) {
        free(ptr);
        return NULL;
    }
    void *p = realloc(ptr, (size_t)size);
    if (!p) {
        char text[96];
        snprintf(text, sizeof text, "cannot allocate %ld bytes", size);
        luna_liblog_fatal("libev", text);
    }
    return p;
}

static void mhd_panic(void *cls, const char *file, unsigned int line, const char *reason)
{
    char text[512];
    snprintf(text, sizeof text, "%s (%s:%u)", reason ? reason : "panic", file ? file : "?", line);
    luna_liblog_fatal("libmicrohttpd", text);
}

void luna_liblog_install(void)
{
    ev_set_syserr_cb(ev_syserr);
    ev_set_allocator(ev_alloc);
    MHD_set_panic_func(mhd_panic, NULL);
}
