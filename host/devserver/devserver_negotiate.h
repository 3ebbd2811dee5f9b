/*
 * devserver_negotiate.h — what a GET, LIST or WATCH answers, from its
 * Accept header, as kube-apiserver v1.37 negotiates it; and the
 * PartialObjectMetadata conversions it may ask for.
 *
 * The Accept header is parsed as the API server's goautoneg parses it:
 * clauses split at ',', parameters at ';' (one '=' each, q read as a
 * number), clauses ordered by goautoneg's comparison (q, then concrete
 * types before wildcards; ties keep their order).  The first clause, in
 * that order, that names one of the server's media types (application/
 * json, application/yaml, application/vnd.kubernetes.protobuf; or a
 * wildcard) with parameters the endpoint allows wins:
 *   - as=, g=, v= ask for a conversion: PartialObjectMetadata and
 *     PartialObjectMetadataList (any media type) and Table (JSON or YAML)
 *     in meta.k8s.io/v1 or v1beta1; anything else is not allowed;
 *   - stream= must be "watch", on a media type that streams (not YAML);
 *   - sv= must be "v1";
 *   - a custom resource without a conversion is served as JSON or YAML
 *     only (kube's StandardSerializers).
 * No header: JSON.  No clause allowed: 406 NotAcceptable, "only the
 * following media types are accepted: application/json, application/yaml,
 * application/vnd.kubernetes.protobuf".  A WATCH whose winner cannot
 * stream (YAML) is refused the same way with the streaming types.  Before
 * all this, a built-in type's route (go-restful) refuses a header naming
 * none of its media types (luna_ds_negotiate_route).
 *
 * The dev server writes JSON whatever media type won (every client that
 * accepts protobuf or YAML from kube accepts JSON too) and serves a Table
 * request the plain object; PartialObjectMetadata it converts as kube
 * does: {"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/<v>",
 * "metadata": the object's metadata}, and lists into a
 * PartialObjectMetadataList with the list's resourceVersion, continue and
 * remainingItemCount.  A list asked for as PartialObjectMetadata, or one
 * object as PartialObjectMetadataList, is a 406 naming the Go type kube
 * would have held ("*core.ConfigMapList", "*unstructured.Unstructured"; a
 * custom object asked for as a list is a 500, "content is not a list").
 * A WATCH asked for PartialObjectMetadataList ends at its first object or
 * bookmark without sending it (kube fails to encode it and ends the
 * stream).  Each was checked against kube-apiserver v1.37.2.
 *
 * Pure functions; nothing is kept between calls.
 */
#ifndef LUNA_DEVSERVER_NEGOTIATE_H
#define LUNA_DEVSERVER_NEGOTIATE_H

#include <jansson.h>
#include <stdbool.h>

#include "base/textbuf.h"
#include "devserver/devserver_status.h"
#include "devserver/devserver_types.h"

typedef enum luna_ds_media {
    LUNA_DS_MEDIA_JSON,
    LUNA_DS_MEDIA_YAML,
    LUNA_DS_MEDIA_PROTOBUF,
} luna_ds_media;

typedef enum luna_ds_as {
    LUNA_DS_AS_OBJECT,        /* no conversion */
    LUNA_DS_AS_PARTIAL,       /* PartialObjectMetadata */
    LUNA_DS_AS_PARTIAL_LIST,  /* PartialObjectMetadataList */
    LUNA_DS_AS_TABLE,         /* Table (served as the object by the dev server) */
} luna_ds_as;

typedef struct luna_ds_output {
    luna_ds_media media;
    luna_ds_as as;
    const char *meta_version;  /* "v1" or "v1beta1" when converting (static) */
} luna_ds_output;

/* The check go-restful makes first on a built-in type's route (kube serves
 * custom resources outside go-restful): some clause's media type, its
 * parameters cut off, is "*" "/" "*" or exactly one the route produces
 * (application/json, application/yaml, application/vnd.kubernetes.protobuf;
 * no subtype wildcard).  Else a 406 "406: Not Acceptable\n\nAvailable
 * representations: ..." listing the route's types (a collection's route
 * adds the two ";stream=watch" ones) with empty details.  No header passes. */
int luna_ds_negotiate_route(const char *accept, const luna_ds_type *t, bool collection,
                            luna_ds_status *st);
/* Negotiates accept (NULL or "": JSON) for type t.  0 with *out set, or a
 * negative code with a 406 in st. */
int luna_ds_negotiate(const char *accept, const luna_ds_type *t, luna_ds_output *out,
                      luna_ds_status *st);
/* For a WATCH, after luna_ds_negotiate: a 406 in st if out's media type
 * cannot stream, else 0. */
int luna_ds_negotiate_stream(const luna_ds_output *out, luna_ds_status *st);

/* The error kube answers when the conversion does not fit the result: a
 * list asked for as one object (406), or one object as a list (406; for a
 * custom resource, whose Go type passes for a list, a 500 "content is not a
 * list" without a reason).  Returns the negative code. */
int luna_ds_negotiate_mismatch(const luna_ds_type *t, bool list, luna_ds_status *st);

/* doc (an object; consumed) as a PartialObjectMetadata of meta.k8s.io/
 * version: a new document, NULL when out of memory. */
json_t *luna_ds_partial_object(json_t *doc, const char *version);
/* The same from a stored object's compact JSON bytes, appended to b
 * without parsing the rest of the object (its metadata comes first):
 * false (nothing appended) if json has no metadata object. */
bool luna_ds_partial_bytes(const char *json, size_t len, const char *version,
                           struct luna_textbuf *b);

#endif
