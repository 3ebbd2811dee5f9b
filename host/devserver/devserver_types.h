/*
 * devserver_types.h — the resource types the dev server serves, and the
 * discovery documents built from them.
 *
 * A type is one served group/version/resource (GVR), registered in one
 * server's registry (luna_ds_types).  Built-in types are registered by
 * luna_ds_types_new(); a CustomResourceDefinition adds one
 * type per served version (luna_ds_types_crd_sync).  All versions of one
 * group/resource share one collection (objects stored in the storage
 * version); luna_ds_types_convert() rewrites a document between versions
 * (apiVersion, and the field renames between core/v1 and events.k8s.io/v1
 * Events).
 *
 * Types live as long as their registry: a deleted CRD's types are marked
 * !served and revived if the CRD comes back, so pointers held by history
 * events and watchers never dangle.  A type is found by find() if and only
 * if it is served.  The registry owns its types and their collections
 * (luna_ds_types_free() frees them; every watch must be gone by then).
 * Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_TYPES_H
#define LUNA_DEVSERVER_TYPES_H

#include <jansson.h>
#include <stdbool.h>

#include "devserver/devserver_status.h"

struct luna_ds_coll;
struct luna_ds_store;
typedef struct luna_ds_types luna_ds_types;

enum luna_ds_conv { LUNA_DS_CONV_NONE, LUNA_DS_CONV_EVENTS_V1 };

typedef struct luna_ds_type {
    char *group;          /* "" for the core group */
    char *version;
    char *api_version;    /* "v1" or "GROUP/VERSION" */
    char *resource;       /* plural, lower case */
    char *singular;
    char *kind;
    char *list_kind;
    json_t *short_names;  /* array of strings (owned) */
    json_t *categories;   /* array of strings (owned) */
    bool namespaced;
    bool has_status;      /* serves RESOURCE/status */
    bool has_generation;  /* metadata.generation tracks spec changes */
    bool return_deleted;  /* DELETE answers the object instead of a Status */
    bool custom;          /* a custom resource (from a CRD) */
    /* kube-apiserver's update strategy, per kind (false, the zero value, is
     * what custom resources get):
     * unconditional_update: a PUT without metadata.resourceVersion
     *   overwrites the current object (AllowUnconditionalUpdate); when
     *   false it is 422 "must be specified for an update";
     * create_on_update: a PUT of a missing object creates it
     *   (AllowCreateOnUpdate); when false it is 404. */
    bool unconditional_update;
    bool create_on_update;
    bool served;
    bool storage;         /* this version is the collection's storage version */
    enum luna_ds_conv conv;
    const char *const *fields; /* extra field-selector paths (NULL-terminated) */
    char *crd_name;       /* for custom types: the CRD's metadata.name */
    json_t *schema;       /* custom types: the version's openAPIV3Schema (owned), or NULL */
    struct luna_ds_coll *coll; /* shared by the versions of one group/resource */
    struct luna_ds_type *next;
} luna_ds_type;

/* A registry with the built-in types, whose collections come from store
 * (borrowed; it must outlive the registry).  NULL when out of memory. */
luna_ds_types *luna_ds_types_new(struct luna_ds_store *store);
/* Frees every type and collection (no type pointer is valid after). */
void luna_ds_types_free(luna_ds_types *reg);

/* The served type for a GVR, or NULL. */
luna_ds_type *luna_ds_types_find(const luna_ds_types *reg, const char *group,
                                 const char *version, const char *resource);
/* The served type for apiVersion + kind, or NULL. */
luna_ds_type *luna_ds_types_find_kind(const luna_ds_types *reg, const char *api_version,
                                      const char *kind);
/* The storage-version type of t's collection (t itself when t is it). */
luna_ds_type *luna_ds_types_storage_of(const luna_ds_types *reg, luna_ds_type *t);
/* The storage type of core/v1 namespaces. */
luna_ds_type *luna_ds_types_namespaces(const luna_ds_types *reg);
/* All types, served or not (iterate with ->next). */
luna_ds_type *luna_ds_types_all(const luna_ds_types *reg);

/* Discovery documents (new references, caller owns):
 * /api, /apis, /apis/GROUP (NULL if unknown), /api/v1 and /apis/G/V
 * (NULL if the group/version is not served). */
json_t *luna_ds_types_api_versions(const char *server_address);
json_t *luna_ds_types_group_list(const luna_ds_types *reg);
json_t *luna_ds_types_group(const luna_ds_types *reg, const char *group);
json_t *luna_ds_types_resource_list(const luna_ds_types *reg, const char *group,
                                    const char *version);

/* OpenAPI v3 as far as kubectl needs it to choose server-side field
 * validation: /openapi/v3 (the index of group-versions) and one document
 * per group-version (`gvpath` "api/v1" or "apis/G/V"; NULL if not served)
 * whose PATCH operations declare x-kubernetes-group-version-kind and the
 * fieldValidation parameter.  No schemas: kubectl then falls back to its
 * compiled-in types for strategic merge patches. */
json_t *luna_ds_types_openapi_index(const luna_ds_types *reg);
json_t *luna_ds_types_openapi_gv(const luna_ds_types *reg, const char *gvpath);

/* Checks a CRD document (422 Invalid on a bad one, without side effects);
 * returns 0 or a negative LUNA_E* code with st set. */
int luna_ds_types_crd_validate(const luna_ds_types *reg, const json_t *crd, luna_ds_status *st);
/* Serves the CRD's versions (after validate succeeded); versions no longer
 * listed stop being served.  Returns 0, or LUNA_ENOMEM when a version
 * could not be registered (the others are). */
int luna_ds_types_crd_sync(luna_ds_types *reg, const json_t *crd);
/* Stops serving every version of the CRD named `crd_name`. */
void luna_ds_types_crd_remove(luna_ds_types *reg, const char *crd_name);

/* Rewrites doc (in place) from type `from`'s version to type `to`'s
 * version; both must share a collection. */
void luna_ds_types_convert(json_t *doc, const luna_ds_type *from, const luna_ds_type *to);

#endif
