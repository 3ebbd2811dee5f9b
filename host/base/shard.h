/*
 * shard.h — shard selectors of KEP-5866 (server-side sharded list and
 * watch, kube-apiserver alpha since v1.36 behind the ShardedListAndWatch
 * feature gate): the hash, the ranges, their text, and an equal split of
 * the hash space among replicas.  The reflector sends a selector as the
 * `shardSelector` query parameter and filters on arrival when the server
 * did not apply it; the dev server applies it to LIST, WATCH and DELETE
 * on a collection.
 *
 * The hash is 64-bit FNV-1a over the bytes of the field's string value
 * (metadata.uid or metadata.namespace; an absent field hashes as "", so a
 * cluster-scoped object sharded by namespace lands where "" does), exactly
 * as the API server computes it, so both sides agree bit for bit.
 *
 * Text (the API server's grammar, k8s.io/apiserver/pkg/sharding in
 * v1.37, a CEL expression of one shape):
 *     shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')
 *       || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')
 * one or more shardRange(FIELD, 'START', 'END') calls joined by `||` (and
 * parenthesised at will), blanks between tokens; FIELD is
 * object.metadata.uid or object.metadata.namespace, the same in every
 * term; START and END are quoted strings of `0x` and exactly 16 lower-case
 * hex digits, or '0x10000000000000000' (2^64) — the server refuses '0x0'
 * and upper case, and so does this parser; START < END.  A term selects
 * the objects whose hash of FIELD lies in [START, END); the selector is
 * their union.  NULL or "" is no selector; blanks only are an error, as on
 * the server.
 *
 * Printing gives the canonical text, the server's own String() form (and
 * what it echoes in a list's metadata.shardInfo.selector): terms in the
 * order parsed, `, ` and ` || ` between tokens.  parse(print(s)) == s.
 *
 * Split: N distinct member identities, sorted bytewise, member i owns
 * [floor(i·2^64/N), floor((i+1)·2^64/N)); the N ranges cover the space once
 * and every member computes the same split from the same member set.
 *
 * Errors are LUNA_EINVAL with the API server's message (the server
 * prefixes "invalid shard selector: "), syntax errors "CEL parse error: "
 * and our own words; or LUNA_ENOMEM.
 *
 * Ownership: a selector is one allocation owned by the caller, freed with
 * luna_shard_free (NULL is the empty selector: everything matches).  Pure
 * functions; no loop use.
 */
#ifndef LUNA_SHARD_H
#define LUNA_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

enum luna_shard_field { LUNA_SHARD_UID, LUNA_SHARD_NAMESPACE };

/* One term: hash(field) in [start, last]; `last` is inclusive so that the
 * top of the space (END = 2^64) needs no 65th bit. */
struct luna_shard_range {
    enum luna_shard_field field;
    uint64_t start;
    uint64_t last;
};

struct luna_shard_selector {
    size_t n;                          /* >= 1 */
    struct luna_shard_range ranges[];  /* in the order written */
};

/* 64-bit FNV-1a of len bytes. */
uint64_t luna_shard_hash(const void *data, size_t len);

/* Parses text.  NULL or "" gives *out = NULL (no selector) and 0. */
int luna_shard_parse(const char *text, struct luna_shard_selector **out, luna_error *err);

/* A selector of n ranges copied from r (n >= 1, each start <= last, one
 * field for all). */
int luna_shard_new(const struct luna_shard_range *r, size_t n, struct luna_shard_selector **out,
                   luna_error *err);

struct luna_shard_selector *luna_shard_copy(const struct luna_shard_selector *s);
void luna_shard_free(struct luna_shard_selector *s);

/* Writes the canonical text into buf (NUL-terminated, truncated to size)
 * and returns its length, as snprintf does; "" for NULL. */
size_t luna_shard_print(const struct luna_shard_selector *s, char *buf, size_t size);
/* The canonical text, malloc'd (caller frees); NULL on ENOMEM or s NULL. */
char *luna_shard_text(const struct luna_shard_selector *s);

/* True if the object with this namespace and uid (NULL: absent, hashed as
 * "") is selected; always true for s NULL. */
bool luna_shard_matches(const struct luna_shard_selector *s, const char *namespace_,
                        const char *uid);
bool luna_shard_equal(const struct luna_shard_selector *a, const struct luna_shard_selector *b);

/* Member i's range of an equal split among n members (i < n, n >= 1). */
struct luna_shard_range luna_shard_split_range(size_t i, size_t n, enum luna_shard_field f);

/* The selector of member `self` among `members` (n distinct, non-empty
 * identities in any order; borrowed): its range in the split by sorted
 * identity.  LUNA_EINVAL if self is not a member, an identity repeats or
 * is empty, or n is 0. */
int luna_shard_split(const char *const *members, size_t n, const char *self,
                     enum luna_shard_field f, struct luna_shard_selector **out, luna_error *err);

#endif
