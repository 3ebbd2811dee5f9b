/* token_file.c — see token_file.h. */
#include "client/token_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

struct luna_token_file *luna_token_file_new(const char *path)
{
    struct luna_token_file *tf = calloc(1, sizeof *tf);
    if (!tf)
        return NULL;
    tf->path = strdup(path);
    if (!tf->path) {
        free(tf);
        return NULL;
    }
    return tf;
}

static void wipe_token(struct luna_token_file *tf)
{
    if (tf->token) {
        explicit_bzero(tf->token, strlen(tf->token));
        free(tf->token);
        tf->token = NULL;
    }
}

void luna_token_file_free(struct luna_token_file *tf)
{
    if (!tf)
        return;
    wipe_token(tf);
    free(tf->path);
    free(tf);
}

void luna_token_file_expire(struct luna_token_file *tf)
{
    tf->read_at = 0;
    tf->retry_at = 0;
    memset(&tf->seen, 0, sizeof tf->seen);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
           a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
           a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Reads and trims the file; on success *out is a malloc'd token and *st the
 * stat of the file that was read. */
static int read_token(const char *path, char **out, struct stat *st, luna_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return luna_error_set(err, LUNA_EIO, "%s: cannot read token file: %s",
                              path, strerror(errno));
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        int e = errno;
        close(fd);
        return luna_error_set(err, LUNA_EIO, "%s: cannot read token file: %s", path,
                              S_ISREG(st->st_mode) ? strerror(e) : "not a regular file");
    }
    if (st->st_size > LUNA_TOKEN_FILE_MAX) {
        close(fd);
        return luna_error_set(err, LUNA_ETOOBIG, "%s: token file is larger than %d bytes",
                              path, LUNA_TOKEN_FILE_MAX);
    }
    size_t cap = (size_t)st->st_size + 1, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (len + 1 >= cap) {
            /* The file grew after fstat: allow up to the cap. */
            if (cap > LUNA_TOKEN_FILE_MAX) {
                explicit_bzero(buf, len);
                free(buf);
                close(fd);
                return luna_error_set(err, LUNA_ETOOBIG, "%s: token file is larger than %d bytes",
                                      path, LUNA_TOKEN_FILE_MAX);
            }
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                explicit_bzero(buf, len);
                free(buf);
                close(fd);
                return luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", path);
            }
            buf = bigger;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            explicit_bzero(buf, len);
            free(buf);
            close(fd);
            return luna_error_set(err, LUNA_EIO, "%s: cannot read token file: %s",
                                  path, strerror(e));
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    size_t start = 0;
    while (start < len && is_space(buf[start]))
        start++;
    while (len > start && is_space(buf[len - 1]))
        len--;
    if (len == start) {
        free(buf);
        return luna_error_set(err, LUNA_EINVAL, "%s: token file is empty", path);
    }
    memmove(buf, buf + start, len - start);
    explicit_bzero(buf + (len - start), start);
    buf[len - start] = '\0';
    *out = buf;
    return 0;
}

int luna_token_file_get(struct luna_token_file *tf, time_t now,
                        const char **token, luna_error *err)
{
    if (tf->token && now < tf->retry_at) {
        *token = tf->token;
        return 0;
    }
    if (tf->token && now - tf->read_at < LUNA_TOKEN_FILE_PERIOD) {
        struct stat st;
        if (stat(tf->path, &st) == 0 && same_file(&st, &tf->seen)) {
            *token = tf->token;
            return 0;
        }
    }
    char *fresh = NULL;
    struct stat st;
    luna_error local = { 0 };
    int rc = read_token(tf->path, &fresh, &st, &local);
    if (rc < 0) {
        if (tf->token) {
            luna_warn("token file re-read failed", "path", tf->path, "error", local.msg);
            /* Retry a second later rather than on every call. */
            tf->retry_at = now + 1;
            *token = tf->token;
            return 0;
        }
        if (err)
            *err = local;
        return rc;
    }
    wipe_token(tf);
    tf->token = fresh;
    tf->seen = st;
    tf->read_at = now;
    tf->retry_at = 0;
    *token = tf->token;
    return 0;
}
