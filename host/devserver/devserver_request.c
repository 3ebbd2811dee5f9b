/* devserver_request.c — see devserver_request.h. */
#include "devserver/devserver_request.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

void luna_ds_reply_bytes(luna_ds_response *resp, int code, char *body)
{
    resp->code = code;
    resp->body = body;
    resp->len = strlen(body);
}

void luna_ds_reply_oom(luna_ds_response *resp)
{
    static const char body[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                               "\"status\":\"Failure\",\"message\":\"Internal error occurred: "
                               "out of memory\",\"reason\":\"InternalError\",\"code\":500}\n";
    free(resp->body);
    resp->code = 500;
    resp->body = strdup(body);
    resp->len = resp->body ? sizeof body - 1 : 0;
}

/* Takes ownership of doc. */
void luna_ds_reply_json(luna_ds_response *resp, int code, json_t *doc)
{
    char *s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!s) {
        luna_ds_reply_oom(resp);
        return;
    }
    size_t n = strlen(s);
    char *b = realloc(s, n + 2);
    if (!b) {
        free(s);
        luna_ds_reply_oom(resp);
        return;
    }
    b[n] = '\n';
    b[n + 1] = '\0';
    luna_ds_reply_bytes(resp, code, b);
}

void luna_ds_reply_status(luna_ds_response *resp, luna_ds_status *st)
{
    resp->retry_after = st->retry_after;
    luna_ds_reply_json(resp, st->code, luna_ds_status_json(st));
    luna_ds_status_clear(st);
}

const char *luna_ds_request_arg(const luna_ds_request *req, const char *name)
{
    return req->arg ? req->arg(req->arg_ctx, name) : NULL;
}

bool luna_ds_request_flag(const luna_ds_request *req, const char *name)
{
    const char *v = luna_ds_request_arg(req, name);
    return v && strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0;
}

const char *luna_ds_request_manager(const luna_ds_request *req, char *buf, size_t n)
{
    const char *m = luna_ds_request_arg(req, "fieldManager");
    if (m && *m)
        return m;
    const char *ua = req->user_agent ? req->user_agent : "unknown";
    size_t len = strcspn(ua, "/");
    if (len >= n)
        len = n - 1;
    memcpy(buf, ua, len);
    buf[len] = '\0';
    return buf;
}

void luna_ds_reply_not_found(luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    luna_ds_status_set(&st, 404, "NotFound", "the server could not find the requested resource");
    st.details = json_object(); /* kube sends "details": {} */
    luna_ds_reply_status(resp, &st);
}

void luna_ds_reply_page_not_found(luna_ds_response *resp)
{
    char *body = strdup("404 page not found\n");
    if (!body) {
        luna_ds_reply_oom(resp);
        return;
    }
    luna_ds_reply_bytes(resp, 404, body);
    resp->content_type = "text/plain; charset=utf-8";
}

void luna_ds_reply_not_allowed(luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    luna_ds_status_set(&st, 405, "MethodNotAllowed",
                       "the server does not allow this method on the requested resource");
    luna_ds_reply_status(resp, &st);
}
