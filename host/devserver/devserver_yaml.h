/*
 * devserver_yaml.h — YAML (and JSON, a YAML subset) documents as jansson values.
 *
 * Used by the dev server for --seed manifests and application/apply-patch+yaml
 * bodies.  libyaml parses; scalars are typed the way sigs.k8s.io/yaml (YAML
 * 1.1) types them: plain null/~ → null, true/false/yes/no/on/off → bool,
 * integers and floats → numbers, everything quoted or else → string.
 * Aliases to earlier anchors are expanded, within bounds (errors, not
 * gigabytes): at most MAX_DEPTH levels of nesting after expansion, and at
 * most 10000 values copied through aliases or as many as the text itself
 * holds, whichever is more ("billion laughs").  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_YAML_H
#define LUNA_DEVSERVER_YAML_H

#include <jansson.h>
#include <stddef.h>

#include "base/error.h"

/* Parses every document in buf[0..len) into a new JSON array (empty
 * documents are skipped).  Returns NULL with err set on a syntax error (the
 * message names the line).  The caller owns the result (json_decref). */
json_t *luna_ds_yaml_load(const char *buf, size_t len, luna_error *err);

#endif
