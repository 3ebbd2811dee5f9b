/* devserver_continue.c — see devserver_continue.h. */
#include "devserver/devserver_continue.h"

#include <ctype.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

char *luna_ds_continue_encode(uint64_t rv, const char *last_key)
{
    json_t *o = json_object();
    json_object_set_new(o, "v", json_string("meta.k8s.io/v1"));
    json_object_set_new(o, "rv", json_integer((json_int_t)rv));
    size_t n = strlen(last_key);
    char *start = malloc(n + 2);
    memcpy(start, last_key, n);
    start[n] = '\0';
    /* kube's start key is the last key followed by a NUL byte */
    json_object_set_new(o, "start", json_stringn(start, n + 1));
    free(start);
    char *s = json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(o);
    size_t len = strlen(s);
    unsigned char *b64 = malloc(4 * ((len + 2) / 3) + 1);
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

/* Returns 0 with rv and *start (malloc'd, without the trailing NUL). */
int luna_ds_continue_decode(const char *tok, uint64_t *rv, char **start)
{
    size_t n = strlen(tok);
    char *b = malloc(n + 4);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        char c = tok[i];
        if (c == '-')
            c = '+';
        else if (c == '_')
            c = '/';
        else if (!isalnum((unsigned char)c) && c != '+' && c != '/' && c != '=') {
            free(b);
            return -1;
        }
        b[m++] = c;
    }
    while (m % 4)
        b[m++] = '=';
    b[m] = '\0';
    unsigned char *raw = malloc(m + 1);
    int len = EVP_DecodeBlock(raw, (unsigned char *)b, (int)m);
    free(b);
    if (len < 0) {
        free(raw);
        return -1;
    }
    while (len > 0 && raw[len - 1] == '\0')
        len--; /* EVP_DecodeBlock pads with zero bytes */
    json_t *o = json_loadb((char *)raw, (size_t)len, JSON_ALLOW_NUL, NULL);
    free(raw);
    if (!o)
        return -1;
    json_t *jrv = json_object_get(o, "rv");
    json_t *js = json_object_get(o, "start");
    if (!json_is_integer(jrv) || !json_is_string(js) || json_integer_value(jrv) <= 0 ||
        strcmp(json_string_value(json_object_get(o, "v")) ? json_string_value(json_object_get(o, "v")) : "", "meta.k8s.io/v1") != 0) {
        json_decref(o);
        return -1;
    }
    *rv = (uint64_t)json_integer_value(jrv);
    size_t sl = json_string_length(js);
    const char *sv = json_string_value(js);
    if (sl > 0 && sv[sl - 1] == '\0')
        sl--;
    *start = strndup(sv, sl);
    json_decref(o);
    return 0;
}
