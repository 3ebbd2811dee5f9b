/*
 * liblog.h — the libraries' own messages, through luna's logger.
 *
 * Every line luna writes goes through log.h, in the format chosen (text or
 * JSON), so a JSON log stays parseable line by line.  The libraries luna
 * links would otherwise write to stderr themselves; each gets a hook here
 * that logs instead:
 *
 *   libmicrohttpd  luna_liblog_mhd, given to every daemon as
 *                  MHD_OPTION_EXTERNAL_LOGGER (with MHD_USE_ERROR_LOG);
 *                  its panic function (luna_liblog_install): logged, abort
 *   libev          syserr callback and allocator (luna_liblog_install):
 *                  a fatal failure is logged at error, then abort
 *   libcurl        a luna_liblog_stream, set as CURLOPT_STDERR on every
 *                  transfer: whatever libcurl writes there (verbose output,
 *                  warnings) becomes log lines
 *   LuaJIT         luna_lua_panic (lua/lua_util.h) as every state's panic
 *                  function: logged at error, then abort
 *   exec plugins   their stderr is read and logged line by line
 *                  (exec_plugin.c), never passed through
 * yajl, jansson, libyaml and OpenSSL never write: their errors come back as
 * values that luna puts into its own messages.
 *
 * Lines look like
 *   DEBUG library message source=libmicrohttpd server=dev-server message="..."
 *   WARN exec plugin stderr source=aws-iam-authenticator message="..."
 *   ERROR library failure source=libev error="(libev) epoll_wait: ..."
 * A message is one log line per line of its text (trailing newlines and
 * blanks dropped, each line cut at LUNA_LIBLOG_LINE_MAX bytes).
 *
 * Runs on the loop thread (the libraries call back from it); the fatal
 * hooks may run anywhere and only log and abort.
 *
 * Ownership: struct luna_liblog_source values are caller storage that must
 * outlive the daemon or stream using them (static const in practice).  A
 * stream is caller storage too, closed with luna_liblog_stream_close.
 */
#ifndef LUNA_LIBLOG_H
#define LUNA_LIBLOG_H

#include <stdarg.h>
#include <stdio.h>

#include "base/error.h"
#include "base/log.h"

#define LUNA_LIBLOG_LINE_MAX 4096

/* Where messages come from, and how they are logged: `msg` (NULL: "library
 * message") at `level`, with source=`source` (the library, or the program
 * whose output it is) and server=`server` (may be NULL: the component, an
 * HTTP server). */
struct luna_liblog_source {
    const char *msg;
    const char *source;
    const char *server;
    enum luna_log_level level;
};

/* Installs the process-wide hooks (libev, libmicrohttpd's panic).  Call
 * once, early in main; calling again is harmless. */
void luna_liblog_install(void);

/* Logs a library's printf-style message (one line per line of text). */
void luna_liblog_vmessage(const struct luna_liblog_source *src, const char *fmt, va_list ap);

/* MHD_OPTION_EXTERNAL_LOGGER: cls is a const struct luna_liblog_source *. */
void luna_liblog_mhd(void *cls, const char *fmt, va_list ap);

/* A write-only stdio stream whose lines are logged as src's messages.
 * Caller storage (embed it in its owner): open makes s->file, close logs
 * an unfinished line and closes it.  The struct must stay in place while
 * the file is open; src is borrowed as long. */
struct luna_liblog_stream {
    FILE *file;                        /* NULL until opened, and after close */
    const struct luna_liblog_source *src;
    char line[LUNA_LIBLOG_LINE_MAX];
    size_t len;
    int cut;                           /* the line outgrew the buffer: drop its rest */
};
/* 0, or LUNA_ENOMEM (s->file stays NULL). */
int luna_liblog_stream_open(struct luna_liblog_stream *s, const struct luna_liblog_source *src);
/* Safe on a stream never opened, and twice. */
void luna_liblog_stream_close(struct luna_liblog_stream *s);

/* Logs "library failure" at error and aborts: for libraries whose failure
 * hooks must not return. */
_Noreturn void luna_liblog_fatal(const char *library, const char *message);

#endif
