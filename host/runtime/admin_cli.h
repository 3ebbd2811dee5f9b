/*
 * admin_cli.h — `luna trigger`: the command-line client of the admin
 * endpoints (admin.h) of a running `luna run`.
 *
 *   luna trigger [options] reconcile CONTROLLER KEY...     these keys now
 *   luna trigger [options] reconcile CONTROLLER --all      every cached key
 *   luna trigger [options] reconcile CONTROLLER --selector LABELS
 *   luna trigger [options] pause CONTROLLER
 *   luna trigger [options] resume CONTROLLER
 *   luna trigger [options] list
 *
 * It sends one request to --server (default $LUNA_ADMIN_SERVER, else
 * https://127.0.0.1:8443, the metrics server) with a bearer token: --token,
 * else the content of --token-file, else $LUNA_TOKEN, else the in-cluster
 * service account's token file when it exists (kubectl exec into the pod
 * then needs no flag).  TLS is verified against --certificate-authority
 * (else the system's CAs); --insecure-skip-tls-verify accepts luna's
 * self-signed certificate.  The server's JSON answer goes to stdout.
 *
 * Exit status: 0 on a 2xx answer, 1 on another answer or no answer (the
 * reason on stderr), 2 on a usage error.  Blocking (libcurl easy); runs
 * before and without the event loop.
 */
#ifndef LUNA_ADMIN_CLI_H
#define LUNA_ADMIN_CLI_H

/* argv[0] is "trigger".  Returns the exit status. */
int luna_admin_cli_main(int argc, char **argv);

#endif
