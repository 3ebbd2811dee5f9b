/*
 * devserver_doc.h — helpers on the dev server's JSON documents (jansson
 * values) that every verb shares: metadata access, the resourceVersion
 * stamp, kube's key order, uids and timestamps, keys, and an object read
 * back in another version of its type.
 *
 * Documents are borrowed unless a function says it returns a new one (the
 * caller owns that).  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_DOC_H
#define LUNA_DEVSERVER_DOC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devserver/devserver_store.h"
#include "devserver/devserver_types.h"

typedef struct luna_ds luna_ds;

/* The current time as RFC 3339 ("2006-01-02T15:04:05Z"). */
void luna_ds_doc_now(char out[32]);
/* A random (version 4) uid. */
void luna_ds_doc_new_uid(char out[37]);

/* o[k] when it is a string, else NULL (borrowed from o). */
const char *luna_ds_doc_str(const json_t *o, const char *k);
/* doc.metadata, created as {} when absent or not an object (borrowed);
 * NULL when out of memory (jansson's setters ignore a NULL object). */
json_t *luna_ds_doc_meta(json_t *doc);
/* Sets metadata.resourceVersion to rv. */
void luna_ds_doc_set_rv(json_t *doc, uint64_t rv);
/* Puts kind, apiVersion, metadata first, metadata's keys in kube's order
 * and the label and annotation maps in key order, as kube writes them. */
void luna_ds_doc_normalize(json_t *doc);
/* True if the array arr holds the string s. */
bool luna_ds_doc_has_string(const json_t *arr, const char *s);

/* The stored object as a new document in type t's version (caller owns);
 * NULL when out of memory. */
json_t *luna_ds_doc_as(luna_ds *ds, luna_ds_type *t, const luna_ds_obj *o);
/* The store key of name in ns ("ns/name", or "name" for a cluster-scoped
 * type). */
void luna_ds_doc_key(char *out, size_t n, const luna_ds_type *t, const char *ns,
                     const char *name);

#endif
