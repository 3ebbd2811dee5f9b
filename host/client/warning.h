/*
 * client/warning.h — the Warning response header (RFC 7234 section 5.5)
 * as client-go reads it (apimachinery's ParseWarningHeaders): a value
 * holds one or more `code agent "text" ["date"]` separated by commas;
 * code is three digits from 100 to 299, agent a token ("-" from
 * kube-apiserver), text a quoted-string whose backslash escapes any byte
 * ("\"" is '"'), and it must be valid UTF-8 without control characters.
 * A malformed warning ends the reading of that value (the warnings before
 * it count), as in client-go.  Only code 299 with a non-empty text — what
 * Kubernetes sends, and all client-go's default handler reports — is
 * handed on.
 *
 * Uses nothing but libc.  Any thread.  The value is borrowed for the call;
 * the text handed to fn is borrowed for that call (NUL-terminated).
 */
#ifndef LUNA_CLIENT_WARNING_H
#define LUNA_CLIENT_WARNING_H

#include <stddef.h>

typedef void (*luna_warning_fn)(void *ud, const char *text, size_t len);

/* Calls fn for each 299 warning of the header value, in order; returns how
 * many.  Out of memory: 0, fn never called. */
size_t luna_warning_parse(const char *value, luna_warning_fn fn, void *ud);

#endif
