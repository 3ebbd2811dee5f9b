/*
 * log.h — the one log writer: every line luna writes, text or JSON.
 *
 * luna_log(level, msg, key1, value1, key2, value2, ..., NULL) writes
 *   text: 2026-11-21T06:00:00.123Z INFO reconcile start controller=x key="a b"
 *   json: {"ts":"2026-11-21T06:00:00.123Z","level":"info","msg":"reconcile start","controller":"x","key":"a b"}
 * luna_log_record() does the same with a message of any bytes and the
 * fields a script gave (print, luna.log.*) after the host's pairs.
 * Messages of the host are stable strings (specs assert them); variable
 * parts go in key/value pairs.  Callers never pass credentials.
 *
 * Typed values (JSON only; the text format writes every value the same way
 * as ever).  Values are strings; a host pair whose key is written
 * LUNA_LOG_NUM("attempt") ("#attempt") or LUNA_LOG_BOOL("secure")
 * ("?secure") is a number or a boolean: in JSON its value is written as a
 * JSON number (when it is one by JSON's grammar, "1", "-0.5", "1e+300")
 * or as true/false (when it is "true" or "false"), else as the string it
 * is ("inf", "nan").  The key is written without its mark.  A script's
 * field says the same with its type (luna.log's numbers and booleans).
 *   json: {"ts":"...","level":"error","msg":"reconcile failed","controller":"x","attempt":2,"duration_ms":1.25}
 *
 * Whatever the bytes of a message, key or value (a script, a server or a
 * client may have chosen them), a line keeps these promises:
 *   - It is one line, one record.  Message, keys and values are escaped
 *     alike: in JSON as JSON strings; in text written bare when they hold
 *     only plain characters (a message may also hold inner spaces), else
 *     as a JSON string in double quotes.  Escaped: '"', '\', all C0
 *     controls, DEL, the C1 controls U+0080–U+009F, the bidi controls
 *     U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069, the line
 *     separators U+2028/U+2029, and U+FFFD; a byte that is not part of
 *     valid UTF-8 is written \ufffd.  So no raw control, escape or bidi
 *     character reaches a terminal, and one decoded string has one
 *     escaped form.
 *   - The host's keys are the host's: ts, level, msg, truncated and the
 *     pairs the host passes, plus the names in LUNA_LOG_HOST_KEYS whether
 *     or not this line has them.  A script field named like one of them,
 *     or whose name starts with LUNA_LOG_SCRIPT_PREFIX, is written with
 *     that prefix ("controller" becomes "script.controller"), so it can
 *     neither set nor shadow a host key; a script field that repeats the
 *     host's own pair (same name, same value) is written once.  No key
 *     appears twice in a line (a later duplicate, possible only for keys
 *     whose bytes are not UTF-8, is left out).
 *   - A line is at most LUNA_LOG_LINE_MAX bytes, newline included.  When
 *     the record does not fit, the longest strings are cut (at a character)
 *     so that short ones (controller, key, reconcile_id, source) stay whole,
 *     and the line ends with truncated=N: the bytes of message, keys and
 *     values left out.  A field whose escaped name is longer than
 *     LUNA_LOG_KEY_MAX is left out the same way.
 *
 * Output goes to stderr.  Until luna_log_attach, and in tools that never
 * call it, a line is written before the call returns (waiting for a slow
 * reader as stdio would).  Once attached to the loop, output never blocks
 * it: lines go through a buffer of LUNA_LOG_BUFFER_BYTES written without
 * waiting (a private non-blocking descriptor for a pipe or terminal,
 * MSG_DONTWAIT for a socket) and drained by an ev_io watcher; a line that
 * finds the buffer full is dropped and counted, and once the output has
 * drained a "log lines dropped" warning says how many (always written,
 * whatever the level).  luna_log_detach writes what is left, waiting a
 * bounded time.
 *
 * Runs on the loop thread (the library hooks of liblog.h that abort may
 * log from elsewhere first).  Every string passed in is borrowed for the
 * call; the writer allocates nothing (its buffer is static).
 */
#ifndef LUNA_LOG_H
#define LUNA_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct ev_loop;

enum luna_log_level { LUNA_LOG_DEBUG, LUNA_LOG_INFO, LUNA_LOG_WARN, LUNA_LOG_ERROR };
enum luna_log_format { LUNA_LOG_TEXT, LUNA_LOG_JSON };

/* Bytes of one line, newline included. */
#define LUNA_LOG_LINE_MAX 16384
/* Bytes of a key as written (escaped, prefix and quotes included). */
#define LUNA_LOG_KEY_MAX 256
/* Host pairs of one record (luna_log takes at most this many). */
#define LUNA_LOG_PAIRS_MAX 32
/* Script fields of one record. */
#define LUNA_LOG_FIELDS_MAX 64
/* Bytes held for a reader that does not keep up, once attached. */
#define LUNA_LOG_BUFFER_BYTES ((size_t)1 << 20)
/* What a script field that would collide with a host key is prefixed with. */
#define LUNA_LOG_SCRIPT_PREFIX "script."
/* The keys the host writes beside a script's fields (print, luna.log),
 * reserved in every record that has script fields. */
#define LUNA_LOG_HOST_KEYS \
    "ts", "level", "msg", "truncated", "controller", "key", "reconcile_id", \
    "namespace", "name", "source"

void luna_log_set_level(enum luna_log_level level);
void luna_log_set_format(enum luna_log_format format);
bool luna_log_enabled(enum luna_log_level level);
/* Parses "debug|info|warn|error"; returns -1 if unknown. */
int luna_log_level_parse(const char *name);

void luna_log(enum luna_log_level level, const char *msg, ...)
    __attribute__((sentinel));

/* Same, with the pairs in an array of 2*npairs strings (NULL values skipped). */
void luna_log_pairs(enum luna_log_level level, const char *msg,
                    const char *const *pairs, int npairs);

/* How a value is written in JSON (see "Typed values" above). */
enum luna_log_type { LUNA_LOG_TYPE_STRING, LUNA_LOG_TYPE_NUMBER, LUNA_LOG_TYPE_BOOL };
/* A host pair's key marked as a number's or a boolean's (a literal). */
#define LUNA_LOG_NUM(key) "#" key
#define LUNA_LOG_BOOL(key) "?" key

/* A field a script gave: a key and a value of any bytes (borrowed), and
 * its type (zero: a string). */
struct luna_log_field {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
    enum luna_log_type type;
};

/* One record: msg (msg_len bytes, any), the host's pairs (as
 * luna_log_pairs), then the script's fields (at most LUNA_LOG_FIELDS_MAX
 * are read). */
void luna_log_record(enum luna_log_level level, const char *msg, size_t msg_len,
                     const char *const *pairs, int npairs,
                     const struct luna_log_field *fields, int nfields);

/* The formatter alone (what the writer and the fuzzer use): the line of
 * such a record, with timestamp ts (a NUL-terminated string of at most 40
 * bytes), into out.  Returns its length, newline included (at most
 * LUNA_LOG_LINE_MAX); *cut (may be NULL) gets the bytes left out. */
size_t luna_log_format_line(char out[LUNA_LOG_LINE_MAX], enum luna_log_format format,
                            const char *ts, enum luna_log_level level,
                            const char *msg, size_t msg_len,
                            const char *const *pairs, int npairs,
                            const struct luna_log_field *fields, int nfields,
                            size_t *cut);

/* From now on output never blocks `loop` (see above).  Call once the loop
 * exists, before any script runs. */
void luna_log_attach(struct ev_loop *loop);
/* Stops using the loop: writes what is buffered, waiting at most `wait`
 * seconds in all (for this and every later line); what is still unwritten
 * then is dropped.  Before the loop is freed. */
void luna_log_detach(double wait);
/* Writes what is buffered, waiting at most `wait` seconds (before an
 * abort). */
void luna_log_flush(double wait);

/* Since the process started. */
struct luna_log_stats {
    uint64_t lines;       /* written or buffered */
    uint64_t dropped;     /* lost: the buffer was full, or the output failed */
    uint64_t truncated;   /* written cut (truncated=N) */
    size_t buffered;      /* bytes waiting for the reader now */
};
void luna_log_get_stats(struct luna_log_stats *out);

#define luna_debug(...) luna_log(LUNA_LOG_DEBUG, __VA_ARGS__, NULL)
#define luna_info(...)  luna_log(LUNA_LOG_INFO,  __VA_ARGS__, NULL)
#define luna_warn(...)  luna_log(LUNA_LOG_WARN,  __VA_ARGS__, NULL)
#define luna_error(...) luna_log(LUNA_LOG_ERROR, __VA_ARGS__, NULL)

#endif
