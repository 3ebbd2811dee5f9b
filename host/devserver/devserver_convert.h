/*
 * devserver_convert.h — conversion webhooks, called as kube-apiserver
 * calls them: for a CustomResourceDefinition whose spec.conversion.strategy
 * is Webhook, an object read or written in a version other than the one it
 * is stored in is converted by POSTing a ConversionReview v1 (request.uid,
 * desiredAPIVersion, objects) to spec.conversion.webhook.clientConfig,
 * and the answer is checked as kube's webhookConverter checks it (uid,
 * Success, count, apiVersion and kind, name/namespace/uid unchanged,
 * metadata taken back from the original but for labels and annotations).
 * Strategy None keeps rewriting apiVersion only (luna_ds_types_convert).
 * docs/dev-server.md ("Conversion webhooks") lists what holds.
 *
 * Never blocking the loop, in passes, as admission does
 * (devserver_admission.h).  While a client's request is handled,
 * luna_ds_convert looks the conversion up in the request's answers; an
 * unanswered one is recorded (the document is converted apiVersion-only
 * meanwhile, so reads go on and a list records all of its items), and
 * luna_ds_write_store stores nothing while any is recorded.  The transport
 * then takes the recorded ones as a job (luna_ds_conversion_take), drops
 * the pass's answer, suspends the connection, calls the webhooks (one
 * review per CRD and desired version: a list's items in one review) and
 * handles the request again with the answers.  A write also has the
 * object it is about to store converted back to the request's version
 * before it stores (luna_ds_convert_before_store), so its answer is ready
 * once it has written.  Answers are keyed by the object without its
 * metadata but labels, annotations, namespace and name (not a name made
 * from generateName), so a replay that stamps a new uid or
 * resourceVersion finds them and two objects never share one.
 *
 * Ownership: the conversion state lives in luna_ds (devserver_state.h),
 * freed with luna_ds_conversion_free; its answers are the request's
 * (borrowed).  A taken job is the caller's, freed with
 * luna_ds_convert_job_free (which cancels its call).  Runs on the loop
 * thread.
 */
#ifndef LUNA_DEVSERVER_CONVERT_H
#define LUNA_DEVSERVER_CONVERT_H

#include <jansson.h>
#include <stdbool.h>

#include "devserver/devserver_status.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_types.h"

typedef struct luna_ds luna_ds;
typedef struct luna_ds_convert_job luna_ds_convert_job;

typedef struct luna_ds_conversion {
    bool active;                /* a client's request is being handled */
    json_t *answers;            /* its answered conversions, key -> object (borrowed) or NULL */
    json_t *wanted;             /* this pass's unanswered ones (owned) or NULL */
    const luna_ds_type *want;   /* the request's type: what a write answers in */
    /* A GET of one stored object being converted ("" when not): its
     * storage key and revision, which kube's error names (a conversion
     * failing as the object is read from storage is its storage layer's
     * "corrupt object", answered as an InternalError). */
    char read_key[720];
    unsigned long long read_rv;
} luna_ds_conversion;

/* kube's default (and only) timeout of a conversion webhook call. */
#define LUNA_DS_CONVERSION_TIMEOUT 30

/* Converts *doc (owned; replaced) from type `from` to type `to` (one
 * collection).  0: converted (strategy None, an answer, or no client
 * request: apiVersion only); 1: a webhook must answer first (recorded;
 * *doc is converted apiVersion-only meanwhile); LUNA_ENOMEM. */
int luna_ds_convert(luna_ds *ds, json_t **doc, const luna_ds_type *from, const luna_ds_type *to);
/* Right before a write stores doc (in storage type s): records the
 * conversion of what it stores back to the request's version. */
void luna_ds_convert_before_store(luna_ds *ds, const json_t *doc, const luna_ds_type *s);
/* The object a GET of one object reads from storage (o in type t's
 * storage), for the error of a conversion that fails on it. */
void luna_ds_convert_reading(luna_ds *ds, const luna_ds_type *t, const luna_ds_obj *o);
/* Whether this pass recorded unanswered conversions (nothing is stored). */
bool luna_ds_conversion_pending(const luna_ds *ds);

/* The conversions recorded while handling the last request, or NULL; the
 * caller owns the job. */
luna_ds_convert_job *luna_ds_conversion_take(luna_ds *ds);
/* Converts doc (borrowed) from `from` to `to` against answers (a key ->
 * object map the caller owns): 0 with *out (owned) the converted object;
 * 1 with *job (owned) the call to run into answers first; LUNA_ENOMEM.
 * For callers outside a request's passes (a watch). */
int luna_ds_convert_with(luna_ds *ds, json_t *answers, const json_t *doc, const luna_ds_type *from,
                         const luna_ds_type *to, json_t **out, luna_ds_convert_job **job);
/* Calls the job's webhooks, one review after the other, storing their
 * converted objects into answers (borrowed; it must outlive the job);
 * done(ud, job) runs once, from the loop, never before this returns. */
void luna_ds_convert_job_run(luna_ds *ds, luna_ds_convert_job *job, json_t *answers,
                             void (*done)(void *ud, luna_ds_convert_job *job), void *ud);
/* After done: NULL when every review was answered, else the Status to
 * answer (borrowed from the job; code 500, as kube answers a conversion
 * error). */
const json_t *luna_ds_convert_job_failure(const luna_ds_convert_job *job);
/* Cancels the job's call and frees it (NULL: nothing). */
void luna_ds_convert_job_free(luna_ds_convert_job *job);

/* kube's checks of a CRD's spec.conversion on create and update.  0, or
 * a negative code with st set (422 Invalid). */
int luna_ds_conversion_validate_crd(const json_t *crd, luna_ds_status *st);

void luna_ds_conversion_free(luna_ds_conversion *c);

#endif
