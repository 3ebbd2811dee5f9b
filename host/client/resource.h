/*
 * resource.h — a Kubernetes API resource (what discovery maps a kind to)
 * and the URL paths that address it.
 *
 *   core group:  /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUB]]
 *   named group: /apis/GROUP/VERSION[/namespaces/NS]/RESOURCE[/NAME[/SUB]]
 *
 * Pure functions and plain data; no loop use.  A luna_resource owns its
 * strings (luna_resource_clear frees them).
 */
#ifndef LUNA_RESOURCE_H
#define LUNA_RESOURCE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

struct luna_resource {
    char *group;     /* "" for the core group */
    char *version;   /* "v1" */
    char *resource;  /* plural, lowercase: "configmaps" */
    char *kind;      /* "ConfigMap" */
    bool namespaced;
    bool has_status; /* serves the status subresource */
};

/* Deep copy; dst is overwritten (not cleared first). */
int luna_resource_copy(struct luna_resource *dst, const struct luna_resource *src);
void luna_resource_clear(struct luna_resource *r);


/* Writes the path for (namespace, name, subresource), any of which may be
 * NULL or "".  A namespace given for a cluster-scoped resource is ignored.
 * Names and namespaces are percent-encoded.  Returns the length, or
 * LUNA_ETOOBIG if it does not fit. */
int luna_resource_path(const struct luna_resource *r, const char *namespace_,
                       const char *name, const char *subresource, char *buf, size_t size);

/* Splits "v1/ConfigMap" or "apps/v1/Deployment" or "example.com/v1/Widget"
 * into group, version and kind (copied into the three buffers). */
int luna_resource_parse_kind(const char *text, char *group, size_t gsize, char *version, size_t vsize,
                    char *kind, size_t ksize, luna_error *err);

/* Percent-encodes s for a URL path segment or query value into buf.
 * Returns the length needed (like snprintf). */
size_t luna_resource_url_escape(const char *s, char *buf, size_t size);

#endif
