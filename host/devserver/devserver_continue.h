/*
 * devserver_continue.h — LIST continue tokens in kube-apiserver's format:
 * base64 (URL alphabet, no padding) of {"v":"meta.k8s.io/v1","rv":RV,
 * "start":"LASTKEY\u0000"}, so a token from the dev server looks like one
 * from a real server and a client cannot tell them apart.
 * Runs on any thread (no state).
 */
#ifndef LUNA_DEVSERVER_CONTINUE_H
#define LUNA_DEVSERVER_CONTINUE_H

#include <stdint.h>

/* The token for a list at rv whose last returned key is last_key (caller
 * frees), or NULL when out of memory. */
char *luna_ds_continue_encode(uint64_t rv, const char *last_key);

/* Decodes tok: returns 0 with *rv and *start (malloc'd, the key to start
 * after), LUNA_EINVAL when tok is not a valid token, or LUNA_ENOMEM. */
int luna_ds_continue_decode(const char *tok, uint64_t *rv, char **start);

#endif
