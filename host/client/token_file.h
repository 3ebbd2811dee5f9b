/*
 * token_file.h — a bearer token read from a file that may be rotated.
 *
 * client-go's cached file token source: kubeconfig `tokenFile` and the
 * in-cluster service-account token are files that kubelet (or a sidecar)
 * replaces while the process runs, so the token is re-read instead of being
 * kept forever.  Re-reading is cheap: each get() does one stat(2) and reads
 * the file again only when its identity changed (inode, size, mtime, ctime
 * — an atomic rename or an in-place rewrite), or when LUNA_TOKEN_FILE_PERIOD
 * seconds passed since the last read (an edit that kept size and timestamps).
 * The token is the file's content with surrounding whitespace trimmed.
 *
 * Uses: POSIX file I/O, log.h (a failed re-read is logged, without the
 * token).  Runs on the loop thread, blocking only for the stat/read.
 *
 * Invariants: token != NULL if and only if one read succeeded; once it has,
 * get() never fails: when a later re-read fails (file gone, unreadable,
 * empty) the last good token is returned and "token file re-read failed" is
 * logged (at most once a second), as client-go does.
 *
 * Ownership: luna_token_file_new copies path; the struct is freed (and the
 * token wiped) with luna_token_file_free().  The token returned by get() is
 * borrowed until the next get() or free.
 */
#ifndef LUNA_TOKEN_FILE_H
#define LUNA_TOKEN_FILE_H

#include <stdbool.h>
#include <sys/stat.h>
#include <time.h>

#include "base/error.h"

#define LUNA_TOKEN_FILE_PERIOD 60   /* seconds between unconditional re-reads */
#define LUNA_TOKEN_FILE_MAX (1 << 20) /* larger files are rejected */

struct luna_token_file {
    char *path;
    char *token;          /* trimmed content of the last good read, or NULL */
    struct stat seen;     /* identity of the file at the last good read */
    time_t read_at;       /* when the last good read happened */
    time_t retry_at;      /* after a failed re-read: no new attempt before */
};

/* NULL only when out of memory.  Does not touch the file. */
struct luna_token_file *luna_token_file_new(const char *path);

/* Writes the current token (borrowed) to *token.  `now` is the wall clock
 * in seconds (injectable for specs).  Fails (LUNA_EIO, LUNA_EINVAL for an
 * empty file, LUNA_ETOOBIG) only while no read has ever succeeded; the
 * message names the path, never the content. */
int luna_token_file_get(struct luna_token_file *tf, time_t now,
                        const char **token, luna_error *err);

/* Forces the next get() to re-read the file. */
void luna_token_file_expire(struct luna_token_file *tf);

void luna_token_file_free(struct luna_token_file *tf);

#endif
