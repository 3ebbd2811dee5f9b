/* devserver_continue.c — see devserver_continue.h. */
#include "devserver/devserver_continue.h"

#include <ctype.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

char *luna_ds_continue_encode(uint64_t rv, const char *last_key)
{
    /* kube's start key is the last key followed by a NUL byte */
    json_t *o = json_pack("{s:s,s:I,s:s%}", "v", "meta.k8s.io/v1", "rv", (json_int_t)rv,
                          "start", last_key, strlen(last_key) + 1);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(o);
    if (!s)
        return NULL;
    size_t len = strlen(s);
    unsigned char *b64 = malloc(4 * ((len + 2) / 3) + 1);
    if (!b64) {
        free(s);
        return NULL;
    }
    int m = EVP_EncodeBlock(b64, (unsigned char *)s, (int)len);
    free(s);
    /* base64 RawURLEncoding: -_ and no padding */
    for (int i = 0; i < m; i++) {
        if (b64[i] == '+')
            b64[i] = '-';
        else if (b64[i] == '/')
            b64[i] = '_';
    }
    while (m > 0 && b64[m - 1] == '=')
        b64[--m] = '\0';
    return (char *)b64;
}

int luna_ds_continue_decode(const char *tok, uint64_t *rv, char **start)
{
    size_t n = strlen(tok);
    char *b = malloc(n + 4);
    if (!b)
        return LUNA_ENOMEM;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        char c = tok[i];
        if (c == '-')
            c = '+';
        else if (c == '_')
            c = '/';
        else if (!isalnum((unsigned char)c) && c != '+' && c != '/' && c != '=') {
            free(b);
            return LUNA_EINVAL;
        }
        b[m++] = c;
    }
    while (m % 4)
        b[m++] = '=';
    b[m] = '\0';
    unsigned char *raw = malloc(m + 1);
    if (!raw) {
        free(b);
        return LUNA_ENOMEM;
    }
    int len = EVP_DecodeBlock(raw, (unsigned char *)b, (int)m);
    free(b);
    if (len < 0) {
        free(raw);
        return LUNA_EINVAL;
    }
    while (len > 0 && raw[len - 1] == '\0')
        len--; /* EVP_DecodeBlock pads with zero bytes */
    json_t *o = json_loadb((char *)raw, (size_t)len, JSON_ALLOW_NUL, NULL);
    free(raw);
    if (!o)
        return LUNA_EINVAL;
    json_t *jrv = json_object_get(o, "rv");
    json_t *js = json_object_get(o, "start");
    const char *v = json_string_value(json_object_get(o, "v"));
    if (!json_is_integer(jrv) || !json_is_string(js) || json_integer_value(jrv) <= 0 ||
        !v || strcmp(v, "meta.k8s.io/v1") != 0) {
        json_decref(o);
        return LUNA_EINVAL;
    }
    *rv = (uint64_t)json_integer_value(jrv);
    size_t sl = json_string_length(js);
    const char *sv = json_string_value(js);
    if (sl > 0 && sv[sl - 1] == '\0')
        sl--;
    *start = strndup(sv, sl);
    json_decref(o);
    return *start ? 0 : LUNA_ENOMEM;
}
