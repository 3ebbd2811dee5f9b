/*
 * log.h — structured logging: one line per event, text or JSON.
 *
 * luna_log(level, msg, key1, value1, key2, value2, ..., NULL) writes
 *   text: 2026-11-21T06:00:00.123Z INFO reconcile start controller=x key="a b"
 *   json: {"ts":"2026-11-21T06:00:00.123Z","level":"info","msg":"reconcile start","controller":"x","key":"a b"}
 * Keys and values are borrowed for the call.  Messages are stable strings
 * (specs assert them); variable parts go in key/value pairs.  Callers never
 * pass credentials.  Runs on the loop thread; the sink is stderr by default.
 */
#ifndef LUNA_LOG_H
#define LUNA_LOG_H

#include <stdbool.h>
#include <stdio.h>

enum luna_log_level { LUNA_LOG_DEBUG, LUNA_LOG_INFO, LUNA_LOG_WARN, LUNA_LOG_ERROR };
enum luna_log_format { LUNA_LOG_TEXT, LUNA_LOG_JSON };

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

#define luna_debug(...) luna_log(LUNA_LOG_DEBUG, __VA_ARGS__, NULL)
#define luna_info(...)  luna_log(LUNA_LOG_INFO,  __VA_ARGS__, NULL)
#define luna_warn(...)  luna_log(LUNA_LOG_WARN,  __VA_ARGS__, NULL)
#define luna_error(...) luna_log(LUNA_LOG_ERROR, __VA_ARGS__, NULL)

#endif
