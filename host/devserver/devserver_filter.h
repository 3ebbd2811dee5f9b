/*
 * devserver_filter.h — what a dev-server LIST or WATCH selects: a namespace,
 * a label and a field selector (host/base/selector.h, which gives
 * kube-apiserver's grammar and messages) and a KEP-5866 shard selector
 * (host/base/shard.h: FNV-1a 64 of metadata.uid or metadata.namespace in
 * one of its ranges), matched against stored objects.
 * Labels are read from the object's metadata.labels; metadata.name and
 * metadata.namespace from the object, other field paths from its JSON
 * (strings, booleans and integers; anything else is absent, which compares
 * as "").  Runs on the loop thread.
 *
 * The filter owns ns, the selectors and the shard selector with its
 * canonical text (NULL: none); release them with luna_ds_filter_clear().
 */
#ifndef LUNA_DEVSERVER_FILTER_H
#define LUNA_DEVSERVER_FILTER_H

#include <stdbool.h>

#include "base/selector.h"
#include "base/shard.h"

struct luna_ds_obj;
typedef struct luna_ds_filter {
    char *ns;                       /* NULL or "": every namespace */
    struct luna_selector *labels;
    struct luna_selector *fields;
    struct luna_shard_selector *shard;
    char *shard_text;               /* its canonical text, for shardInfo */
} luna_ds_filter;

/* True if the object (borrowed) is in the namespace and matches the
 * selectors and the shard selector. */
bool luna_ds_filter_match(const luna_ds_filter *f, const struct luna_ds_obj *o);
/* True if the filter has a non-empty label, field or shard selector. */
bool luna_ds_filter_selects(const luna_ds_filter *f);
void luna_ds_filter_clear(luna_ds_filter *f);

#endif
