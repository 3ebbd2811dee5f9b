/*
 * kubeconfig_impl.h — the private part of a loaded kubeconfig
 * (struct luna_kubeconfig.priv): the credentials to send and the sources
 * that renew them.  Only the kubeconfig*.c files include this.
 *
 * Owned by its luna_kubeconfig and freed (secrets wiped) with it.  token,
 * username and password are secrets: they never appear in a message.
 */
#ifndef LUNA_KUBECONFIG_AUTH_H
#define LUNA_KUBECONFIG_AUTH_H

struct luna_token_file;
struct luna_exec_plugin;

struct luna_kubeconfig_auth {
    char *where;                /* "FILE: users[N].user" for messages */
    char *token;                /* static token (also the tokenFile fallback) */
    char *username;
    char *password;
    struct luna_token_file *token_file;
    unsigned token_generation;
    struct luna_exec_plugin *exec;
    unsigned exec_checked;      /* generation whose client cert was checked */
};

#endif
