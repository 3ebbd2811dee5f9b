/* client/warning.c — see client/warning.h. */
#include "client/warning.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Valid UTF-8 without a control character (C0, DEL, C1: Go's
 * unicode.IsControl). */
static bool text_ok(const unsigned char *p, size_t len)
{
    const unsigned char *end = p + len;
    while (p < end) {
        unsigned c = *p;
        size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (n == 0 || (size_t)(end - p) < n || c < 0x20 || c == 0x7F)
            return false;
        unsigned cp = n == 1 ? c : c & (0x7Fu >> n);
        for (size_t i = 1; i < n; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (p[i] & 0x3F);
        }
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0x80 && cp <= 0x9F))
            return false;
        p += n;
    }
    return true;
}

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

size_t luna_warning_parse(const char *value, luna_warning_fn fn, void *ud)
{
    char *text = malloc(strlen(value) + 1); /* a text is never longer than the value */
    if (!text)
        return 0;
    size_t count = 0;
    const char *p = skip_space(value);
    while (*p) {
        /* code: three digits, 100-299 */
        if (!(p[0] >= '1' && p[0] <= '2' && p[1] >= '0' && p[1] <= '9' && p[2] >= '0' &&
              p[2] <= '9' && p[3] == ' '))
            break;
        int code = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
        p += 4;
        /* agent: up to the next space, not empty */
        const char *agent = p;
        while (*p && *p != ' ')
            p++;
        if (p == agent || *p != ' ')
            break;
        p++;
        /* text: a quoted-string */
        if (*p != '"')
            break;
        p++;
        size_t n = 0;
        bool escaping = false, closed = false;
        for (; *p; p++) {
            if (*p == '\\' && !escaping) {
                escaping = true;
                continue;
            }
            if (*p == '"' && !escaping) {
                closed = true;
                p++;
                break;
            }
            text[n++] = *p;
            escaping = false;
        }
        if (!closed || !text_ok((const unsigned char *)text, n))
            break;
        text[n] = '\0';
        p = skip_space(p);
        /* an optional quoted date */
        if (*p == '"') {
            const char *q = strchr(p + 1, '"');
            if (!q)
                break;
            p = skip_space(q + 1);
        }
        if (code == 299 && n > 0) {
            fn(ud, text, n);
            count++;
        }
        if (*p == ',')
            p = skip_space(p + 1);
        else if (*p)
            break;
    }
    free(text);
    return count;
}
