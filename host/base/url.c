/* url.c — see url.h. */
#include "base/url.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/textbuf.h"

/* Ends every part of a URL found in text. */
static bool ends_url(char c)
{
    unsigned char u = (unsigned char)c;
    return c == '\0' || u <= 0x20 || u == 0x7f || c == '"' || c == '\'' || c == '<' ||
           c == '>' || c == '\\' || c == '`';
}

static bool scheme_char(char c)
{
    return isalnum((unsigned char)c) || c == '+' || c == '-' || c == '.';
}

/* Whether the "://" at text + at follows a scheme. */
static bool after_scheme(const char *text, size_t at)
{
    size_t s = at;
    while (s > 0 && scheme_char(text[s - 1]))
        s--;
    while (s < at && !isalpha((unsigned char)text[s]))
        s++;   /* "2http://": the scheme starts at the first letter */
    return s < at;
}

/* Whether a query parameter's name (len bytes) says its value is secret. */
static bool secret_name(const char *name, size_t len)
{
    static const char *const words[] = { "token", "password", "passwd", "secret",
                                         "signature", "apikey", "api_key", "credential" };
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        size_t wl = strlen(words[w]);
        for (size_t i = 0; i + wl <= len; i++)
            if (strncasecmp(name + i, words[w], wl) == 0)
                return true;
    }
    return false;
}

/* Copies text into out (if not NULL) with credentials removed; returns
 * whether a userinfo was found. */
static bool scan(const char *text, struct luna_textbuf *out)
{
    bool userinfo = false;
    size_t i = 0;
    while (text[i]) {
        if (text[i] != ':' || text[i + 1] != '/' || text[i + 2] != '/' || !after_scheme(text, i)) {
            if (out)
                luna_textbuf_putc(out, text[i]);
            i++;
            continue;
        }
        if (out)
            luna_textbuf_append(out, "://", 3);
        i += 3;
        size_t end = i, at = 0;
        bool has_at = false;
        while (!ends_url(text[end]) && text[end] != '/' && text[end] != '?' && text[end] != '#') {
            if (text[end] == '@') {
                at = end;
                has_at = true;
            }
            end++;
        }
        if (has_at) {
            userinfo = true;
            i = at + 1;
        }
        size_t path = end;
        while (!ends_url(text[path]) && text[path] != '?' && text[path] != '#')
            path++;
        if (out)
            luna_textbuf_append(out, text + i, path - i);
        i = path;
        if (text[i] != '?')
            continue;
        if (out)
            luna_textbuf_putc(out, '?');
        i++;
        while (!ends_url(text[i]) && text[i] != '#') {
            size_t p = i, eq = 0;
            while (!ends_url(text[p]) && text[p] != '#' && text[p] != '&') {
                if (text[p] == '=' && !eq)
                    eq = p;
                p++;
            }
            if (out) {
                if (eq && secret_name(text + i, eq - i)) {
                    luna_textbuf_append(out, text + i, eq + 1 - i);
                    luna_textbuf_puts(out, "REDACTED");
                } else {
                    luna_textbuf_append(out, text + i, p - i);
                }
            }
            i = p;
            if (text[i] == '&') {
                if (out)
                    luna_textbuf_putc(out, '&');
                i++;
            }
        }
    }
    return userinfo;
}

char *luna_url_redact(const char *text)
{
    if (!text)
        return NULL;
    struct luna_textbuf b = LUNA_TEXTBUF_INIT;
    luna_textbuf_reserve(&b, strlen(text) + 1);
    scan(text, &b);
    if (b.failed || !b.data) {
        luna_textbuf_free(&b);
        return NULL;
    }
    return luna_textbuf_steal(&b, NULL);
}

char *luna_url_redact_buf(const char *text, char *buf, size_t size)
{
    char *clean = luna_url_redact(text ? text : "");
    /* Out of memory: say so rather than print the unredacted text. */
    size_t n = strlen(clean ? clean : "(URL not shown: out of memory)");
    if (n >= size)
        n = size - 1;
    memcpy(buf, clean ? clean : "(URL not shown: out of memory)", n);
    buf[n] = '\0';
    free(clean);
    return buf;
}

bool luna_url_has_userinfo(const char *text)
{
    return text && scan(text, NULL);
}

char *luna_url_host(const char *url, char *buf, size_t size)
{
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    size_t len = strcspn(h, "/?#");
    const char *at = memchr(h, '@', len);
    while (at) {   /* the last '@' of the authority ends the userinfo */
        len -= (size_t)(at + 1 - h);
        h = at + 1;
        at = memchr(h, '@', len);
    }
    if (len >= size)
        len = size - 1;
    memcpy(buf, h, len);
    buf[len] = '\0';
    return buf;
}
