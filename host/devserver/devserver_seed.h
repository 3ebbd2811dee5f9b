/*
 * devserver_seed.h — objects in and out of the dev server in bulk: seed
 * documents (--seed manifests) written as if a client had created them,
 * and the dump of every object (GET /luna/v1/dump, --dump-on-exit).
 * Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_SEED_H
#define LUNA_DEVSERVER_SEED_H

#include <jansson.h>

#include "base/error.h"

typedef struct luna_ds luna_ds;

/* Creates (or, if it exists, replaces) one object from a seed document
 * (borrowed); creates its namespace if missing ("default" when the object
 * names none).  A `kind: List` or `*List` document seeds each item.
 * Returns 0 or a negative LUNA_E* code with err set. */
int luna_ds_seed_load(luna_ds *ds, const json_t *doc, luna_error *err);

/* Every served object, as a `kind: List` (caller owns); NULL when out of
 * memory. */
json_t *luna_ds_seed_dump(luna_ds *ds);

#endif
