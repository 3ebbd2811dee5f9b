/* controller/spec.c — see controller/spec.h.
 *
 * One concept over ~900 lines: the one reader of luna.controller{},
 * each field's check beside its field.
 */
#include "controller/spec.h"

#include <lauxlib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cron.h"
#include "base/selector.h"

#define SPEC_MT "luna.controller"

#define MAX_RESYNC 31536000.0
#define MAX_INSTRUCTIONS 1e12
#define MAX_SECONDS 86400.0
#define MAX_DELAY 1e6
#define MAX_QPS 1e6
#define MAX_BURST 1e6

/* Registry key of the last refused spec: {message=, field=}. */
static char last_error_key;

/* A validation failure: the message and the field's path. */
struct check {
    char msg[512];
    char field[128];
};

static bool fail(struct check *ck, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(struct check *ck, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ck->msg, sizeof ck->msg, fmt, ap);
    va_end(ap);
    snprintf(ck->field, sizeof ck->field, "%s", field ? field : "");
    return false;
}

/* ---- names ---------------------------------------------------------------- */

static const char *const top_fields[] = {
    "name", "watch", "owns", "watches", "reconcile", "workers", "resync", "rate_limit",
    "indexes", "predicates", "keep_managed_fields", "limits", "every", "jitter",
    "priority_queue",
    /* checked and kept by luna.controller in Lua (lua/luna/webhook.lua):
     * the host reads webhooks through the loader, not the spec */
    "webhooks", NULL,
};
static const char *const source_fields[] = { "namespace", "labels", "fields", "map",
                                             "metadata_only", NULL };
static const char *const limit_fields[] = { "instructions", "seconds", "memory", NULL };
static const char *const rate_limit_fields[] = { "base_delay", "max_delay", "qps", "burst", NULL };

void luna_controller_spec_list_fields(void (*fn)(void *ud, const char *group, const char *field),
                                      void *ud)
{
    static const struct { const char *group; const char *const *fields; } groups[] = {
        { "spec", top_fields },
        { "spec.source", source_fields },
        { "spec.limits", limit_fields },
        { "spec.rate_limit", rate_limit_fields },
    };
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (const char *const *f = groups[g].fields; *f; f++)
            fn(ud, groups[g].group, *f);
}

static const char *suggest(const char *const *known, const char *s, char *buf, size_t size);

static bool in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return true;
    return false;
}

/* Edit distance (insert, delete, substitute, swap of neighbours), for
 * short names; larger than any useful bound for long ones. */
static size_t distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 40 || m > 40)
        return 99;
    size_t d[41][41];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m];
}

const char *luna_controller_spec_suggest(const char *const *known, const char *s, char *buf,
                                        size_t size)
{
    return suggest(known, s, buf, size);
}

/* " (did you mean 'x'?)" for the known name nearest to s, or "". */
static const char *suggest(const char *const *known, const char *s, char *buf, size_t size)
{
    const char *best = NULL;
    size_t best_d = 99;
    for (; *known; known++) {
        size_t d = distance(s, *known);
        if (d < best_d) {
            best_d = d;
            best = *known;
        }
    }
    size_t len = strlen(s);
    size_t bound = len <= 3 ? 1 : len <= 6 ? 2 : 3;
    if (!best || best_d > bound) {
        buf[0] = '\0';
        return buf;
    }
    snprintf(buf, size, " (did you mean '%s'?)", best);
    return buf;
}

/* The key at idx as text for a message (numbers and strings; other types
 * by name), without converting the key in place. */
static const char *key_text(lua_State *L, int idx, char *buf, size_t size)
{
    switch (lua_type(L, idx)) {
    case LUA_TSTRING:
        snprintf(buf, size, "%.100s", lua_tostring(L, idx));
        break;
    case LUA_TNUMBER:
        snprintf(buf, size, "%.14g", lua_tonumber(L, idx));
        break;
    default:
        snprintf(buf, size, "(a %s)", luaL_typename(L, idx));
    }
    return buf;
}

static bool is_dns_subdomain(const char *s, size_t len)
{
    if (len == 0 || len > 253)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !(i > 0 && i + 1 < len && (c == '-' || c == '.')))
            return false;
    }
    return true;
}

static bool is_dns_label(const char *s, size_t len)
{
    return len <= 63 && is_dns_subdomain(s, len) && !memchr(s, '.', len);
}

static bool is_index_name(const char *s, size_t len)
{
    if (len == 0 || len > 63)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

/* "v1/Kind" or "group/version/Kind": group of letters, digits, dots and
 * dashes; version "v" and letters or digits; Kind a capital letter, then
 * letters or digits. */
static bool parse_kind(const char *text, size_t len, struct luna_source_spec *src)
{
    const char *parts[3];
    size_t lens[3];
    int n = 0;
    const char *p = text, *end = text + len;
    while (n < 3) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        parts[n] = p;
        lens[n] = slash ? (size_t)(slash - p) : (size_t)(end - p);
        n++;
        if (!slash)
            break;
        p = slash + 1;
    }
    if (n < 2 || parts[n - 1] + lens[n - 1] != end)
        return false;
    const char *g = n == 3 ? parts[0] : "", *v = parts[n - 2], *k = parts[n - 1];
    size_t gl = n == 3 ? lens[0] : 0, vl = lens[n - 2], kl = lens[n - 1];
    if ((n == 3 && gl == 0) || gl >= sizeof src->group || vl < 2 || vl >= sizeof src->version ||
        kl == 0 || kl >= sizeof src->kind || v[0] != 'v' || !(k[0] >= 'A' && k[0] <= 'Z'))
        return false;
    for (size_t i = 0; i < gl; i++) {
        char c = g[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-'))
            return false;
    }
    for (size_t i = 1; i < vl; i++) {
        char c = v[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return false;
    }
    for (size_t i = 1; i < kl; i++) {
        char c = k[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return false;
    }
    memcpy(src->group, g, gl);
    src->group[gl] = '\0';
    memcpy(src->version, v, vl);
    src->version[vl] = '\0';
    memcpy(src->kind, k, kl);
    src->kind[kl] = '\0';
    return true;
}

/* ---- the userdata ------------------------------------------------------ */

static void spec_release(lua_State *L, struct luna_controller_spec *spec)
{
    for (size_t i = 0; i < spec->nsources; i++) {
        struct luna_source_spec *s = &spec->sources[i];
        free(s->kind_text);
        free(s->namespace_);
        free(s->labels);
        free(s->fields);
        luaL_unref(L, LUA_REGISTRYINDEX, s->map_ref);
    }
    free(spec->sources);
    for (size_t i = 0; i < spec->nindexes; i++) {
        free(spec->indexes[i].name);
        luaL_unref(L, LUA_REGISTRYINDEX, spec->indexes[i].fn_ref);
    }
    free(spec->indexes);
    luaL_unref(L, LUA_REGISTRYINDEX, spec->reconcile_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, spec->predicates_ref);
    free(spec->name);
    free(spec->every_cron);
    memset(spec, 0, sizeof *spec);
    spec->reconcile_ref = spec->predicates_ref = LUA_NOREF;
}

static int spec_gc(lua_State *L)
{
    struct luna_controller_spec *spec = lua_touserdata(L, 1);
    if (spec)
        spec_release(L, spec);
    return 0;
}

const struct luna_controller_spec *luna_controller_spec_get(lua_State *L, int idx)
{
    void *p = lua_touserdata(L, idx);
    if (!p || !lua_getmetatable(L, idx))
        return NULL;
    luaL_getmetatable(L, SPEC_MT);
    bool same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same ? p : NULL;
}

struct luna_watchdog_limits luna_controller_spec_limits(lua_State *L,
                                                        const struct luna_controller_spec *spec)
{
    struct luna_watchdog_limits own = { 0 };
    if (spec->limits_set & LUNA_SPEC_LIMIT_INSTRUCTIONS)
        own.instructions = spec->limits.instructions;
    if (spec->limits_set & LUNA_SPEC_LIMIT_SECONDS)
        own.seconds = spec->limits.seconds;
    /* the validation already kept them under the state's; the watchdog
     * applies the ceilings again at every guard */
    struct luna_watchdog_limits state = luna_watchdog_get_config(L).limits;
    return luna_watchdog_limits_under(&state, &own);
}

/* ---- reading the script's table (raw reads only) ------------------------ */

/* Pushes t[k] read raw; returns its type. */
static int raw_field(lua_State *L, int t, const char *k)
{
    lua_pushstring(L, k);
    lua_rawget(L, t);
    return lua_type(L, -1);
}

static char *dup(lua_State *L, const char *s, size_t len)
{
    char *d = malloc(len + 1);
    if (!d)
        luaL_error(L, "out of memory");
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

/* Checks every key of the table at t against known (string keys only;
 * allow_one: the integer key 1 too). */
static bool known_keys(lua_State *L, int t, const char *const *known, bool allow_one,
                       const char *where, struct check *ck)
{
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
        if (lua_type(L, -2) == LUA_TSTRING && in_list(known, lua_tostring(L, -2)))
            continue;
        if (allow_one && lua_type(L, -2) == LUA_TNUMBER && lua_tonumber(L, -2) == 1)
            continue;
        char key[128], hint[64] = "";
        key_text(L, -2, key, sizeof key);
        if (lua_type(L, -2) == LUA_TSTRING)
            suggest(known, key, hint, sizeof hint);
        char field[256];
        if (where)
            snprintf(field, sizeof field, "%.100s.%s", where, key);
        else
            snprintf(field, sizeof field, "%s", key);
        lua_pop(L, 2);
        if (where)
            return fail(ck, field, "controller field '%s' has unknown key '%s'%s", where, key,
                        hint);
        return fail(ck, field, "controller has unknown field '%s'%s", key, hint);
    }
    return true;
}

/* A label name: 1..63 characters, alphanumeric at both ends, '-', '_'
 * and '.' between. */
static bool is_label_name(const char *s, size_t len)
{
    if (len == 0 || len > 63)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && !(i > 0 && i + 1 < len && (c == '-' || c == '_' || c == '.')))
            return false;
    }
    return true;
}

/* A label key ([prefix/]name, the prefix a DNS subdomain) or value (empty
 * or a label name), or a field selector's key and value. */
static bool valid_selector_pair(enum luna_selector_kind kind, const char *k, size_t klen,
                                const char *v, size_t vlen)
{
    if (kind == LUNA_SELECTOR_LABELS) {
        const char *slash = memchr(k, '/', klen);
        if (slash && !is_dns_subdomain(k, (size_t)(slash - k)))
            return false;
        const char *name = slash ? slash + 1 : k;
        if (!is_label_name(name, klen - (size_t)(name - k)))
            return false;
        return vlen == 0 || is_label_name(v, vlen);
    }
    if (klen == 0 || klen > 253)
        return false;
    for (size_t i = 0; i < klen; i++) {
        char c = k[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_'))
            return false;
    }
    for (size_t i = 0; i < vlen; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c <= ' ' || c == ',' || c == '=' || c == '!' || c == 0x7f)
            return false;
    }
    return vlen <= 1024;
}

struct label_pair {
    const char *k, *v;
};

static int compare_pairs(const void *a, const void *b)
{
    return strcmp(((const struct label_pair *)a)->k, ((const struct label_pair *)b)->k);
}

/* The selector at the top of the stack (a string, or a table of string
 * keys to string values, joined as "k=v" in key order) into *out. */
static bool read_selector(lua_State *L, const char *field, enum luna_selector_kind kind,
                          char **out, struct check *ck)
{
    int t = lua_gettop(L);
    char text[LUNA_SPEC_MAX_SELECTOR];
    text[0] = '\0';
    if (lua_type(L, t) == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, t, &len);
        if (len >= sizeof text)
            return fail(ck, field, "controller field '%s' is too long (at most %zu bytes)",
                        field, sizeof text - 1);
        if (memchr(s, '\0', len))
            return fail(ck, field, "controller field '%s' holds a NUL byte", field);
        memcpy(text, s, len + 1);
    } else if (lua_type(L, t) == LUA_TTABLE) {
        struct label_pair pairs[64];
        size_t n = 0;
        for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING) {
                lua_pop(L, 2);
                return fail(ck, field, "controller field '%s' must map strings to strings", field);
            }
            if (n == sizeof pairs / sizeof pairs[0]) {
                lua_pop(L, 2);
                return fail(ck, field, "controller field '%s' has more than %zu entries", field,
                            sizeof pairs / sizeof pairs[0]);
            }
            /* both strings stay referenced by the table, which is on the stack */
            size_t klen, vlen;
            pairs[n].k = lua_tolstring(L, -2, &klen);
            pairs[n].v = lua_tolstring(L, -1, &vlen);
            if (!valid_selector_pair(kind, pairs[n].k, klen, pairs[n].v, vlen)) {
                lua_pop(L, 2);
                return fail(ck, field, "controller field '%s': '%.64s' = '%.64s' is not a valid "
                            "%s", field, pairs[n].k, pairs[n].v,
                            kind == LUNA_SELECTOR_LABELS ? "label key and value"
                                                         : "field selector key and value");
            }
            n++;
        }
        qsort(pairs, n, sizeof pairs[0], compare_pairs);
        size_t len = 0;
        for (size_t i = 0; i < n; i++) {
            int w = snprintf(text + len, sizeof text - len, "%s%s=%s", i ? "," : "", pairs[i].k,
                             pairs[i].v);
            if (w < 0 || (size_t)w >= sizeof text - len)
                return fail(ck, field, "controller field '%s' is too long (at most %zu bytes)",
                            field, sizeof text - 1);
            len += (size_t)w;
        }
    } else if (!lua_isnil(L, t)) {
        return fail(ck, field, "controller field '%s' must be a selector string or a table of "
                               "strings", field);
    }
    if (text[0]) {
        struct luna_selector *sel = NULL;
        luna_error err = { 0 };
        if (luna_selector_parse(text, kind, &sel, &err) < 0)
            return fail(ck, field, "controller field '%s': %s", field, err.msg);
        luna_selector_free(sel);
    }
    *out = dup(L, text, strlen(text));
    return true;
}

/* Reads the source description at idx (a kind string or a table) into the
 * next source of spec. */
static bool read_source(lua_State *L, int idx, enum luna_source_role role, const char *field,
                        struct luna_controller_spec *spec, struct check *ck)
{
    if (spec->nsources >= LUNA_SPEC_MAX_SOURCES)
        return fail(ck, field, "controller has more than %d sources (watch, owns, watches)",
                    LUNA_SPEC_MAX_SOURCES);
    struct luna_source_spec *src = &spec->sources[spec->nsources++];
    src->role = role;
    src->map_ref = LUA_NOREF;
    int top = lua_gettop(L);
    int type = lua_type(L, idx);
    if (type == LUA_TSTRING) {
        lua_pushvalue(L, idx);
    } else if (type == LUA_TTABLE) {
        if (!known_keys(L, idx, source_fields, true, field, ck))
            return false;
        lua_rawgeti(L, idx, 1);
    } else {
        return fail(ck, field, "controller field '%s' must be a kind string or a table", field);
    }
    size_t len = 0;
    const char *kind = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
    if (!kind || !parse_kind(kind, len, src)) {
        char shown[128];
        key_text(L, -1, shown, sizeof shown);
        lua_settop(L, top);
        return fail(ck, field, "controller field '%s': invalid kind \"%s\": want \"v1/Kind\" "
                               "or \"group/version/Kind\"", field, kind ? shown : shown);
    }
    src->kind_text = dup(L, kind, len);
    lua_settop(L, top);
    char sub[160];
    if (type == LUA_TTABLE) {
        snprintf(sub, sizeof sub, "%s.namespace", field);
        int t = raw_field(L, idx, "namespace");
        if (t == LUA_TSTRING) {
            size_t nlen;
            const char *ns = lua_tolstring(L, -1, &nlen);
            if (!is_dns_label(ns, nlen)) {
                lua_settop(L, top);
                return fail(ck, sub, "controller field '%s' must be a namespace name "
                                     "(a lowercase DNS label)", sub);
            }
            src->namespace_ = dup(L, ns, nlen);
        } else if (t != LUA_TNIL) {
            lua_settop(L, top);
            return fail(ck, sub, "controller field '%s' must be a string", sub);
        }
        lua_settop(L, top);
        snprintf(sub, sizeof sub, "%s.labels", field);
        raw_field(L, idx, "labels");
        bool ok = read_selector(L, sub, LUNA_SELECTOR_LABELS, &src->labels, ck);
        lua_settop(L, top);
        if (!ok)
            return false;
        snprintf(sub, sizeof sub, "%s.fields", field);
        raw_field(L, idx, "fields");
        ok = read_selector(L, sub, LUNA_SELECTOR_FIELDS, &src->fields, ck);
        lua_settop(L, top);
        if (!ok)
            return false;
        snprintf(sub, sizeof sub, "%s.map", field);
        t = raw_field(L, idx, "map");
        if (t != LUA_TNIL && role != LUNA_SOURCE_WATCHES) {
            lua_settop(L, top);
            return fail(ck, sub, "controller field '%s': a map function only applies to "
                                 "watches", sub);
        }
        if (t != LUA_TNIL && t != LUA_TFUNCTION) {
            lua_settop(L, top);
            return fail(ck, sub, "controller field '%s' must be a function", sub);
        }
        if (t == LUA_TFUNCTION)
            src->map_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        lua_settop(L, top);
        snprintf(sub, sizeof sub, "%s.metadata_only", field);
        t = raw_field(L, idx, "metadata_only");
        src->metadata_only = lua_toboolean(L, -1);
        lua_settop(L, top);
        if (t != LUA_TNIL && t != LUA_TBOOLEAN)
            return fail(ck, sub, "controller field '%s' must be a boolean (true: cache "
                                 "apiVersion, kind and metadata only)", sub);
    }
    if (!src->labels)
        src->labels = dup(L, "", 0);
    if (!src->fields)
        src->fields = dup(L, "", 0);
    if (role == LUNA_SOURCE_WATCHES && src->map_ref == LUA_NOREF)
        return fail(ck, field, "controller field '%s' needs a 'map' function", field);
    return true;
}

/* The list at t: checks it is one (keys 1..n), returns n or -1. */
static int list_length(lua_State *L, int t, const char *field, int max, struct check *ck)
{
    if (lua_type(L, t) != LUA_TTABLE) {
        fail(ck, field, "controller field '%s' must be a list", field);
        return -1;
    }
    size_t n = lua_objlen(L, t), keys = 0;
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
        lua_Number k = lua_type(L, -2) == LUA_TNUMBER ? lua_tonumber(L, -2) : 0;
        if (k < 1 || k > (lua_Number)n || k != floor(k) || ++keys > n) {
            lua_pop(L, 2);
            fail(ck, field, "controller field '%s' must be a list (keys 1 to n only)", field);
            return -1;
        }
    }
    if ((lua_Number)n > max) {
        fail(ck, field, "controller field '%s' has more than %d entries", field, max);
        return -1;
    }
    return (int)n;
}

/* Reads the number at the top if present: false (with ck set) if it is
 * not a finite number in [lo, hi]. */
static bool number_in(lua_State *L, const char *field, double lo, double hi, const char *what,
                      double *out, bool *present, struct check *ck)
{
    *present = !lua_isnil(L, -1);
    if (!*present)
        return true;
    double v = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : NAN;
    if (!(v >= lo && v <= hi))
        return fail(ck, field, "controller field '%s' must be %s", field, what);
    *out = v;
    return true;
}

/* One budget of `limits`: the script's value v (NaN if not a number)
 * against the operator's ceiling (the state's setting, 0: none, then the
 * sanity bound max).  A controller lowers its budgets, never removes or
 * raises them: 0 is refused (it meant "unlimited" before), so is anything
 * above the ceiling, with the ceiling and the flag that sets it. */
static bool limit_in(const char *field, const char *flag, const char *type, double v,
                     double ceiling, double max, double *out, struct check *ck)
{
    double hi = ceiling > 0 ? ceiling : max;
    char bound[96];
    if (ceiling > 0)
        snprintf(bound, sizeof bound, "%.15g, the ceiling %s sets", hi, flag);
    else
        snprintf(bound, sizeof bound, "%.15g (%s is 0: no ceiling but this)", hi, flag);
    if (v > 0 && v <= hi) {
        *out = v;
        return true;
    }
    if (v == 0)
        return fail(ck, field, "controller field '%s' must be a number > 0 and <= %s; 0 does "
                               "not mean unlimited: a controller's limits can lower its budgets, "
                               "never remove them (only the operator can, with %s 0)",
                    field, bound, flag);
    if (v > hi && ceiling > 0 && v <= max)
        return fail(ck, field, "controller field '%s' must be a number > 0 and <= %s, not "
                               "%.15g: a controller's limits can lower its budgets, never raise "
                               "them", field, bound, v);
    if (strcmp(type, "number") != 0)
        return fail(ck, field, "controller field '%s' must be a number > 0 and <= %s, not a %s",
                    field, bound, type);
    return fail(ck, field, "controller field '%s' must be a number > 0 and <= %s", field, bound);
}

static bool read_limits(lua_State *L, int ctl, struct luna_controller_spec *spec,
                        struct check *ck)
{
    int top = lua_gettop(L);
    int t = raw_field(L, ctl, "limits");
    if (t == LUA_TNIL) {
        lua_settop(L, top);
        return true;
    }
    if (t != LUA_TTABLE) {
        lua_settop(L, top);
        return fail(ck, "limits", "controller field 'limits' must be a table");
    }
    int lt = lua_gettop(L);
    bool ok = known_keys(L, lt, limit_fields, false, "limits", ck);
    /* the operator's flags, already applied to this state */
    struct luna_watchdog_limits ceiling = luna_watchdog_get_config(L).limits;
    static const struct {
        const char *key, *field, *flag;
        unsigned bit;
        double max;
    } budgets[] = {
        { "instructions", "limits.instructions", "--reconcile-instruction-limit",
          LUNA_SPEC_LIMIT_INSTRUCTIONS, MAX_INSTRUCTIONS },
        { "seconds", "limits.seconds", "--reconcile-time-limit", LUNA_SPEC_LIMIT_SECONDS,
          MAX_SECONDS },
    };
    for (size_t i = 0; ok && i < sizeof budgets / sizeof budgets[0]; i++) {
        int vt = raw_field(L, lt, budgets[i].key);
        double v = vt == LUA_TNUMBER ? lua_tonumber(L, -1) : NAN;
        lua_pop(L, 1);
        if (vt == LUA_TNIL)
            continue;
        double *out = budgets[i].bit == LUNA_SPEC_LIMIT_INSTRUCTIONS ? &spec->limits.instructions
                                                                      : &spec->limits.seconds;
        double cap = budgets[i].bit == LUNA_SPEC_LIMIT_INSTRUCTIONS ? ceiling.instructions
                                                                     : ceiling.seconds;
        ok = limit_in(budgets[i].field, budgets[i].flag, lua_typename(L, vt), v, cap,
                      budgets[i].max, out, ck);
        if (ok)
            spec->limits_set |= budgets[i].bit;
    }
    if (ok) {
        /* A script may lower its memory cap, never raise it past the
         * operator's (watchdog.h, rule 2). */
        struct luna_watchdog_config cfg = luna_watchdog_get_config(L);
        size_t mem_ceiling = cfg.account_memory ? cfg.account_memory : cfg.memory;
        double max_mib = mem_ceiling ? (double)mem_ceiling / 1048576.0 : 1e6;
        char what[160];
        snprintf(what, sizeof what, "a number of MiB > 0 and <= %g (%s)", max_mib,
                 cfg.account_memory ? "--controller-memory-limit"
                 : cfg.memory       ? "--lua-memory-limit"
                                    : "no cap is set");
        double mib = 0;
        bool present = false;
        raw_field(L, lt, "memory");
        ok = number_in(L, "limits.memory", 0, max_mib, what, &mib, &present, ck);
        if (ok && present && !(mib > 0))
            ok = fail(ck, "limits.memory", "controller field 'limits.memory' must be %s", what);
        if (ok && present) {
            spec->memory = (size_t)(mib * 1048576.0);
            spec->limits_set |= LUNA_SPEC_LIMIT_MEMORY;
        }
    }
    lua_settop(L, top);
    return ok;
}

static bool read_rate_limit(lua_State *L, int ctl, struct luna_controller_spec *spec,
                            struct check *ck)
{
    struct luna_ratelimit_config *cfg = &spec->rate_limit;
    luna_ratelimit_config_init(cfg, LUNA_RATELIMIT_DEFAULT);
    int top = lua_gettop(L);
    int t = raw_field(L, ctl, "rate_limit");
    if (t == LUA_TNIL) {
        lua_settop(L, top);
        return true;
    }
    if (t != LUA_TTABLE) {
        lua_settop(L, top);
        return fail(ck, "rate_limit", "controller field 'rate_limit' must be a table");
    }
    int rt = lua_gettop(L);
    if (!known_keys(L, rt, rate_limit_fields, false, "rate_limit", ck)) {
        lua_settop(L, top);
        return false;
    }
    struct {
        const char *key, *field, *what;
        double lo, hi, *out;
    } fields[] = {
        { "base_delay", "rate_limit.base_delay", "a number of seconds from 0 to 1e6", 0,
          MAX_DELAY, &cfg->base_delay },
        { "max_delay", "rate_limit.max_delay", "a number of seconds from 0 to 1e6", 0, MAX_DELAY,
          &cfg->max_delay },
        { "qps", "rate_limit.qps", "a number > 0 and <= 1e6", 1e-9, MAX_QPS, &cfg->qps },
        { "burst", "rate_limit.burst", "an integer from 1 to 1e6", 1, MAX_BURST, &cfg->burst },
    };
    bool ok = true, present;
    for (size_t i = 0; ok && i < sizeof fields / sizeof fields[0]; i++) {
        raw_field(L, rt, fields[i].key);
        ok = number_in(L, fields[i].field, fields[i].lo, fields[i].hi, fields[i].what,
                       fields[i].out, &present, ck);
        lua_pop(L, 1);
    }
    lua_settop(L, top);
    if (ok && cfg->burst != floor(cfg->burst))
        return fail(ck, "rate_limit.burst", "controller field 'rate_limit.burst' must be an "
                                            "integer from 1 to 1e6");
    if (ok && cfg->base_delay > cfg->max_delay)
        return fail(ck, "rate_limit.base_delay", "controller field 'rate_limit.base_delay' "
                    "(%g s) must not exceed max_delay (%g s)", cfg->base_delay, cfg->max_delay);
    return ok;
}

static bool read_indexes(lua_State *L, int ctl, struct luna_controller_spec *spec,
                         struct check *ck)
{
    int top = lua_gettop(L);
    int t = raw_field(L, ctl, "indexes");
    if (t == LUA_TNIL) {
        lua_settop(L, top);
        return true;
    }
    if (t != LUA_TTABLE) {
        lua_settop(L, top);
        return fail(ck, "indexes", "controller field 'indexes' must be a table");
    }
    int it = lua_gettop(L);
    size_t n = 0;
    for (lua_pushnil(L); lua_next(L, it); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TFUNCTION) {
            lua_settop(L, top);
            return fail(ck, "indexes", "controller field 'indexes' must map index names to "
                                       "functions");
        }
        size_t len;
        const char *name = lua_tolstring(L, -2, &len);
        if (!is_index_name(name, len)) {
            lua_settop(L, top);
            return fail(ck, "indexes", "controller field 'indexes': index name '%.64s' must be "
                        "1 to 63 letters, digits, '_', '-' or '.'", name);
        }
        if (++n > LUNA_SPEC_MAX_INDEXES) {
            lua_settop(L, top);
            return fail(ck, "indexes", "controller field 'indexes' has more than %d entries",
                        LUNA_SPEC_MAX_INDEXES);
        }
    }
    spec->indexes = calloc(n ? n : 1, sizeof *spec->indexes);
    if (!spec->indexes)
        return luaL_error(L, "out of memory");
    for (lua_pushnil(L); lua_next(L, it); lua_pop(L, 1)) {
        struct luna_index_spec *ix = &spec->indexes[spec->nindexes++];
        ix->fn_ref = LUA_NOREF;
        size_t len;
        const char *name = lua_tolstring(L, -2, &len);
        ix->name = dup(L, name, len);
        lua_pushvalue(L, -1);
        ix->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_settop(L, top);
    return true;
}

static bool read_predicates(lua_State *L, int ctl, struct luna_controller_spec *spec,
                            struct check *ck)
{
    int top = lua_gettop(L);
    if (raw_field(L, ctl, "predicates") == LUA_TNIL) {
        lua_settop(L, top);
        return true;
    }
    int pt = lua_gettop(L);
    int n = list_length(L, pt, "predicates", LUNA_SPEC_MAX_PREDICATES, ck);
    if (n < 0) {
        lua_settop(L, top);
        return false;
    }
    lua_createtable(L, n, 0); /* the private copy */
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, pt, i);
        if (!lua_isfunction(L, -1)) {
            const char *type = luaL_typename(L, -1);
            lua_settop(L, top);
            return fail(ck, "predicates", "controller field 'predicates' must be a list of "
                        "functions (predicates[%d] is a %s)", i, type);
        }
        lua_rawseti(L, -2, i);
    }
    spec->npredicates = (size_t)n;
    if (n > 0)
        spec->predicates_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, top);
    return true;
}

#define EVERY_WHAT "a number of seconds (1 to 31536000) or a cron schedule (\"*/5 * * * *\")"

/* every = seconds | "cron", jitter = 0..1 (only with every).  Raw reads:
 * the string is taken as it is, never through tostring. */
static bool read_every(lua_State *L, int ctl, struct luna_controller_spec *spec,
                       struct check *ck)
{
    int top = lua_gettop(L);
    int t = raw_field(L, ctl, "every");
    if (t == LUA_TNUMBER) {
        double v = lua_tonumber(L, -1);
        lua_settop(L, top);
        if (!(v >= 1 && v <= MAX_RESYNC))
            return fail(ck, "every", "controller field 'every' must be " EVERY_WHAT);
        spec->every = v;
    } else if (t == LUA_TSTRING) {
        size_t len = 0;
        const char *text = lua_tolstring(L, -1, &len);
        luna_error err = { 0 };
        if (len > LUNA_CRON_MAX_TEXT || memchr(text, '\0', len)) {
            lua_settop(L, top);
            return fail(ck, "every", "controller field 'every' must be " EVERY_WHAT
                        ": a schedule of at most %d bytes", LUNA_CRON_MAX_TEXT);
        }
        if (luna_cron_parse(text, &spec->cron, &err) < 0 ||
            luna_cron_next(&spec->cron, 0) < 0) {
            lua_settop(L, top);
            return fail(ck, "every", "controller field 'every' must be " EVERY_WHAT ": %s",
                        err.msg[0] ? err.msg : "the schedule never runs");
        }
        spec->every_cron = dup(L, text, len);
        lua_settop(L, top);
    } else if (t != LUA_TNIL) {
        lua_settop(L, top);
        return fail(ck, "every", "controller field 'every' must be " EVERY_WHAT);
    } else {
        lua_settop(L, top);
    }
    bool present = false;
    raw_field(L, ctl, "jitter");
    bool ok = number_in(L, "jitter", 0, 1, "a fraction of the period from 0 to 1",
                        &spec->jitter, &present, ck);
    lua_settop(L, top);
    if (ok && present && spec->every == 0 && !spec->every_cron)
        ok = fail(ck, "jitter", "controller field 'jitter' needs 'every'");
    return ok;
}

static bool read_spec(lua_State *L, int ctl, struct luna_controller_spec *spec, struct check *ck)
{
    int top = lua_gettop(L);
    if (!known_keys(L, ctl, top_fields, false, NULL, ck))
        return false;

    size_t len = 0;
    const char *name = raw_field(L, ctl, "name") == LUA_TSTRING ? lua_tolstring(L, -1, &len)
                                                                : NULL;
    if (!name || !is_dns_subdomain(name, len)) {
        char shown[128];
        if (lua_type(L, -1) == LUA_TBOOLEAN)
            snprintf(shown, sizeof shown, "%s", lua_toboolean(L, -1) ? "true" : "false");
        else if (lua_isnil(L, -1))
            snprintf(shown, sizeof shown, "nil");
        else
            key_text(L, -1, shown, sizeof shown);
        lua_settop(L, top);
        return fail(ck, "name", "controller field 'name' must be a lowercase DNS-style name, "
                                "got %s", shown);
    }
    spec->name = dup(L, name, len);
    lua_settop(L, top);

    if (raw_field(L, ctl, "reconcile") != LUA_TFUNCTION) {
        lua_settop(L, top);
        return fail(ck, "reconcile", "controller '%s' needs a 'reconcile' function", spec->name);
    }
    spec->reconcile_ref = luaL_ref(L, LUA_REGISTRYINDEX);

    bool present;
    double workers = 1;
    raw_field(L, ctl, "workers");
    bool ok = number_in(L, "workers", 1, LUNA_SPEC_MAX_WORKERS,
                        "a positive integer (1 to 1024)", &workers, &present, ck);
    lua_settop(L, top);
    if (ok && workers != floor(workers))
        ok = fail(ck, "workers", "controller field 'workers' must be a positive integer "
                                 "(1 to 1024)");
    if (!ok)
        return false;
    spec->workers = (int)workers;

    raw_field(L, ctl, "resync");
    ok = number_in(L, "resync", 0, MAX_RESYNC,
                   "a number of seconds: 0 (off) or 1 to 31536000", &spec->resync, &present, ck);
    lua_settop(L, top);
    if (ok && spec->resync > 0 && spec->resync < 1)
        ok = fail(ck, "resync", "controller field 'resync' must be a number of seconds: 0 (off) "
                                "or 1 to 31536000");
    if (!ok)
        return false;

    if (!read_every(L, ctl, spec, ck))
        return false;

    int t = raw_field(L, ctl, "keep_managed_fields");
    if (t != LUA_TNIL && t != LUA_TBOOLEAN) {
        lua_settop(L, top);
        return fail(ck, "keep_managed_fields", "controller field 'keep_managed_fields' must be "
                                               "a boolean");
    }
    spec->keep_managed_fields = lua_toboolean(L, -1);
    lua_settop(L, top);

    t = raw_field(L, ctl, "priority_queue");
    if (t != LUA_TNIL && t != LUA_TBOOLEAN) {
        lua_settop(L, top);
        return fail(ck, "priority_queue", "controller field 'priority_queue' must be a boolean "
                                          "(false: one FIFO queue, no priorities)");
    }
    spec->fifo = t == LUA_TBOOLEAN && !lua_toboolean(L, -1);
    lua_settop(L, top);

    if (!read_limits(L, ctl, spec, ck) || !read_rate_limit(L, ctl, spec, ck) ||
        !read_indexes(L, ctl, spec, ck) || !read_predicates(L, ctl, spec, ck))
        return false;

    spec->sources = calloc(LUNA_SPEC_MAX_SOURCES, sizeof *spec->sources);
    if (!spec->sources)
        return luaL_error(L, "out of memory");
    if (raw_field(L, ctl, "watch") == LUA_TNIL) {
        lua_settop(L, top);
        return fail(ck, "watch", "controller '%s' needs a 'watch' field", spec->name);
    }
    ok = read_source(L, lua_gettop(L), LUNA_SOURCE_WATCH, "watch", spec, ck);
    lua_settop(L, top);
    const char *lists[2] = { "owns", "watches" };
    enum luna_source_role roles[2] = { LUNA_SOURCE_OWNS, LUNA_SOURCE_WATCHES };
    for (int l = 0; ok && l < 2; l++) {
        if (raw_field(L, ctl, lists[l]) == LUA_TNIL) {
            lua_settop(L, top);
            continue;
        }
        int lt = lua_gettop(L);
        int n = list_length(L, lt, lists[l], LUNA_SPEC_MAX_SOURCES, ck);
        ok = n >= 0;
        for (int i = 1; ok && i <= n; i++) {
            char field[64];
            snprintf(field, sizeof field, "%s[%d]", lists[l], i);
            lua_rawgeti(L, lt, i);
            ok = read_source(L, lua_gettop(L), roles[l], field, spec, ck);
            lua_pop(L, 1);
        }
        lua_settop(L, top);
    }
    return ok;
}

/* core.controller_spec(table) → spec | nil, message, field */
static int luna_lua_controller_spec(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TTABLE) {
        lua_pushnil(L);
        lua_pushfstring(L, "luna.controller takes a table, got %s", luaL_typename(L, 1));
        return 2;
    }
    lua_settop(L, 1);
    /* The userdata first, with its __gc: a raise (out of memory) while
     * reading leaves nothing behind. */
    struct luna_controller_spec *spec = lua_newuserdata(L, sizeof *spec);
    memset(spec, 0, sizeof *spec);
    spec->reconcile_ref = spec->predicates_ref = LUA_NOREF;
    luaL_getmetatable(L, SPEC_MT);
    lua_setmetatable(L, -2);
    struct check ck = { "", "" };
    if (!read_spec(L, 1, spec, &ck)) {
        lua_settop(L, 2);
        spec_release(L, spec);
        /* for the host's load error: which field, without parsing text */
        lua_pushlightuserdata(L, &last_error_key);
        lua_createtable(L, 0, 2);
        lua_pushstring(L, ck.msg);
        lua_setfield(L, -2, "message");
        lua_pushstring(L, ck.field);
        lua_setfield(L, -2, "field");
        lua_rawset(L, LUA_REGISTRYINDEX);
        lua_pushnil(L);
        lua_pushstring(L, ck.msg);
        lua_pushstring(L, ck.field);
        return 3;
    }
    lua_settop(L, 2);
    return 1;
}

bool luna_controller_spec_last_error(lua_State *L, char *msg, size_t msg_size, char *field,
                                     size_t field_size)
{
    lua_pushlightuserdata(L, &last_error_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    bool found = lua_istable(L, -1);
    if (found) {
        lua_getfield(L, -1, "message");
        snprintf(msg, msg_size, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "");
        lua_getfield(L, -2, "field");
        snprintf(field, field_size, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "");
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
    lua_pushlightuserdata(L, &last_error_key);
    lua_pushnil(L);
    lua_rawset(L, LUA_REGISTRYINDEX);
    return found;
}

/* Whether line (len bytes) sets `name`: `name =` or `["name"] =` after
 * blanks or a non-identifier character, outside a comment. */
static bool line_sets(const char *line, size_t len, const char *name)
{
    size_t nlen = strlen(name);
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (i + 1 < len && line[i] == '-' && line[i + 1] == '-')
        return false;
    for (; i + nlen <= len; i++) {
        if (memcmp(line + i, name, nlen) != 0)
            continue;
        size_t after = i + nlen;
        bool quoted = i >= 2 && (line[i - 1] == '"' || line[i - 1] == '\'') && line[i - 2] == '[';
        if (quoted) {
            if (after + 1 < len && line[after] == line[i - 1] && line[after + 1] == ']')
                after += 2;
            else
                continue;
        } else {
            char b = i ? line[i - 1] : ' ';
            if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') ||
                b == '_' || b == '.' || b == ':')
                continue;
        }
        while (after < len && (line[after] == ' ' || line[after] == '\t'))
            after++;
        if (after < len && line[after] == '=' && (after + 1 >= len || line[after + 1] != '='))
            return true;
    }
    return false;
}

int luna_controller_spec_field_line(const char *path, const char *field)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    char text[1 << 16];
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    /* the components of "watches[2].map": watches, map */
    char comps[4][64];
    int ncomp = 0;
    for (const char *p = field; *p && ncomp < 4;) {
        size_t n = strcspn(p, ".[");
        if (n > 0 && n < sizeof comps[0]) {
            memcpy(comps[ncomp], p, n);
            comps[ncomp++][n] = '\0';
        }
        p += n;
        if (*p == '[')
            p += strcspn(p, "]");
        if (*p)
            p++;
    }
    int found = 0, line = 1;
    size_t start = 0;
    int want = 0;
    for (size_t i = 0; i <= len && want < ncomp; i++) {
        if (i < len && text[i] != '\n')
            continue;
        while (want < ncomp && line_sets(text + start, i - start, comps[want])) {
            found = line;
            want++;
        }
        start = i + 1;
        line++;
    }
    return found;
}

static int luna_lua_is_controller_spec(lua_State *L)
{
    lua_pushboolean(L, luna_controller_spec_get(L, 1) != NULL);
    return 1;
}

/* ---- the read-only view ------------------------------------------------- */

static void push_source(lua_State *L, const struct luna_source_spec *s)
{
    lua_createtable(L, 0, 7);
    lua_pushstring(L, s->kind_text);
    lua_setfield(L, -2, "kind");
    lua_createtable(L, 0, 4);
    lua_pushstring(L, s->group);
    lua_setfield(L, -2, "group");
    lua_pushstring(L, s->version);
    lua_setfield(L, -2, "version");
    lua_pushstring(L, s->kind);
    lua_setfield(L, -2, "kind");
    if (s->group[0])
        lua_pushfstring(L, "%s/%s", s->group, s->version);
    else
        lua_pushstring(L, s->version);
    lua_setfield(L, -2, "api_version");
    lua_setfield(L, -2, "type");
    if (s->namespace_) {
        lua_pushstring(L, s->namespace_);
        lua_setfield(L, -2, "namespace");
    }
    if (s->labels[0]) {
        lua_pushstring(L, s->labels);
        lua_setfield(L, -2, "labels");
    }
    if (s->fields[0]) {
        lua_pushstring(L, s->fields);
        lua_setfield(L, -2, "fields");
    }
    if (s->metadata_only) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "metadata_only");
    }
}

static void push_sources(lua_State *L, const struct luna_controller_spec *spec,
                         enum luna_source_role role)
{
    lua_newtable(L);
    int n = 0;
    for (size_t i = 0; i < spec->nsources; i++) {
        if (spec->sources[i].role != role)
            continue;
        push_source(L, &spec->sources[i]);
        lua_rawseti(L, -2, ++n);
    }
}

/* __index: a fresh copy of one field (a script may change the copy; the
 * spec the host runs does not change). */
static int spec_index(lua_State *L)
{
    const struct luna_controller_spec *spec = luna_controller_spec_get(L, 1);
    const char *k = lua_tostring(L, 2);
    if (!spec || !k || lua_type(L, 2) != LUA_TSTRING) {
        lua_pushnil(L);
        return 1;
    }
    if (strcmp(k, "name") == 0) {
        lua_pushstring(L, spec->name ? spec->name : "");
    } else if (strcmp(k, "workers") == 0) {
        lua_pushinteger(L, spec->workers);
    } else if (strcmp(k, "resync") == 0) {
        lua_pushnumber(L, spec->resync);
    } else if (strcmp(k, "keep_managed_fields") == 0) {
        lua_pushboolean(L, spec->keep_managed_fields);
    } else if (strcmp(k, "priority_queue") == 0) {
        lua_pushboolean(L, !spec->fifo);
    } else if (strcmp(k, "every") == 0 && spec->every_cron) {
        lua_pushstring(L, spec->every_cron);
    } else if (strcmp(k, "every") == 0 && spec->every > 0) {
        lua_pushnumber(L, spec->every);
    } else if (strcmp(k, "jitter") == 0) {
        lua_pushnumber(L, spec->jitter);
    } else if (strcmp(k, "watch") == 0 && spec->nsources > 0) {
        push_source(L, &spec->sources[0]);
    } else if (strcmp(k, "owns") == 0) {
        push_sources(L, spec, LUNA_SOURCE_OWNS);
    } else if (strcmp(k, "watches") == 0) {
        push_sources(L, spec, LUNA_SOURCE_WATCHES);
    } else if (strcmp(k, "limits") == 0) {
        lua_newtable(L);
        if (spec->limits_set & LUNA_SPEC_LIMIT_INSTRUCTIONS) {
            lua_pushnumber(L, spec->limits.instructions);
            lua_setfield(L, -2, "instructions");
        }
        if (spec->limits_set & LUNA_SPEC_LIMIT_SECONDS) {
            lua_pushnumber(L, spec->limits.seconds);
            lua_setfield(L, -2, "seconds");
        }
        if (spec->limits_set & LUNA_SPEC_LIMIT_MEMORY) {
            lua_pushnumber(L, (double)spec->memory / 1048576.0);
            lua_setfield(L, -2, "memory");
        }
    } else if (strcmp(k, "rate_limit") == 0) {
        lua_createtable(L, 0, 4);
        lua_pushnumber(L, spec->rate_limit.base_delay);
        lua_setfield(L, -2, "base_delay");
        lua_pushnumber(L, spec->rate_limit.max_delay);
        lua_setfield(L, -2, "max_delay");
        lua_pushnumber(L, spec->rate_limit.qps);
        lua_setfield(L, -2, "qps");
        lua_pushnumber(L, spec->rate_limit.burst);
        lua_setfield(L, -2, "burst");
    } else if (strcmp(k, "indexes") == 0) {
        lua_createtable(L, (int)spec->nindexes, 0);
        for (size_t i = 0; i < spec->nindexes; i++) {
            lua_pushstring(L, spec->indexes[i].name);
            lua_rawseti(L, -2, (int)i + 1);
        }
    } else {
        lua_pushnil(L);
    }
    return 1;
}

static int spec_newindex(lua_State *L)
{
    return luaL_error(L, "a luna.controller is read-only: pass every field to "
                         "luna.controller{}");
}

static int spec_tostring(lua_State *L)
{
    const struct luna_controller_spec *spec = luna_controller_spec_get(L, 1);
    lua_pushfstring(L, "luna.controller: %s", spec && spec->name ? spec->name : "?");
    return 1;
}

void luna_lua_controller_spec_register(lua_State *L)
{
    if (luaL_newmetatable(L, SPEC_MT)) {
        lua_pushcfunction(L, spec_index);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, spec_newindex);
        lua_setfield(L, -2, "__newindex");
        lua_pushcfunction(L, spec_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, spec_tostring);
        lua_setfield(L, -2, "__tostring");
        lua_pushliteral(L, SPEC_MT);
        lua_setfield(L, -2, "__metatable");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, luna_lua_controller_spec);
    lua_setfield(L, -2, "controller_spec");
    lua_pushcfunction(L, luna_lua_is_controller_spec);
    lua_setfield(L, -2, "is_controller_spec");
}
