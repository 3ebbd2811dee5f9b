/* runtime/pod_event.c — see runtime/pod_event.h. */
#include "runtime/pod_event.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"

#define MESSAGE_MAX 1024 /* client-go's recorder cuts messages there */

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

bool luna_pod_event_known(void) { return env("POD_NAME") && env("POD_NAMESPACE"); }

static void posted(void *ud, const luna_http_response *resp, const luna_http_failure *fail)
{
    (void)ud;
    if (fail) {
        luna_warn("pod Event not recorded", "error", fail->err.msg);
    } else if (resp->status < 200 || resp->status >= 300) {
        char status[16];
        snprintf(status, sizeof status, "%ld", resp->status);
        luna_warn("pod Event not recorded", "status", status, "body",
                  resp->body ? resp->body : "");
    }
}

int luna_pod_event_post(struct luna_kube_client *kc, const char *reason, const char *message,
                        luna_error *err)
{
    const char *pod = env("POD_NAME"), *ns = env("POD_NAMESPACE"), *uid = env("POD_UID");
    if (!pod || !ns)
        return luna_error_set(err, LUNA_ENOTFOUND, "POD_NAME and POD_NAMESPACE are not both set");
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    char stamp[32], name[320], path[512];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(name, sizeof name, "%.250s.%llx", pod,
             (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", ns);
    /* cut at a UTF-8 character boundary */
    size_t len = strlen(message);
    if (len > MESSAGE_MAX) {
        len = MESSAGE_MAX;
        while (len > 0 && ((unsigned char)message[len] & 0xC0) == 0x80)
            len--;
    }
    json_t *involved = json_pack("{s:s,s:s,s:s,s:s}", "apiVersion", "v1", "kind", "Pod", "name",
                                 pod, "namespace", ns);
    if (involved && uid)
        json_object_set_new(involved, "uid", json_string(uid));
    json_t *ev = involved ? json_pack("{s:s,s:s,s:{s:s,s:s},s:o,s:s,s:s%,s:s,s:{s:s},s:s,s:s,"
                                      "s:s,s:s,s:i}",
                                      "apiVersion", "v1", "kind", "Event", "metadata", "name", name,
                                      "namespace", ns, "involvedObject", involved, "reason", reason,
                                      "message", message, len, "type", "Warning", "source",
                                      "component", "luna", "reportingComponent", "luna",
                                      "reportingInstance", pod, "firstTimestamp", stamp,
                                      "lastTimestamp", stamp, "count", 1)
                          : NULL;
    char *body = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    if (!body)
        return luna_error_set(err, LUNA_ENOMEM, "pod Event: out of memory");
    struct luna_kube_request_options o = {
        .method = "POST", .path = path, .body = body, .body_len = strlen(body), .timeout = 30,
        .on_done = posted,
    };
    struct luna_kube_request *r = luna_kube_request_start(kc, &o, err);
    free(body);
    return r ? 0 : (err ? err->code : LUNA_EIO);
}
