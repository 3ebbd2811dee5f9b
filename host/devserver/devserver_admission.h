/*
 * devserver_admission.h — admission webhooks, called as kube-apiserver
 * calls them: the MutatingWebhookConfigurations and then the
 * ValidatingWebhookConfigurations the server stores, each in order of
 * configuration name and then of its webhooks, on every client's create,
 * update (subresources included) and delete.  AdmissionReview v1 over
 * HTTP(S) (devserver_hook_client), rules, namespaceSelector,
 * objectSelector, matchPolicy, failurePolicy, timeoutSeconds,
 * sideEffects with dryRun, reinvocationPolicy IfNeeded, JSONPatch answers,
 * warnings and denials worded as kube words them.  docs/dev-server.md
 * ("Admission webhooks") lists what holds and what does not.
 *
 * Never blocking the loop, in two passes.  A verb calls luna_ds_admit
 * right before its first change to the store, with the object it is
 * about to write.  When no webhook matches, the write goes on.  When some
 * do, the admission is captured (a luna_ds_admit_job, taken by the
 * transport with luna_ds_admission_take) and the verb stops with nothing
 * changed; the transport suspends the client's connection, runs the job's
 * calls on the loop (luna_ds_admit_job_run), and either answers the
 * denial or handles the request again with the job as its verdict
 * (luna_ds_admission_replay): luna_ds_admit then finds its answer (the
 * same operation on the same object at the same resourceVersion) and the
 * write goes on with the mutated object.  If the object changed meanwhile
 * the admission is captured again, as kube re-runs admission when its
 * optimistic update retries.
 *
 * Ownership: the admission state lives in luna_ds (devserver_state.h),
 * freed with luna_ds_admission_free.  A taken job is the caller's, freed
 * with luna_ds_admit_job_free (which cancels its calls).  Runs on the loop
 * thread.
 */
#ifndef LUNA_DEVSERVER_ADMISSION_H
#define LUNA_DEVSERVER_ADMISSION_H

#include <jansson.h>
#include <stdbool.h>

#include "devserver/devserver_hook_client.h"
#include "devserver/devserver_request.h"
#include "devserver/devserver_status.h"
#include "devserver/devserver_types.h"

typedef struct luna_ds luna_ds;
typedef struct luna_ds_admit_job luna_ds_admit_job;

typedef struct luna_ds_admission {
    const luna_ds_request *req;      /* the client's request being handled, or NULL
                                        (seeds, the server's own writes: not admitted) */
    luna_ds_admit_job *capture;      /* admissions found while handling req (owned until taken) */
    luna_ds_admit_job *verdict;      /* the answered job being replayed (borrowed) */
    luna_ds_hook_client *client;     /* created at the first call (owned) */
    json_t *services;                /* "NAMESPACE/NAME" -> "HOST:PORT" (--webhook-service; owned) */
} luna_ds_admission;

enum luna_ds_admit_op { LUNA_DS_ADMIT_CREATE, LUNA_DS_ADMIT_UPDATE, LUNA_DS_ADMIT_DELETE };

/* One admission, as the verb sees it. */
typedef struct luna_ds_admit_attrs {
    const luna_ds_type *t;           /* the request's resource */
    enum luna_ds_admit_op op;
    const char *ns;                  /* "" when cluster-scoped */
    const char *name;                /* "" for a create by generateName */
    const char *sub;                 /* NULL, "status" or "scale" */
    const char *kind_api_version;    /* the object's kind when not t's (a Scale): */
    const char *kind;                /*   "autoscaling/v1", "Scale"; else NULL */
    const json_t *old;               /* the stored object (borrowed), NULL on create */
} luna_ds_admit_attrs;

/* Right before a verb's write: 0, and *doc (owned; NULL for a delete) is
 * what to write, replaced by the mutated object when webhooks changed it;
 * or a negative code with st set: the admission was captured (the
 * transport takes it) or failed. */
int luna_ds_admit(luna_ds *ds, const luna_ds_admit_attrs *a, json_t **doc, luna_ds_status *st);

/* The admission captured while handling the last request, or NULL; the
 * caller owns it. */
luna_ds_admit_job *luna_ds_admission_take(luna_ds *ds);
/* The next luna_ds_api_handle replays job (borrowed while it runs);
 * NULL ends the replay. */
void luna_ds_admission_replay(luna_ds *ds, luna_ds_admit_job *job);

/* Starts the job's calls; done(ud, job) runs once when every record is
 * answered (never before this returns).  0, or a negative code when not
 * even the first call can start (the job then holds the failure: done
 * is still called, from the loop). */
int luna_ds_admit_job_run(luna_ds *ds, luna_ds_admit_job *job,
                          void (*done)(void *ud, luna_ds_admit_job *job), void *ud);
/* After done: NULL when the request may go on, else the Status to answer
 * (borrowed from the job) with its HTTP code in *code. */
const json_t *luna_ds_admit_job_denial(const luna_ds_admit_job *job, int *code);
/* The webhooks' warnings, in order (borrowed array of strings). */
const json_t *luna_ds_admit_job_warnings(const luna_ds_admit_job *job);
/* Cancels the job's calls and frees it (NULL: nothing). */
void luna_ds_admit_job_free(luna_ds_admit_job *job);

/* --webhook-service NAMESPACE/NAME=HOST:PORT: where a clientConfig.service
 * is reached (the dev server has no cluster network).  0 or a negative
 * code with a message in err. */
int luna_ds_admission_map_service(luna_ds *ds, const char *spec, char *err, size_t errn);

/* Where a webhook's clientConfig (admission or conversion) sends a call:
 * base, the URL (a Service's path included), and connect_to, curl's
 * CONNECT_TO for a Service mapped by --webhook-service ("" for a url).
 * LUNA_DS_HOOK_TARGET_NONE: neither url nor service; _UNMAPPED: a Service
 * the dev server cannot reach, why saying so and how to map it. */
enum { LUNA_DS_HOOK_TARGET_OK, LUNA_DS_HOOK_TARGET_NONE, LUNA_DS_HOOK_TARGET_UNMAPPED };
int luna_ds_hook_target(luna_ds *ds, const json_t *cc, char *base, size_t base_size,
                        char *connect_to, size_t connect_size, char *why, size_t why_size);

/* kube's checks of a webhook configuration (t: mutating or validating) on
 * create and update, as far as the dev server calls them: sideEffects,
 * admissionReviewVersions, clientConfig, and the enums; a webhook with
 * matchConditions is refused, as the dev server cannot evaluate CEL.
 * 0, or a negative code with st set (422 Invalid). */
int luna_ds_admission_validate_config(const luna_ds_type *t, const json_t *doc, luna_ds_status *st);

/* Standard base64 (padding optional; also the URL alphabet), as kube reads
 * a caBundle or a patch: a malloc'd buffer with a NUL after its *len
 * bytes, or NULL when s is not base64 or memory is out. */
char *luna_ds_b64decode(const char *s, size_t *len);

void luna_ds_admission_free(luna_ds_admission *a);

#endif
