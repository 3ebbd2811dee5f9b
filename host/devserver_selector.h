/*
 * devserver_selector.h — label and field selectors, parsed and matched as
 * kube-apiserver does (k8s.io/apimachinery labels.Parse, fields.ParseSelector).
 *
 * Labels: comma-separated requirements `k`, `!k`, `k=v`, `k==v`, `k!=v`,
 * `k in (a,b)`, `k notin (a,b)`, `k>N`, `k<N`, with keys and values validated
 * (qualified names, label values).  `!=` and `notin` match objects without
 * the key.  Fields: `path=v`, `path==v`, `path!=v`, with backslash escapes.
 * A selector owns its strings; free with luna_ds_selector_free().  An empty
 * selector (NULL or "") matches everything.  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_SELECTOR_H
#define LUNA_DEVSERVER_SELECTOR_H

#include <jansson.h>
#include <stdbool.h>

typedef struct luna_ds_selector luna_ds_selector;

/* Parses a label selector; *out is NULL for an empty one.  On a syntax or
 * validation error returns -1 and writes kube's message to msg. */
int luna_ds_selector_parse_labels(const char *s, luna_ds_selector **out,
                                  char *msg, size_t msgsize);

/* Parses a field selector.  `allowed` is a NULL-terminated list of field
 * paths the resource supports; another path fails with "field label not
 * supported: PATH". */
int luna_ds_selector_parse_fields(const char *s, const char *const *allowed,
                                  luna_ds_selector **out, char *msg, size_t msgsize);

/* labels: the object's metadata.labels (borrowed, may be NULL). */
bool luna_ds_selector_match_labels(const luna_ds_selector *sel, const json_t *labels);

/* Field value lookup: returns the string form of the field at dotted `path`
 * in the object, or NULL when absent (absent compares as ""). */
typedef const char *(*luna_ds_field_fn)(void *ctx, const char *path);
bool luna_ds_selector_match_fields(const luna_ds_selector *sel, luna_ds_field_fn get,
                                   void *ctx);

/* True if the selector only tests metadata.name / metadata.namespace. */
bool luna_ds_selector_fields_metadata_only(const luna_ds_selector *sel);

void luna_ds_selector_free(luna_ds_selector *sel);

/* What a LIST or WATCH asks for: a namespace (NULL = all) and selectors.
 * The filter owns ns and both selectors; release with
 * luna_ds_filter_clear(). */
struct luna_ds_obj;
typedef struct luna_ds_filter {
    char *ns;
    luna_ds_selector *labels;
    luna_ds_selector *fields;
} luna_ds_filter;

/* True if the object (borrowed) is in the namespace and matches both
 * selectors.  Fields other than metadata.name/namespace are read from the
 * object's JSON. */
bool luna_ds_filter_match(const luna_ds_filter *f, const struct luna_ds_obj *o);
/* True if the filter has a label or field selector. */
bool luna_ds_filter_selects(const luna_ds_filter *f);
void luna_ds_filter_clear(luna_ds_filter *f);

#endif
