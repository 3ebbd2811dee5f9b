/*
 * selector.h — Kubernetes label and field selectors: parse, match, print,
 * with kube-apiserver's grammar and error messages (k8s.io/apimachinery
 * labels.Parse, fields.ParseSelector).  The host canonicalises and applies
 * selectors with it; the dev server (devserver_filter.h) serves LIST and
 * WATCH selectors with it.
 *
 * Labels: requirements separated by commas, each one of
 *     key            key exists          !key           key does not exist
 *     key=value      key==value          key!=value     (missing key matches !=)
 *     key in (v1,v2)                     key notin (v1,v2) (missing key matches)
 *     key>N  key<N   integer comparison (the label must exist and parse)
 * with optional blanks around tokens.  Keys are qualified names
 * ([prefix/]name, name at most 63 characters of [A-Za-z0-9._-] starting and
 * ending alphanumeric; prefix a DNS subdomain); values at most 63 characters
 * of the same alphabet, possibly empty ("key in ()" is the set {""}).
 * Fields: terms separated by unescaped commas, each `path=value`,
 * `path==value` or `path!=value` at the first unescaped operator; in the
 * value `\,` `\=` `\\` stand for the character after the backslash.  A
 * missing field compares as "".  An empty selector matches everything.
 *
 * Errors are LUNA_EINVAL with kube-apiserver's message text, e.g.
 * "unable to parse requirement: found unexpected token, expected ',' in
 * selector a b", "field label not supported: spec.x".
 *
 * Ownership: a parsed selector is owned by the caller and freed with
 * luna_selector_free.  The lookup callback's results are borrowed for the
 * duration of the call.  Pure functions; no loop use.
 */
#ifndef LUNA_SELECTOR_H
#define LUNA_SELECTOR_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

enum luna_selector_kind { LUNA_SELECTOR_LABELS, LUNA_SELECTOR_FIELDS };

enum luna_selector_op {
    LUNA_SEL_EXISTS,
    LUNA_SEL_NOT_EXISTS,
    LUNA_SEL_EQUALS,
    LUNA_SEL_NOT_EQUALS,
    LUNA_SEL_IN,
    LUNA_SEL_NOT_IN,
    LUNA_SEL_GT,
    LUNA_SEL_LT,
};

struct luna_selector_req {
    char *key;
    enum luna_selector_op op;
    size_t nvalues;
    char **values;  /* sorted, distinct; field values unescaped */
};

struct luna_selector {
    enum luna_selector_kind kind;
    size_t n;
    struct luna_selector_req *reqs;  /* sorted by key, as Kubernetes prints them */
};

/* Returns the value of key (a label key or a dotted field path), or NULL if
 * absent. */
typedef const char *(*luna_selector_lookup)(const char *key, void *ud);

/* Parses text (NULL or blank: the empty selector); field selectors accept
 * any path. */
int luna_selector_parse(const char *text, enum luna_selector_kind kind,
                        struct luna_selector **out, luna_error *err);
/* Parses a field selector whose paths must be in `allowed` (NULL-terminated,
 * borrowed for the call); another path fails with "field label not
 * supported: PATH". */
int luna_selector_parse_fields(const char *text, const char *const *allowed,
                               struct luna_selector **out, luna_error *err);
void luna_selector_free(struct luna_selector *sel);
bool luna_selector_matches(const struct luna_selector *sel, luna_selector_lookup lookup,
                           void *ud);
bool luna_selector_empty(const struct luna_selector *sel);
/* Writes the canonical form ("a=b,c in (x,y)"; field values escaped) into
 * buf; returns the length it needs (like snprintf). */
size_t luna_selector_format(const struct luna_selector *sel, char *buf, size_t size);

#endif
