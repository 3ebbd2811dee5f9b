/*
 * devserver_list.h — GET on a collection: LIST with label and field
 * selectors, limit/continue paging over a consistent snapshot,
 * KEP-5866 shardSelector (the list's metadata echoes it as
 * shardInfo.selector; the faults can make the server ignore it),
 * resourceVersion and resourceVersionMatch semantics (0 = from the cache,
 * Exact, NotOlderThan, 410 Expired below the history floor, 504 for a
 * version from the future), and WATCH set-up (?watch=true) with bookmarks,
 * sendInitialEvents and timeoutSeconds.  The answers and their messages
 * are kube-apiserver's.
 *
 * A LIST body is built by concatenating the stored objects' bytes.  Runs
 * on the loop thread.
 */
#ifndef LUNA_DEVSERVER_LIST_H
#define LUNA_DEVSERVER_LIST_H

#include "devserver/devserver_filter.h"
#include "devserver/devserver_request.h"
#include "devserver/devserver_status.h"
#include "devserver/devserver_types.h"

typedef struct luna_ds luna_ds;

/* Answers GET on type t's collection in ns (NULL or "": every namespace):
 * a LIST, or with ?watch=true a WATCH. */
void luna_ds_list_serve(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                        luna_ds_response *resp);

/* The request's namespace and label and field selectors as a filter (the
 * caller clears it), with its shardSelector if `shard` (LIST, WATCH and
 * DELETE on the collection, which kube-apiserver serves through a LIST, of a
 * server that serves KEP-5866); 400 on a bad label or field selector, 500
 * on a bad shard selector (as kube-apiserver v1.37). */
int luna_ds_list_filter(const luna_ds_request *req, luna_ds_type *t, const char *ns, bool shard,
                        luna_ds_filter *f, luna_ds_status *st);

#endif
