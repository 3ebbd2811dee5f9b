/*
 * devserver_resources.h — the built-in resources of the pinned Kubernetes
 * release, as a table generated from its kube-apiserver's discovery
 * (devserver_resources.c, written by `make resources`, see
 * spec/kube/kubernetes/resources/main.go).  devserver_types.c registers one
 * type per row, adding what discovery cannot say from small hand-kept
 * tables (field selectors, which kinds answer DELETE with the object, ...).
 *
 * Rows are in kube-apiserver's discovery order: the core group, then the
 * groups by priority, each group's preferred version first.  Everything is
 * static and read-only.
 */
#ifndef LUNA_DEVSERVER_RESOURCES_H
#define LUNA_DEVSERVER_RESOURCES_H

#include <stdbool.h>
#include <stddef.h>

enum luna_ds_verb {
    LUNA_DS_VERB_CREATE = 1 << 0,
    LUNA_DS_VERB_DELETE = 1 << 1,
    LUNA_DS_VERB_DELETECOLLECTION = 1 << 2,
    LUNA_DS_VERB_GET = 1 << 3,
    LUNA_DS_VERB_LIST = 1 << 4,
    LUNA_DS_VERB_PATCH = 1 << 5,
    LUNA_DS_VERB_UPDATE = 1 << 6,
    LUNA_DS_VERB_WATCH = 1 << 7,
};
#define LUNA_DS_VERBS_ALL 0xffu

/* The subresources the dev server implements (and advertises). */
enum luna_ds_sub {
    LUNA_DS_SUB_STATUS = 1 << 0,   /* RESOURCE/status: get, patch, update */
    LUNA_DS_SUB_SCALE = 1 << 1,    /* RESOURCE/scale: autoscaling/v1 Scale */
    LUNA_DS_SUB_TOKEN = 1 << 2,    /* serviceaccounts/token: TokenRequest (devserver_auth) */
};

typedef struct luna_ds_resource_def {
    const char *group, *version, *resource, *singular, *kind;
    bool namespaced;
    const char *shorts, *categories; /* comma-separated, "" for none */
    unsigned verbs;                  /* LUNA_DS_VERB_* kube lists */
    unsigned subs;                   /* LUNA_DS_SUB_* kube lists */
    const char *others;              /* kube's other subresources, not served */
    int storage;                     /* index of the row whose collection this
                                        one shares (its own: the storage version) */
    int keys_first, keys_count;      /* its rows of luna_ds_list_keys */
} luna_ds_resource_def;

/* A list of a kind kube's OpenAPI marks x-kubernetes-list-type: map: its
 * path below the object (field names joined by ".", e.g.
 * "spec.template.spec.containers") and its (first) list-map key. */
typedef struct luna_ds_list_key_def {
    const char *path, *key;
} luna_ds_list_key_def;

extern const luna_ds_list_key_def luna_ds_list_keys[];

extern const luna_ds_resource_def luna_ds_resources[];
extern const size_t luna_ds_resources_len;

#endif
