/* devserver_status.c — see devserver_status.h. */
#include "devserver/devserver_status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"

static void set_message(luna_ds_status *st, const char *fmt, va_list ap)
{
    vsnprintf(st->message, sizeof st->message, fmt, ap);
}

static void reset(luna_ds_status *st, int code, const char *reason)
{
    if (st->details)
        json_decref(st->details);
    st->details = NULL;
    st->code = code;
    st->reason = reason;
    st->retry_after = 0;
}

/* The LUNA_E* code for an HTTP error status (see the header). */
static int errcode(int http)
{
    switch (http) {
    case 404: case 410: return LUNA_ENOTFOUND;
    case 413: return LUNA_ETOOBIG;
    case 504: return LUNA_ETIMEOUT;
    default:  return LUNA_EINVAL;
    }
}

int luna_ds_status_set(luna_ds_status *st, int code, const char *reason,
                       const char *fmt, ...)
{
    reset(st, code, reason);
    va_list ap;
    va_start(ap, fmt);
    set_message(st, fmt, ap);
    va_end(ap);
    return errcode(code);
}

int luna_ds_status_oom(luna_ds_status *st)
{
    reset(st, 500, "InternalError");
    snprintf(st->message, sizeof st->message, "Internal error occurred: out of memory");
    return LUNA_ENOMEM;
}

static json_t *named_details(const char *group, const char *resource, const char *name)
{
    json_t *d = json_object();
    if (name && *name)
        json_object_set_new(d, "name", json_string(name));
    if (group && *group)
        json_object_set_new(d, "group", json_string(group));
    json_object_set_new(d, "kind", json_string(resource));
    return d;
}

static const char *qualified(char *buf, size_t n, const char *group, const char *resource)
{
    if (group && *group)
        snprintf(buf, n, "%s.%s", resource, group);
    else
        snprintf(buf, n, "%s", resource);
    return buf;
}

int luna_ds_status_not_found(luna_ds_status *st, const char *group,
                             const char *resource, const char *name)
{
    char gr[256];
    luna_ds_status_set(st, 404, "NotFound", "%s \"%s\" not found",
                       qualified(gr, sizeof gr, group, resource), name);
    st->details = named_details(group, resource, name);
    return LUNA_ENOTFOUND;
}

int luna_ds_status_already_exists(luna_ds_status *st, const char *group,
                                  const char *resource, const char *name)
{
    char gr[256];
    luna_ds_status_set(st, 409, "AlreadyExists", "%s \"%s\" already exists",
                       qualified(gr, sizeof gr, group, resource), name);
    st->details = named_details(group, resource, name);
    return LUNA_EINVAL;
}

int luna_ds_status_conflict(luna_ds_status *st, const char *group,
                            const char *resource, const char *name, const char *why)
{
    char gr[256];
    luna_ds_status_set(st, 409, "Conflict", "Operation cannot be fulfilled on %s \"%s\": %s",
                       qualified(gr, sizeof gr, group, resource), name, why);
    st->details = named_details(group, resource, name);
    return LUNA_EINVAL;
}

int luna_ds_status_bad_request(luna_ds_status *st, const char *fmt, ...)
{
    reset(st, 400, "BadRequest");
    va_list ap;
    va_start(ap, fmt);
    set_message(st, fmt, ap);
    va_end(ap);
    return LUNA_EINVAL;
}

int luna_ds_status_invalid(luna_ds_status *st, const char *group, const char *kind,
                           const char *name, const char *cause_reason,
                           const char *field, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char gk[256];
    luna_ds_status_set(st, 422, "Invalid", "%s \"%s\" is invalid: %s: %s",
                       qualified(gk, sizeof gk, group, kind), name ? name : "", field, what);
    json_t *d = named_details(group, kind, name);
    json_t *cause = json_object();
    json_object_set_new(cause, "reason", json_string(cause_reason));
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", what);
    json_object_set_new(cause, "message", json_string(msg));
    json_object_set_new(cause, "field", json_string(field));
    json_t *causes = json_array();
    json_array_append_new(causes, cause);
    json_object_set_new(d, "causes", causes);
    st->details = d;
    return LUNA_EINVAL;
}

int luna_ds_status_invalid_causes(luna_ds_status *st, const char *group, const char *kind,
                                  const char *name, json_t *causes)
{
    char gk[256];
    size_t n = json_array_size(causes);
    luna_ds_status_set(st, 422, "Invalid", "%s \"%s\" is invalid: %s",
                       qualified(gk, sizeof gk, group, kind), name ? name : "", n > 1 ? "[" : "");
    size_t len = strlen(st->message);
    for (size_t i = 0; i < n && len < sizeof st->message; i++) {
        json_t *c = json_array_get(causes, i);
        const char *field = json_string_value(json_object_get(c, "field"));
        int w = snprintf(st->message + len, sizeof st->message - len, "%s%s: %s", i ? ", " : "",
                         field ? field : "", json_string_value(json_object_get(c, "message")));
        len += w > 0 ? (size_t)w : 0;
    }
    if (n > 1 && len + 1 < sizeof st->message)
        strcat(st->message, "]");
    json_t *d = named_details(group, kind, name);
    json_object_set_new(d, "causes", causes);
    st->details = d;
    return LUNA_EINVAL;
}

void luna_ds_status_clear(luna_ds_status *st)
{
    reset(st, 0, "");
    st->message[0] = '\0';
}

json_t *luna_ds_status_json(const luna_ds_status *st)
{
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string("Status"));
    json_object_set_new(o, "apiVersion", json_string("v1"));
    json_object_set_new(o, "metadata", json_object());
    json_object_set_new(o, "status", json_string(st->code ? "Failure" : "Success"));
    if (st->message[0])
        json_object_set_new(o, "message", json_string(st->message));
    if (st->reason && *st->reason)
        json_object_set_new(o, "reason", json_string(st->reason));
    if (st->details)
        json_object_set(o, "details", st->details);
    else if (st->code == 404 || st->code == 405)
        json_object_set_new(o, "details", json_object());
    if (st->retry_after > 0 && st->details == NULL) {
        json_t *d = json_object();
        json_object_set_new(d, "retryAfterSeconds", json_integer(st->retry_after));
        json_object_set_new(o, "details", d);
    }
    json_object_set_new(o, "code", json_integer(st->code ? st->code : 200));
    return o;
}

json_t *luna_ds_status_success_delete(const char *group, const char *resource,
                                      const char *name, const char *uid)
{
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string("Status"));
    json_object_set_new(o, "apiVersion", json_string("v1"));
    json_object_set_new(o, "metadata", json_object());
    json_object_set_new(o, "status", json_string("Success"));
    json_t *d = named_details(group, resource, name);
    if (uid)
        json_object_set_new(d, "uid", json_string(uid));
    json_object_set_new(o, "details", d);
    return o;
}
