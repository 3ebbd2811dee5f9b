/* log.c — see log.h. */
#include "base/log.h"

#include "base/json.h"

#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define LOG_MAX_PAIRS 32

static enum luna_log_level log_level = LUNA_LOG_INFO;
static enum luna_log_format log_format = LUNA_LOG_TEXT;

static const char *const level_names[] = { "debug", "info", "warn", "error" };
static const char *const level_upper[] = { "DEBUG", "INFO", "WARN", "ERROR" };

void luna_log_set_level(enum luna_log_level level) { log_level = level; }
void luna_log_set_format(enum luna_log_format format) { log_format = format; }
bool luna_log_enabled(enum luna_log_level level) { return level >= log_level; }

int luna_log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    if (strcmp(name, "warning") == 0)
        return LUNA_LOG_WARN;
    return -1;
}

static void write_timestamp(FILE *out)
{
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    fprintf(out, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
            (int)(tv.tv_usec / 1000));
}

/* The length of the valid UTF-8 sequence at p (2 to 4 bytes), or 0; reads
 * no byte past a NUL. */
static size_t utf8_sequence(const unsigned char *p)
{
    size_t n = *p >= 0xC2 && *p <= 0xDF ? 2 : *p >= 0xE0 && *p <= 0xEF ? 3
             : *p >= 0xF0 && *p <= 0xF4 ? 4 : 0;
    for (size_t i = 1; i < n; i++)
        if (!p[i])
            return 0;
    return n && luna_json_utf8_valid_prefix((const char *)p, n) == n ? n : 0;
}

/* A JSON string: control characters escaped, and a byte that is not part of
 * valid UTF-8 written as U+FFFD, so a value from a client (an HTTP path, a
 * key) cannot break a JSON log line or a terminal. */
static void write_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x80) {
            size_t n = utf8_sequence(p);
            if (n) {
                fwrite(p, 1, n, out);
                p += n - 1;
            } else {
                fputs("\\ufffd", out);
            }
            continue;
        }
        switch (*p) {
        case '"':  fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

/* Text values are quoted only when a reader could not split them otherwise,
 * or when they hold a control character or bytes that are not UTF-8 (quoted,
 * those are escaped: no terminal escape or broken UTF-8 reaches the log). */
static void write_text_value(FILE *out, const char *v)
{
    bool plain = *v;
    for (const unsigned char *p = (const unsigned char *)v; *p && plain; p++) {
        if (*p >= 0x80) {
            size_t n = utf8_sequence(p);
            plain = n > 0;
            p += n ? n - 1 : 0;
        } else {
            plain = *p > ' ' && *p < 0x7f && *p != '"' && *p != '=' && *p != '\\';
        }
    }
    if (plain)
        fputs(v, out);
    else
        write_json_string(out, v);
}

void luna_log_pairs(enum luna_log_level level, const char *msg,
                    const char *const *pairs, int npairs)
{
    if (!luna_log_enabled(level))
        return;
    FILE *out = stderr;
    flockfile(out);
    if (log_format == LUNA_LOG_JSON) {
        fputs("{\"ts\":\"", out);
        write_timestamp(out);
        fprintf(out, "\",\"level\":\"%s\",\"msg\":", level_names[level]);
        write_json_string(out, msg);
        for (int i = 0; i < npairs; i++) {
            if (!pairs[2 * i + 1])
                continue;
            fputc(',', out);
            write_json_string(out, pairs[2 * i]);
            fputc(':', out);
            write_json_string(out, pairs[2 * i + 1]);
        }
        fputs("}\n", out);
    } else {
        write_timestamp(out);
        fprintf(out, " %s %s", level_upper[level], msg);
        for (int i = 0; i < npairs; i++) {
            if (!pairs[2 * i + 1])
                continue;
            fprintf(out, " %s=", pairs[2 * i]);
            write_text_value(out, pairs[2 * i + 1]);
        }
        fputc('\n', out);
    }
    fflush(out);
    funlockfile(out);
}

void luna_log(enum luna_log_level level, const char *msg, ...)
{
    if (!luna_log_enabled(level))
        return;
    const char *pairs[2 * LOG_MAX_PAIRS];
    int n = 0;
    va_list ap;
    va_start(ap, msg);
    for (;;) {
        const char *key = va_arg(ap, const char *);
        if (!key || n == LOG_MAX_PAIRS)
            break;
        pairs[2 * n] = key;
        pairs[2 * n + 1] = va_arg(ap, const char *);
        n++;
    }
    va_end(ap);
    luna_log_pairs(level, msg, pairs, n);
}
