/*
 * devserver.h — `luna dev-server`: an in-memory, Kubernetes-compatible API
 * server for specs, benchmarks and trying controllers without a cluster.
 *
 *   luna dev-server --listen HOST:PORT [--seed FILE]... [--token TOKEN]
 *                   [--tls-cert FILE --tls-key FILE] [--faults SPEC] [--admin]
 *                   [--history N] [--bookmark-interval SECONDS]
 *                   [--dump-on-exit FILE] [--log-level L]
 *
 * Prints one line `listening on http[s]://HOST:PORT` on stdout once it
 * accepts connections, runs until SIGTERM or SIGINT, then (with
 * --dump-on-exit) writes every object as a JSON `kind: List` and exits 0.
 * The parts: devserver_http (transport), devserver_api (the router; REST
 * semantics in devserver_validate, _write, _gc, _list, _continue, _verbs,
 * _seed, with devserver_request and devserver_doc as shared helpers),
 * devserver_store, devserver_types, devserver_watch, devserver_filter,
 * devserver_patch, devserver_apply, devserver_faults, devserver_yaml,
 * devserver_auth (TokenRequest, TokenReview, SubjectAccessReview over RBAC).
 * Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_H
#define LUNA_DEVSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* The subcommand; argv[0] is "dev-server".  Returns the exit code. */
int luna_devserver_main(int argc, char **argv);

struct luna_devserver;

/* The same server inside another command's loop (`luna run --dev-server`):
 * loads the seed files (borrowed), listens on 127.0.0.1 at a free port and
 * writes its URL into url.  token (copied; NULL: none) is the server's own
 * token, as `luna dev-server --token` sets it, except that requests without
 * it are still served: its TokenReview authenticates it (user "admin" in
 * system:masters), which is what lets the runtime's secure /metrics and
 * admin endpoints accept it.  Returns 0 and *out (stop it with
 * luna_devserver_embed_stop before the loop ends), or a negative LUNA_E*
 * code with err set; *failed_seed is then the index of the seed file that
 * could not be loaded (err says what is wrong with it, not its name), or
 * -1 when the failure is the server's own. */
int luna_devserver_embed_start(const char *const *seeds, int nseeds, const char *token,
                               char *url, size_t url_size, struct luna_devserver **out,
                               int *failed_seed, luna_error *err);
/* Stops and frees an embedded server (NULL: nothing). */
void luna_devserver_embed_stop(struct luna_devserver *srv);
/* Seconds between watch BOOKMARKs of servers embedded from now on (0: the
 * default, 60).  `luna test` asks for 0.05 so every informer learns the
 * latest resourceVersion at once (test_control.h: idle). */
void luna_devserver_embed_set_bookmark_interval(double seconds);
/* The latest resourceVersion the embedded server handed out (0: NULL). */
uint64_t luna_devserver_embed_revision(struct luna_devserver *srv);
/* Creates (or replaces) every object of a YAML or JSON text (several
 * documents, `kind: List` too), as --seed does.  0, or a negative LUNA_E*
 * code with err set; documents before the bad one stay. */
int luna_devserver_embed_seed(struct luna_devserver *srv, const char *text, size_t len,
                              luna_error *err);
/* The documents of a YAML or JSON text (several documents allowed; empty
 * ones skipped) as one JSON array text, for `luna test --kube`, which
 * creates them in a real cluster (runtime/test_control.h: `documents`).
 * Returns a malloc'd string the caller frees, or NULL with err set (a
 * syntax error names the line). */
char *luna_devserver_embed_documents(const char *text, size_t len, luna_error *err);
/* False while the server has work of its own scheduled (the garbage
 * collector's delayed orphan check); true for NULL. */
bool luna_devserver_embed_settled(struct luna_devserver *srv);

#endif
