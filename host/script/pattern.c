/* script/pattern.c — see script/pattern.h. */
#include "script/pattern.h"

#include <ctype.h>
#include <lauxlib.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "script/watchdog.h"

#define ESC '%'
#define CAP_OPEN (-1)
#define CAP_POS (-2)

struct capture {
    const char *start;
    ptrdiff_t len;              /* CAP_OPEN while open, CAP_POS for () */
};

/* One match attempt's state.  Lives on the C stack of the calling
 * function; everything it points to is owned by Lua values on L's stack. */
struct matcher {
    lua_State *L;
    const char *s, *s_end;      /* the subject */
    const char *p_end;          /* the pattern's end */
    int depth;                  /* recursion depth of match() */
    size_t steps;               /* steps not yet charged to the watchdog */
    int level;                  /* captures started */
    struct capture cap[LUNA_PATTERN_MAX_CAPTURES];
};

/* Counts one step; every LUNA_PATTERN_CHARGE steps reports them to the
 * watchdog, which raises when the budget is spent. */
static inline void step(struct matcher *m)
{
    if (++m->steps >= LUNA_PATTERN_CHARGE) {
        luna_watchdog_charge(m->L, (double)m->steps);
        m->steps = 0;
    }
}

static void flush_steps(struct matcher *m)
{
    if (m->steps) {
        size_t n = m->steps;
        m->steps = 0;
        luna_watchdog_charge(m->L, (double)n);
    }
}

/* ---- pattern items ------------------------------------------------------ */

/* The end of the single-character class starting at p. */
static const char *item_end(struct matcher *m, const char *p)
{
    char c = *p++;
    if (c == ESC) {
        if (p >= m->p_end)
            luaL_error(m->L, "malformed pattern (ends with '%%')");
        return p + 1;
    }
    if (c == '[') {
        if (p < m->p_end && *p == '^')
            p++;
        /* the first character of a set is literal, even ']' */
        do {
            if (p >= m->p_end)
                luaL_error(m->L, "malformed pattern (missing ']')");
            c = *p++;
            if (c == ESC) {
                if (p >= m->p_end)
                    luaL_error(m->L, "malformed pattern (missing ']')");
                p++;
            }
        } while (p >= m->p_end || *p != ']');
        return p + 1;
    }
    return p;
}

/* Whether c is in class letter cl (%a, %D, ...); other letters stand for
 * themselves. */
static bool in_class(int c, int cl)
{
    bool r;
    switch (tolower(cl)) {
    case 'a': r = isalpha(c); break;
    case 'c': r = iscntrl(c); break;
    case 'd': r = isdigit(c); break;
    case 'l': r = islower(c); break;
    case 'p': r = ispunct(c); break;
    case 's': r = isspace(c); break;
    case 'u': r = isupper(c); break;
    case 'w': r = isalnum(c); break;
    case 'x': r = isxdigit(c); break;
    case 'z': r = c == 0; break;
    default: return cl == c;
    }
    return isupper(cl) ? !r : r;
}

/* Whether c is in the set [ ... ] from p (at '[') to end (at ']'). */
static bool in_set(int c, const char *p, const char *end)
{
    bool negate = false;
    p++;
    if (*p == '^') {
        negate = true;
        p++;
    }
    while (p < end) {
        if (*p == ESC && p + 1 < end) {
            if (in_class(c, (unsigned char)p[1]))
                return !negate;
            p += 2;
        } else if (p + 2 < end && p[1] == '-') {
            if ((unsigned char)p[0] <= c && c <= (unsigned char)p[2])
                return !negate;
            p += 3;
        } else {
            if ((unsigned char)*p == c)
                return !negate;
            p++;
        }
    }
    return negate;
}

/* Whether the character at s matches the class from p to ep. */
static bool item_matches(struct matcher *m, const char *s, const char *p, const char *ep)
{
    if (s >= m->s_end)
        return false;
    int c = (unsigned char)*s;
    switch (*p) {
    case '.': return true;
    case ESC: return in_class(c, (unsigned char)p[1]);
    case '[': return in_set(c, p, ep - 1);
    default: return (unsigned char)*p == c;
    }
}

/* ---- matching ----------------------------------------------------------- */

static const char *match(struct matcher *m, const char *s, const char *p);

/* Greedy repetition of the item p..ep from s (at least 0), then the rest
 * of the pattern after ep+1, backing off one character at a time. */
static const char *expand_greedy(struct matcher *m, const char *s, const char *p,
                                 const char *ep)
{
    ptrdiff_t n = 0;
    while (item_matches(m, s + n, p, ep))
        n++;
    m->steps += (size_t)n;
    step(m);
    for (; n >= 0; n--) {
        step(m);
        const char *r = match(m, s + n, ep + 1);
        if (r)
            return r;
    }
    return NULL;
}

/* Lazy repetition: the rest first, one more character when it fails. */
static const char *expand_lazy(struct matcher *m, const char *s, const char *p, const char *ep)
{
    for (;;) {
        step(m);
        const char *r = match(m, s, ep + 1);
        if (r)
            return r;
        if (!item_matches(m, s, p, ep))
            return NULL;
        s++;
    }
}

static const char *open_capture(struct matcher *m, const char *s, const char *p, ptrdiff_t what)
{
    if (m->level >= LUNA_PATTERN_MAX_CAPTURES)
        luaL_error(m->L, "too many captures");
    m->cap[m->level].start = s;
    m->cap[m->level].len = what;
    m->level++;
    const char *r = match(m, s, p);
    if (!r)
        m->level--;
    return r;
}

static const char *close_capture(struct matcher *m, const char *s, const char *p)
{
    int l = m->level - 1;
    while (l >= 0 && m->cap[l].len != CAP_OPEN)
        l--;
    if (l < 0)
        luaL_error(m->L, "invalid pattern capture");
    m->cap[l].len = s - m->cap[l].start;
    const char *r = match(m, s, p);
    if (!r)
        m->cap[l].len = CAP_OPEN;
    return r;
}

/* %1-%9: the text of a closed capture again. */
static const char *back_reference(struct matcher *m, const char *s, int digit)
{
    int l = digit - '1';
    if (l < 0 || l >= m->level || m->cap[l].len == CAP_OPEN)
        luaL_error(m->L, "invalid capture index");
    if (m->cap[l].len == CAP_POS)
        return NULL; /* a position is no text: never matches (as in LuaJIT) */
    size_t len = (size_t)m->cap[l].len;
    m->steps += len / 16;
    step(m);
    if ((size_t)(m->s_end - s) >= len && memcmp(m->cap[l].start, s, len) == 0)
        return s + len;
    return NULL;
}

/* %bxy from s: an x, then characters up to the y that balances it. */
static const char *balanced(struct matcher *m, const char *s, const char *p)
{
    if (p + 1 >= m->p_end)
        luaL_error(m->L, "missing arguments to '%%b'");
    if (s >= m->s_end || *s != p[0])
        return NULL;
    int open = 1;
    while (++s < m->s_end) {
        step(m);
        if (*s == p[1]) {
            if (--open == 0)
                return s + 1;
        } else if (*s == p[0]) {
            open++;
        }
    }
    return NULL;
}

/* The end of a match of p..p_end at s, or NULL. */
static const char *match(struct matcher *m, const char *s, const char *p)
{
    if (++m->depth > LUNA_PATTERN_MAX_DEPTH)
        luaL_error(m->L, "pattern too complex");
    const char *r = NULL;
    for (;;) {
        step(m);
        if (p >= m->p_end) {
            r = s;
            break;
        }
        if (*p == '(') {
            if (p + 1 < m->p_end && p[1] == ')')
                r = open_capture(m, s, p + 2, CAP_POS);
            else
                r = open_capture(m, s, p + 1, CAP_OPEN);
            break;
        }
        if (*p == ')') {
            r = close_capture(m, s, p + 1);
            break;
        }
        if (*p == '$' && p + 1 == m->p_end) {
            r = s == m->s_end ? s : NULL;
            break;
        }
        if (*p == ESC && p + 1 < m->p_end && p[1] == 'b') {
            s = balanced(m, s, p + 2);
            if (!s)
                break;
            p += 4;
            continue;
        }
        if (*p == ESC && p + 1 < m->p_end && p[1] == 'f') {
            p += 2;
            if (p >= m->p_end || *p != '[')
                luaL_error(m->L, "missing '[' after '%%f' in pattern");
            const char *ep = item_end(m, p);
            int prev = s == m->s ? 0 : (unsigned char)s[-1];
            int cur = s < m->s_end ? (unsigned char)*s : 0;
            if (in_set(prev, p, ep - 1) || !in_set(cur, p, ep - 1))
                break;
            p = ep;
            continue;
        }
        if (*p == ESC && p + 1 < m->p_end && isdigit((unsigned char)p[1])) {
            s = back_reference(m, s, (unsigned char)p[1]);
            if (!s)
                break;
            p += 2;
            continue;
        }
        const char *ep = item_end(m, p);
        bool hit = item_matches(m, s, p, ep);
        char op = ep < m->p_end ? *ep : '\0';
        if (op == '?') {
            if (hit && (r = match(m, s + 1, ep + 1)) != NULL)
                break;
            p = ep + 1;
            continue;
        }
        if (op == '*') {
            r = expand_greedy(m, s, p, ep);
            break;
        }
        if (op == '+') {
            r = hit ? expand_greedy(m, s + 1, p, ep) : NULL;
            break;
        }
        if (op == '-') {
            r = expand_lazy(m, s, p, ep);
            break;
        }
        if (!hit)
            break;
        s++;
        p = ep;
    }
    m->depth--;
    return r;
}

/* ---- captures ------------------------------------------------------------ */

static void push_capture(struct matcher *m, int i, const char *s, const char *e)
{
    if (i >= m->level) {
        if (i != 0)
            luaL_error(m->L, "invalid capture index");
        lua_pushlstring(m->L, s, (size_t)(e - s));
        return;
    }
    ptrdiff_t len = m->cap[i].len;
    if (len == CAP_OPEN)
        luaL_error(m->L, "unfinished capture");
    if (len == CAP_POS)
        lua_pushinteger(m->L, (lua_Integer)(m->cap[i].start - m->s + 1));
    else
        lua_pushlstring(m->L, m->cap[i].start, (size_t)len);
}

/* Pushes the captures (or the whole match s..e when there are none and s
 * is given); returns how many. */
static int push_captures(struct matcher *m, const char *s, const char *e)
{
    int n = m->level == 0 && s ? 1 : m->level;
    luaL_checkstack(m->L, n, "too many captures");
    for (int i = 0; i < n; i++)
        push_capture(m, i, s, e);
    return n;
}

static void matcher_init(struct matcher *m, lua_State *L, const char *s, size_t ls,
                         const char *p, size_t lp)
{
    m->L = L;
    m->s = s;
    m->s_end = s + ls;
    m->p_end = p + lp;
    m->depth = 0;
    m->steps = 0;
    m->level = 0;
}

static bool has_specials(const char *p, size_t lp)
{
    for (size_t i = 0; i < lp; i++)
        if (strchr("^$*+?.([%-", p[i]) && p[i] != '\0')
            return true;
    return false;
}

/* A start position as string.find takes it (1-based, negative from the
 * end, clamped to the string as LuaJIT does), 0-based into s. */
static ptrdiff_t start_at(lua_State *L, int arg, size_t len)
{
    lua_Integer init = luaL_optinteger(L, arg, 1);
    if (init < 0)
        init += (lua_Integer)len + 1;
    if (init < 1)
        init = 1;
    if (init > (lua_Integer)len + 1)
        init = (lua_Integer)len + 1;
    return (ptrdiff_t)init - 1;
}

static int find_or_match(lua_State *L, bool find)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    ptrdiff_t init = start_at(L, 3, ls);
    if (find && (lua_toboolean(L, 4) || !has_specials(p, lp))) {
        /* memmem is linear (two-way): no steps to count */
        const char *hit = lp == 0 ? s + init : memmem(s + init, ls - (size_t)init, p, lp);
        if (!hit) {
            lua_pushnil(L);
            return 1;
        }
        lua_pushinteger(L, (lua_Integer)(hit - s) + 1);
        lua_pushinteger(L, (lua_Integer)(hit - s) + (lua_Integer)lp);
        return 2;
    }
    struct matcher m;
    bool anchor = lp > 0 && *p == '^';
    if (anchor) {
        p++;
        lp--;
    }
    matcher_init(&m, L, s, ls, p, lp);
    const char *at = s + init;
    do {
        m.level = 0;
        m.depth = 0;
        step(&m);
        const char *e = match(&m, at, p);
        if (e) {
            flush_steps(&m);
            if (find) {
                lua_pushinteger(L, (lua_Integer)(at - s) + 1);
                lua_pushinteger(L, (lua_Integer)(e - s));
                return push_captures(&m, NULL, NULL) + 2;
            }
            return push_captures(&m, at, e);
        }
    } while (at++ < m.s_end && !anchor);
    flush_steps(&m);
    lua_pushnil(L);
    return 1;
}

static int luna_pattern_find(lua_State *L) { return find_or_match(L, true); }
static int luna_pattern_match(lua_State *L) { return find_or_match(L, false); }

/* gmatch's iterator: upvalues subject, pattern, next position. */
static int gmatch_next(lua_State *L)
{
    size_t ls, lp;
    const char *s = lua_tolstring(L, lua_upvalueindex(1), &ls);
    const char *p = lua_tolstring(L, lua_upvalueindex(2), &lp);
    struct matcher m;
    matcher_init(&m, L, s, ls, p, lp);
    for (const char *at = s + lua_tointeger(L, lua_upvalueindex(3)); at <= m.s_end; at++) {
        m.level = 0;
        m.depth = 0;
        step(&m);
        const char *e = match(&m, at, p);
        if (e) {
            flush_steps(&m);
            lua_Integer next = (lua_Integer)(e - s);
            if (e == at)
                next++; /* an empty match: go on one character later */
            lua_pushinteger(L, next);
            lua_replace(L, lua_upvalueindex(3));
            return push_captures(&m, at, e);
        }
    }
    flush_steps(&m);
    return 0;
}

static int luna_pattern_gmatch(lua_State *L)
{
    luaL_checkstring(L, 1);
    luaL_checkstring(L, 2);
    lua_settop(L, 2);
    lua_pushinteger(L, 0);
    lua_pushcclosure(L, gmatch_next, 3);
    return 1;
}

/* Appends the replacement of the match s..e to b (repl at index 3). */
static void add_replacement(struct matcher *m, luaL_Buffer *b, const char *s, const char *e)
{
    lua_State *L = m->L;
    int type = lua_type(L, 3);
    if (type == LUA_TSTRING || type == LUA_TNUMBER) {
        size_t lr;
        const char *r = lua_tolstring(L, 3, &lr);
        for (size_t i = 0; i < lr; i++) {
            step(m);
            if (r[i] != ESC) {
                luaL_addchar(b, r[i]);
            } else if (++i < lr && isdigit((unsigned char)r[i])) {
                if (r[i] == '0') {
                    luaL_addlstring(b, s, (size_t)(e - s));
                } else {
                    push_capture(m, r[i] - '1', s, e);
                    luaL_addvalue(b);
                }
            } else if (i < lr) {
                luaL_addchar(b, r[i]);
            }
        }
        return;
    }
    /* script code runs from here: C-stack guard first */
    flush_steps(m);
    luna_watchdog_check_cstack(L);
    if (type == LUA_TFUNCTION) {
        lua_pushvalue(L, 3);
        int n = push_captures(m, s, e);
        lua_call(L, n, 1);
    } else {
        push_capture(m, 0, s, e);
        lua_gettable(L, 3);
    }
    if (!lua_toboolean(L, -1)) {
        lua_pop(L, 1);
        luaL_addlstring(b, s, (size_t)(e - s));
    } else if (!lua_isstring(L, -1)) {
        luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
    } else {
        luaL_addvalue(b);
    }
}

static int luna_pattern_gsub(lua_State *L)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    int type = lua_type(L, 3);
    luaL_argcheck(L, type == LUA_TNUMBER || type == LUA_TSTRING || type == LUA_TFUNCTION ||
                         type == LUA_TTABLE,
                  3, "string/function/table expected");
    lua_Integer max = luaL_optinteger(L, 4, (lua_Integer)ls + 1);
    lua_settop(L, 3);
    bool anchor = lp > 0 && *p == '^';
    if (anchor) {
        p++;
        lp--;
    }
    struct matcher m;
    matcher_init(&m, L, s, ls, p, lp);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    const char *at = s;
    lua_Integer n = 0;
    while (n < max) {
        m.level = 0;
        m.depth = 0;
        step(&m);
        const char *e = match(&m, at, p);
        if (e) {
            n++;
            add_replacement(&m, &b, at, e);
        }
        if (e && e > at)
            at = e;
        else if (at < m.s_end)
            luaL_addchar(&b, *at++);
        else
            break;
        if (anchor)
            break;
    }
    luaL_addlstring(&b, at, (size_t)(m.s_end - at));
    flush_steps(&m);
    luaL_pushresult(&b);
    lua_pushinteger(L, n);
    return 2;
}

void luna_pattern_register(lua_State *L)
{
    lua_pushcfunction(L, luna_pattern_find);
    lua_setfield(L, -2, "find");
    lua_pushcfunction(L, luna_pattern_match);
    lua_setfield(L, -2, "match");
    lua_pushcfunction(L, luna_pattern_gmatch);
    lua_setfield(L, -2, "gmatch");
    lua_pushcfunction(L, luna_pattern_gsub);
    lua_setfield(L, -2, "gsub");
}
