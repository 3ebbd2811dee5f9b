/*
 * kubeconfig_yaml.h — typed access to a parsed kubeconfig YAML document
 * (libyaml's document API), with errors that name the file, the field path
 * and the problem, as kubectl's decoder reports them:
 *   /home/u/.kube/config: users[0].user.token: expected a string, got a mapping (line 7)
 *   /home/u/.kube/config: clusters[1].cluster.certificate-authority-data: invalid base64
 * and the conversion of a YAML node to JSON (for the exec extension a
 * cluster carries).
 *
 * Rules (sigs.k8s.io/yaml's, for the fields kubeconfig has): a key that
 * appears twice is an error; a plain "", ~ or null is absent; strings are
 * any scalar taken as written, without NUL bytes; booleans are unquoted
 * YAML 1.1 booleans; base64 is standard with padding, CR and LF ignored.
 *
 * Every getter takes the document and the map it reads (borrowed) and
 * returns 0 (the out value set, or left NULL/unchanged when absent) or a
 * negative LUNA_E* code with the document's err set.  Strings and bytes it
 * returns are malloc'd and owned by the caller.  Runs on any thread.
 */
#ifndef LUNA_KUBECONFIG_YAML_H
#define LUNA_KUBECONFIG_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#include "base/error.h"

/* One document being read: path names it in messages (borrowed). */
struct luna_kubeconfig_yaml {
    const char *path;
    yaml_document_t *doc;
    luna_error *err;
};

/* "a mapping", "a list", "a scalar", "a quoted string" or "nothing". */
const char *luna_kubeconfig_yaml_node_kind(const yaml_node_t *n);
/* True for NULL and for a plain scalar YAML reads as null. */
bool luna_kubeconfig_yaml_is_null(const yaml_node_t *n);

/* "FILE: PATH.KEY: expected WANT, got KIND (line N)" (LUNA_EINVAL). */
int luna_kubeconfig_yaml_type_error(struct luna_kubeconfig_yaml *f, const char *path,
                                    const char *key, const char *want, const yaml_node_t *got);
/* "FILE: PATH.KEY: WHAT" (LUNA_EINVAL); key may be NULL. */
int luna_kubeconfig_yaml_field_error(struct luna_kubeconfig_yaml *f, const char *path,
                                     const char *key, const char *what);

/* *out = the value for key in map (borrowed from the document), NULL when
 * absent or null. */
int luna_kubeconfig_yaml_get(struct luna_kubeconfig_yaml *f, yaml_node_t *map, const char *path,
                             const char *key, yaml_node_t **out);
/* The same, and the value must be a mapping / a list. */
int luna_kubeconfig_yaml_map(struct luna_kubeconfig_yaml *f, yaml_node_t *map, const char *path,
                             const char *key, yaml_node_t **out);
int luna_kubeconfig_yaml_seq(struct luna_kubeconfig_yaml *f, yaml_node_t *map, const char *path,
                             const char *key, yaml_node_t **out);
/* A copy of a scalar's text (NULL when out of memory). */
char *luna_kubeconfig_yaml_scalar_dup(const yaml_node_t *n);
/* A string field (*out stays NULL when absent). */
int luna_kubeconfig_yaml_string(struct luna_kubeconfig_yaml *f, yaml_node_t *map,
                                const char *path, const char *key, char **out);
/* A boolean field (*out unchanged when absent). */
int luna_kubeconfig_yaml_bool(struct luna_kubeconfig_yaml *f, yaml_node_t *map,
                              const char *path, const char *key, bool *out);
/* A base64 field, decoded (*out stays NULL when absent or empty).  The
 * encoded text is wiped before it is freed: it may be key material. */
int luna_kubeconfig_yaml_base64(struct luna_kubeconfig_yaml *f, yaml_node_t *map,
                                const char *path, const char *key, unsigned char **out,
                                size_t *out_len);

/* Node n as compact JSON in *out (caller frees): plain null/true/false and
 * numbers keep their type, everything else is a string.  Fails with
 * "PATH: cannot be converted to JSON" beyond 64 levels, 1 MiB, or a
 * non-string key. */
int luna_kubeconfig_yaml_to_json(struct luna_kubeconfig_yaml *f, yaml_node_t *n, const char *path,
                                 char **out);

#endif
