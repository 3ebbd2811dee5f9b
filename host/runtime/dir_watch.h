/*
 * dir_watch.h — notices changes to a directory of controller files and
 * reports them once things settle (debounced).
 *
 * Uses: inotify (Linux), libev.  Runs on the loop thread.
 *
 * Covers both ways files change: plain edits, creations, deletions and
 * renames in a normal directory, and the kubelet's ConfigMap volume
 * update, which writes a new timestamped directory and then atomically
 * renames a `..data_tmp` symlink onto `..data` (the visible files are
 * symlinks through `..data`).  Every event restarts the debounce timer; the
 * callback runs once the directory has been quiet for `debounce` seconds.
 *
 * Ownership: the watch copies the path; free with luna_dir_watch_free.
 */
#ifndef LUNA_DIR_WATCH_H
#define LUNA_DIR_WATCH_H

#include "base/error.h"

struct luna_dir_watch;

int luna_dir_watch_new(const char *dir, double debounce, void (*changed)(void *ud), void *ud,
                       struct luna_dir_watch **out, luna_error *err);
void luna_dir_watch_free(struct luna_dir_watch *w);

#endif
