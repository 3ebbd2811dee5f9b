/*
 * url.h — the one redaction every URL passes before luna prints it: in a
 * log line, an error message, a /readyz reason or a metric label.
 *
 * A URL may carry credentials two ways: userinfo (`https://admin:pw@host`,
 * also a bare `https://token@host`) and query parameters that hold a token
 * (`?access_token=...`).  luna_url_redact() removes the userinfo entirely
 * (user and password: a user name can be a token too) and replaces the
 * value of every query parameter whose name contains "token", "password",
 * "passwd", "secret", "signature", "apikey", "api_key" or "credential"
 * (any case) with "REDACTED".  Everything else is copied byte for byte.
 *
 * It works on free text, not just one URL: every `scheme://` in the text
 * starts a URL (scheme: a letter, then letters, digits, '+', '-', '.'),
 * whose authority ends at '/', '?', '#', white space, a quote, '<', '>' or
 * the end, and whose query ends at '#', white space, a quote or the end.
 * So a message from a library that quotes a URL somewhere inside it
 * ("Unsupported proxy syntax in 'http://u:p@x'") is cleaned too.  A URL
 * that breaks these rules (a '/' inside the password) cannot be found in
 * text; configuration that holds URLs is validated when loaded so that
 * the ones luna keeps are well formed.
 *
 * Pure string work, no allocation but the result; runs on any thread.
 *
 * Ownership: luna_url_redact returns a new string the caller frees with
 * free(); luna_url_redact_buf writes into caller storage.
 */
#ifndef LUNA_URL_H
#define LUNA_URL_H

#include <stdbool.h>
#include <stddef.h>

/* A copy of text with credentials removed as described above; NULL only
 * when out of memory (and for a NULL text). */
char *luna_url_redact(const char *text);

/* The same into buf (size > 0), cut to size - 1 bytes and always
 * NUL-terminated; returns buf.  A cut never leaves part of a secret: the
 * redaction is done first, then the result is cut. */
char *luna_url_redact_buf(const char *text, char *buf, size_t size);

/* Whether text holds a URL with userinfo (what luna_url_redact removes
 * besides query secrets). */
bool luna_url_has_userinfo(const char *text);

/* host[:port] of url (scheme://[userinfo@]host[:port][/...]) into buf,
 * without the userinfo: what client-go calls URL.Host, for the "host"
 * label of the API request metrics.  A string without "://" is taken as
 * starting with the authority.  Cut to size - 1 bytes; returns buf. */
char *luna_url_host(const char *url, char *buf, size_t size);

#endif
