/*
 * fuzz_input.h — what every libFuzzer target in spec/fuzz/ shares: a cursor
 * over the fuzzer's bytes that hands out control bytes from the front (the
 * options of a run, the points where an input is split into chunks), and
 * the check that stops a run when a property the code promises fails.
 *
 * The cursor borrows the fuzzer's buffer; fuzz_cstr() returns a malloc'd
 * NUL-terminated copy the caller frees.  Single-threaded, no global state.
 */
#ifndef LUNA_FUZZ_INPUT_H
#define LUNA_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fuzz_input {
    const uint8_t *p;
    size_t n;
} fuzz_input;

/* The next control byte (0 once the input is used up). */
static inline uint8_t fuzz_byte(fuzz_input *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

/* The next control pair of bytes, little-endian. */
static inline uint16_t fuzz_u16(fuzz_input *in)
{
    uint16_t lo = fuzz_byte(in);
    return (uint16_t)(lo | (uint16_t)fuzz_byte(in) << 8);
}

/* A NUL-terminated copy of len bytes (the caller frees it); aborts when out
 * of memory, which under the fuzzer's RSS limit is a finding. */
static inline char *fuzz_cstr(const void *data, size_t len)
{
    char *s = malloc(len + 1);
    if (!s)
        abort();
    if (len)
        memcpy(s, data, len);
    s[len] = '\0';
    return s;
}

/* Splits the rest of the input at the first `sep`: the part before it in
 * *a (and *alen), the part after in *b; without a separator everything is
 * *a and *b is empty.  Both borrowed from the input. */
static inline void fuzz_split(const fuzz_input *in, const char *sep, const uint8_t **a,
                              size_t *alen, const uint8_t **b, size_t *blen)
{
    size_t sl = strlen(sep);
    *a = in->p;
    *alen = in->n;
    *b = in->p + in->n;
    *blen = 0;
    for (size_t i = 0; sl <= in->n && i <= in->n - sl; i++) {
        if (memcmp(in->p + i, sep, sl) == 0) {
            *alen = i;
            *b = in->p + i + sl;
            *blen = in->n - i - sl;
            return;
        }
    }
}

/* A broken promise of the code under test: report and abort (libFuzzer
 * saves the input as a crash). */
#define FUZZ_CHECK(cond, ...)                                                    \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
            abort();                                                             \
        }                                                                        \
    } while (0)

/* FNV-1a, to compare event sequences between two ways of feeding input. */
static inline uint64_t fuzz_hash(uint64_t h, const void *data, size_t len)
{
    const uint8_t *b = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}
#define FUZZ_HASH_INIT 14695981039346656037ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
