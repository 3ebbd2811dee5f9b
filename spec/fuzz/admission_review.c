/*
 * admission_review.c — libFuzzer target for the webhook server's check of
 * an AdmissionReview envelope (serve/webhook_server.c,
 * luna_webhook_review_check), the code every admission request's body
 * meets before a webhook function sees it, and of a ConversionReview's
 * (luna_webhook_conversion_review_check), the same check with another
 * shape, run on the same input.
 *
 * Input: the body, whole.
 *
 * Checked: a refusal (400) has a one-line reason and no uid is used; an
 * accepted body (0) is, read by jansson (an independent parser that keeps
 * a repeated key's last value, as the webhook's Lua decoder does), a JSON
 * object of apiVersion admission.k8s.io/v1 and kind AdmissionReview whose
 * request is an object with the uid the check returned, and whose request
 * fields a webhook reads have the types the check promises (object and
 * oldObject objects or null, userInfo an object, operation a string,
 * dryRun a boolean or null); an accepted ConversionReview is one of
 * apiextensions.k8s.io/v1 with that uid, a string desiredAPIVersion and
 * a list of objects.  Bodies jansson cannot read (a NUL byte in a
 * key, an integer past 64 bits) are not compared.
 */
#include "fuzz_input.h"

#include <jansson.h>
#include <stdbool.h>

#include "serve/webhook_server.h"

static bool type_ok(json_t *request, const char *key, int want, bool null_ok)
{
    json_t *v = json_object_get(request, key);
    if (!v)
        return true;
    if (null_ok && json_is_null(v))
        return true;
    if (want == JSON_TRUE)
        return json_is_boolean(v);
    return json_typeof(v) == (json_type)want;
}

static void conversion(const uint8_t *data, size_t size)
{
    char uid[256], why[512];
    why[0] = '\0';
    int rc = luna_webhook_conversion_review_check((const char *)data, size, uid, sizeof uid, why,
                                                  sizeof why);
    FUZZ_CHECK(rc == 0 || rc == 400, "conversion: returned %d", rc);
    if (rc == 400) {
        FUZZ_CHECK(why[0] != '\0', "conversion: a refusal without a reason");
        FUZZ_CHECK(!strchr(why, '\n'), "conversion: a reason of several lines: %s", why);
        return;
    }
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, &jerr);
    if (!doc)
        return;
    json_t *av = json_object_get(doc, "apiVersion"), *kind = json_object_get(doc, "kind");
    FUZZ_CHECK(json_is_string(av) &&
                   strcmp(json_string_value(av), "apiextensions.k8s.io/v1") == 0,
               "conversion: accepted another apiVersion");
    FUZZ_CHECK(json_is_string(kind) && strcmp(json_string_value(kind), "ConversionReview") == 0,
               "conversion: accepted another kind");
    json_t *request = json_object_get(doc, "request");
    FUZZ_CHECK(json_is_object(request), "conversion: accepted a request that is not an object");
    json_t *u = json_object_get(request, "uid");
    FUZZ_CHECK(json_is_string(u) && strcmp(json_string_value(u), uid) == 0,
               "conversion: the converter would see another uid than the answer's %s", uid);
    FUZZ_CHECK(json_is_string(json_object_get(request, "desiredAPIVersion")),
               "conversion: desiredAPIVersion missing or not a string");
    FUZZ_CHECK(json_is_array(json_object_get(request, "objects")),
               "conversion: objects missing or not a list");
    json_decref(doc);
}

static void admission(const uint8_t *data, size_t size)
{
    char uid[256], why[512];
    why[0] = '\0';
    int rc = luna_webhook_review_check((const char *)data, size, uid, sizeof uid, why,
                                       sizeof why);
    FUZZ_CHECK(rc == 0 || rc == 400, "returned %d", rc);
    if (rc == 400) {
        FUZZ_CHECK(why[0] != '\0', "a refusal without a reason");
        FUZZ_CHECK(!strchr(why, '\n'), "a reason of several lines: %s", why);
        return;
    }
    FUZZ_CHECK(uid[0] != '\0', "accepted without a uid");
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, &jerr);
    if (!doc)
        return; /* past what jansson reads (see above) */
    FUZZ_CHECK(json_is_object(doc), "accepted a review that is not an object");
    json_t *av = json_object_get(doc, "apiVersion"), *kind = json_object_get(doc, "kind");
    FUZZ_CHECK(json_is_string(av) && strcmp(json_string_value(av), "admission.k8s.io/v1") == 0,
               "accepted another apiVersion");
    FUZZ_CHECK(json_is_string(kind) && strcmp(json_string_value(kind), "AdmissionReview") == 0,
               "accepted another kind");
    json_t *request = json_object_get(doc, "request");
    FUZZ_CHECK(json_is_object(request), "accepted a request that is not an object");
    json_t *u = json_object_get(request, "uid");
    FUZZ_CHECK(json_is_string(u) && strcmp(json_string_value(u), uid) == 0,
               "the webhook would see another uid than the answer's %s", uid);
    FUZZ_CHECK(type_ok(request, "object", JSON_OBJECT, true), "request.object of another type");
    FUZZ_CHECK(type_ok(request, "oldObject", JSON_OBJECT, true),
               "request.oldObject of another type");
    FUZZ_CHECK(type_ok(request, "userInfo", JSON_OBJECT, false),
               "request.userInfo of another type");
    FUZZ_CHECK(type_ok(request, "operation", JSON_STRING, false),
               "request.operation of another type");
    FUZZ_CHECK(type_ok(request, "dryRun", JSON_TRUE, true), "request.dryRun of another type");
    json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    admission(data, size);
    conversion(data, size);
    return 0;
}
