/*
 * error.h — the one error value every luna module fills in.
 *
 * A function that can fail returns 0 on success or a negative LUNA_E* code,
 * and, when the caller passed a non-NULL `luna_error *`, writes a one-line
 * human message there: what failed and on what (file and field, URL, key).
 * The struct is caller-owned, fixed-size, and needs no freeing.  Messages
 * never contain credentials.
 */
#ifndef LUNA_ERROR_H
#define LUNA_ERROR_H

#include <stddef.h>

enum luna_errcode {
    LUNA_OK        = 0,
    LUNA_EINVAL    = -1,  /* bad argument or malformed input */
    LUNA_ENOMEM    = -2,
    LUNA_EIO       = -3,  /* file or socket I/O */
    LUNA_ETOOBIG   = -4,  /* a size cap was hit */
    LUNA_ETIMEOUT  = -5,
    LUNA_ECANCELED = -6,
    LUNA_EPROTO    = -7,  /* the peer broke the protocol (HTTP, JSON, YAML) */
    LUNA_ENOTFOUND = -8,
    LUNA_ELUA      = -9,  /* a Lua script failed to load or run */
    LUNA_EEXEC     = -10, /* a child process (credential plugin) failed */
    LUNA_ENOMATCH  = -11, /* the API server serves no such kind (client-go's
                           * NoKindMatchError): not a missing object */
};

typedef struct luna_error {
    int  code;
    char msg[512];
} luna_error;

/* Records code and message in err (if non-NULL) and returns code, so a
 * caller can write `return luna_error_set(err, LUNA_EINVAL, "...", ...);`. */
int luna_error_set(luna_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes the message already in err with more context ("file: ..."). */
int luna_error_wrap(luna_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

const char *luna_errcode_name(int code);

#endif
