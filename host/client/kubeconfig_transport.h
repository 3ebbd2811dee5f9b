/*
 * kubeconfig_transport.h — the checks a kubeconfig cluster's URLs and
 * names get at load time (server, proxy-url, tls-server-name), so a bad one
 * fails the load naming the field, and every URL luna keeps is one that the
 * redaction in base/url.h finds whole (no '/' or space in a password).
 * luna_kubeconfig_log_loaded() (declared in kubeconfig.h) lives here too:
 * the line a loaded configuration is announced with, and its warnings.
 *
 * The checks return NULL when the value is good, else a static string or
 * one of libcurl's (curl_url_strerror) saying why — never the value, which
 * may hold a password.  Uses libcurl's URL API, base/url, base/log.  Runs
 * on any thread (the log function on the loop thread).
 */
#ifndef LUNA_KUBECONFIG_TRANSPORT_H
#define LUNA_KUBECONFIG_TRANSPORT_H

/* server, with its scheme already added: an http or https URL with a host. */
const char *luna_kubeconfig_check_server(const char *url);

/* proxy-url: scheme http, https or socks5 (what client-go accepts), with a
 * host. */
const char *luna_kubeconfig_check_proxy(const char *url);

/* tls-server-name: a DNS name or an IP address (no port, no brackets). */
const char *luna_kubeconfig_check_server_name(const char *name);

#endif
