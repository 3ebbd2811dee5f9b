/*
 * devserver_schema.h — the checks a built-in kind's Go type and its
 * OpenAPI definition make of a write body, as kube-apiserver makes them:
 *
 *   - decoding: a value whose JSON type does not fit the field's Go type
 *     is 400 BadRequest with Go's decoder message ("Deployment in version
 *     \"v1\" cannot be handled as a Deployment: json: cannot unmarshal
 *     string into Go struct field DeploymentSpec.spec.replicas of type
 *     int32"); the first such value in document order is named;
 *   - defaults: a field the release marks `+default=` gets its value when
 *     absent (under an object that is present), as kube's defaulters do;
 *   - validation, each failure one cause of a 422 Invalid: a required
 *     field left out ("Required value"; a non-pointer struct is the Go
 *     zero value instead and is descended into), a string outside its
 *     enum ("Unsupported value: \"X\": supported values: ..."), and on
 *     update a change of an immutable field ("field is immutable").
 *     metadata (devserver_validate.c has it) and status (kube resets it on
 *     create and update) are not validated here.
 *
 * The tables are generated from the pinned release's types
 * (devserver_apischema.c, `make apischema`): static data, nothing parsed
 * at start.  A type the tables do not know (a custom resource) passes.
 *
 * Documents are borrowed; defaults change doc in place.  Runs on the loop
 * thread.
 */
#ifndef LUNA_DEVSERVER_SCHEMA_H
#define LUNA_DEVSERVER_SCHEMA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "devserver/devserver_status.h"
#include "devserver/devserver_types.h"

/* What a field holds (its element, for a list or a map). */
enum luna_ds_sch_type {
    LUNA_SCH_STRING, LUNA_SCH_BOOL, LUNA_SCH_INT32, LUNA_SCH_INT64, LUNA_SCH_FLOAT,
    LUNA_SCH_BYTES,       /* []byte: a base64 string */
    LUNA_SCH_STRUCT,      /* luna_ds_sch_structs[ref] */
    LUNA_SCH_TIME,        /* metav1.Time / MicroTime: a string */
    LUNA_SCH_INTORSTRING, /* intstr.IntOrString */
    LUNA_SCH_QUANTITY,    /* resource.Quantity: a string or a number */
    LUNA_SCH_ANY,         /* its own UnmarshalJSON, or not checked */
};

/* REQUIRED: the OpenAPI definition lists it; POINTER: the Go field is a
 * pointer (absent is nil, not the zero value). */
enum { LUNA_SCH_F_LIST = 1, LUNA_SCH_F_MAP = 2, LUNA_SCH_F_REQUIRED = 4, LUNA_SCH_F_POINTER = 8 };

/* Strings are offsets into luna_ds_sch_strings (0 is ""): the tables hold
 * no pointer, so the loader relocates nothing of them at start. */
typedef struct luna_ds_sch_field {
    uint32_t json;       /* JSON name */
    uint32_t go_type;    /* the element's Go type as the decoder names it */
    uint32_t def;        /* +default as JSON text, 0 when none */
    uint8_t type;        /* enum luna_ds_sch_type */
    uint8_t flags;       /* LUNA_SCH_F_* */
    int16_t ref;         /* struct index, or -1 */
    int16_t enum_idx;    /* luna_ds_sch_enums index, or -1 */
} luna_ds_sch_field;

typedef struct luna_ds_sch_struct {
    uint32_t go_name;    /* the Go type's name, for the decoder's message */
    uint32_t first;      /* its fields: luna_ds_sch_fields[first, first + n) */
    uint32_t n_fields;
} luna_ds_sch_struct;

typedef struct luna_ds_sch_enum {
    uint32_t first;      /* luna_ds_sch_enum_values[first, first + n): sorted, */
    uint32_t n;          /* as kube lists them */
} luna_ds_sch_enum;

typedef struct luna_ds_sch_kind {
    uint32_t api_version, kind;
    int32_t root;        /* struct index */
    uint32_t zero_status; /* the Go zero value of its Status as JSON, 0 when it has none */
} luna_ds_sch_kind;

enum luna_ds_sch_how {
    LUNA_SCH_IMMUTABLE, /* ValidateImmutableField */
    LUNA_SCH_LOCKED,    /* unchangeable once `immutable` is true */
};

/* How "field is immutable" shows the new value, as kube's validation
 * that enforces it does (the generator says which does which). */
enum luna_ds_sch_show {
    LUNA_SCH_SHOW_VALUE, /* a string quoted, anything else as its JSON */
    LUNA_SCH_SHOW_NULL,  /* declarative validation: no value, "null" */
    LUNA_SCH_SHOW_GO,    /* an internal struct: JSON keyed by Go names */
};

typedef struct luna_ds_sch_immutable {
    const char *group, *kind, *path; /* path: fields joined with '.' */
    enum luna_ds_sch_how how;
    enum luna_ds_sch_show show;
    const char *go_names;            /* SHOW_GO: "json:Go,...", Go order */
    const char *absent_as;           /* kube's Go default of it left out, or "" */
} luna_ds_sch_immutable;

/* Generated (devserver_apischema.c). */
extern const char luna_ds_sch_strings[];
extern const uint32_t luna_ds_sch_enum_values[];
extern const luna_ds_sch_enum luna_ds_sch_enums[];
extern const luna_ds_sch_field luna_ds_sch_fields[];
extern const luna_ds_sch_struct luna_ds_sch_structs[];
extern const luna_ds_sch_kind luna_ds_sch_kinds[];
extern const size_t luna_ds_sch_n_kinds;
extern const luna_ds_sch_immutable luna_ds_sch_immutables[];
extern const size_t luna_ds_sch_n_immutables;

/* 0 when doc (an object of type t) decodes into t's Go type, else the
 * negative code with st set (400 BadRequest, kube's message).  patch: doc
 * is the patched object of a patch, refused as kube's patcher does (422
 * Invalid, field "patch"). */
int luna_ds_schema_decode(const luna_ds_type *t, const json_t *doc, int patch,
                          luna_ds_status *st);

/* The status kube gives a new object of type t (its Go zero value, as
 * encoding/json writes it: {"loadBalancer":{}} for an Ingress): *out is a
 * new reference the caller owns, or NULL when t's type has no status
 * struct or is not a built-in kind.  LUNA_ENOMEM when out of memory (the
 * caller answers 500 rather than store an object without its status). */
int luna_ds_schema_zero_status(const luna_ds_type *t, json_t **out);

/* Applies t's defaults to doc, then appends to causes (a JSON array of
 * {reason, message, field}) what t's validation finds; old: the stored
 * object an update replaces, NULL on create.  Returns 0, or -1 when out
 * of memory. */
int luna_ds_schema_validate(const luna_ds_type *t, json_t *doc, const json_t *old,
                            json_t *causes);

#endif
