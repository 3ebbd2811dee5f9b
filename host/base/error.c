/* error.c — see error.h. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int luna_error_set(luna_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int luna_error_wrap(luna_error *err, const char *fmt, ...)
{
    if (!err)
        return LUNA_EINVAL;
    char joined[2 * sizeof err->msg + 2];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(joined, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof err->msg)
        n = sizeof err->msg - 1;
    size_t len = (size_t)n;
    joined[len++] = ':';
    joined[len++] = ' ';
    memcpy(joined + len, err->msg, sizeof err->msg);
    joined[sizeof joined - 1] = '\0';
    memcpy(err->msg, joined, sizeof err->msg - 1);
    err->msg[sizeof err->msg - 1] = '\0';
    return err->code;
}

const char *luna_errcode_name(int code)
{
    switch (code) {
    case LUNA_OK:        return "ok";
    case LUNA_EINVAL:    return "invalid";
    case LUNA_ENOMEM:    return "out_of_memory";
    case LUNA_EIO:       return "io";
    case LUNA_ETOOBIG:   return "too_big";
    case LUNA_ETIMEOUT:  return "timeout";
    case LUNA_ECANCELED: return "canceled";
    case LUNA_EPROTO:    return "protocol";
    case LUNA_ENOTFOUND: return "not_found";
    case LUNA_ELUA:      return "lua";
    case LUNA_EEXEC:     return "exec";
    case LUNA_ENOMATCH:  return "no_match";
    }
    return "unknown";
}
