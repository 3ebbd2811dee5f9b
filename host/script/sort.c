/* script/sort.c — see script/sort.h. */
#include "script/sort.h"

#include <lauxlib.h>
#include <stdbool.h>
#include <stddef.h>

#include "script/watchdog.h"

struct sorter {
    lua_State *L;
    bool has_less;             /* less at index 2 */
    size_t steps;              /* comparisons not yet charged */
};

static void charge(struct sorter *s, size_t n)
{
    s->steps += n;
    if (s->steps >= LUNA_SORT_CHARGE) {
        luna_watchdog_charge(s->L, (double)s->steps);
        s->steps = 0;
    }
}

/* Whether the value at a < the value at b (stack indexes). */
static bool less(struct sorter *s, int a, int b)
{
    lua_State *L = s->L;
    charge(s, 1);
    if (!s->has_less)
        return lua_lessthan(L, a, b);
    int top = lua_gettop(L);
    a = a < 0 ? top + a + 1 : a;
    b = b < 0 ? top + b + 1 : b;
    lua_pushvalue(L, 2);
    lua_pushvalue(L, a);
    lua_pushvalue(L, b);
    lua_call(L, 2, 1);
    bool r = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return r;
}

/* Sifts the value on top of the stack down from the hole at i of the heap
 * t[1..n]: larger children move up into the hole, the value lands where
 * neither child is larger.  Pops the value. */
static void sift_down(struct sorter *s, size_t i, size_t n)
{
    lua_State *L = s->L;
    int v = lua_gettop(L);
    for (;;) {
        size_t child = 2 * i;
        if (child > n)
            break;
        lua_rawgeti(L, 1, (int)child);
        if (child < n) {
            lua_rawgeti(L, 1, (int)child + 1);
            if (less(s, -2, -1)) {
                lua_remove(L, -2);
                child++;
            } else {
                lua_pop(L, 1);
            }
        }
        if (!less(s, v, -1)) {
            lua_pop(L, 1);
            break;
        }
        lua_rawseti(L, 1, (int)i);
        i = child;
    }
    lua_rawseti(L, 1, (int)i);
}

static void sort_values(struct sorter *s, size_t n)
{
    lua_State *L = s->L;
    for (size_t i = n / 2; i >= 1; i--) {
        lua_rawgeti(L, 1, (int)i);
        sift_down(s, i, n);
    }
    for (size_t end = n; end > 1; end--) {
        lua_rawgeti(L, 1, (int)end); /* the last leaf goes into the root's hole */
        lua_rawgeti(L, 1, 1);
        lua_rawseti(L, 1, (int)end);
        sift_down(s, 1, end - 1);
    }
}

/* Heapsort of n doubles (the all-numbers case, default order). */
static void sort_numbers(struct sorter *s, double *a, size_t n)
{
    /* 1-based view */
    double *h = a - 1;
    for (size_t start = n / 2 + 1, end = n; end > 1;) {
        double v;
        size_t i;
        if (start > 1) {
            i = --start;
            v = h[i];
        } else {
            v = h[end];
            h[end] = h[1];
            end--;
            i = 1;
        }
        for (;;) {
            size_t child = 2 * i;
            if (child > end)
                break;
            if (child < end && h[child] < h[child + 1])
                child++;
            if (!(v < h[child]))
                break;
            h[i] = h[child];
            i = child;
        }
        h[i] = v;
        charge(s, 20);
    }
}

static int luna_sort_sort(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    struct sorter s = { .L = L, .has_less = !lua_isnoneornil(L, 2) };
    if (s.has_less)
        luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 2);
    size_t n = lua_objlen(L, 1);
    if (n > (size_t)0x7fffffff)
        return luaL_error(L, "table too large to sort");
    if (n < 2)
        return 0;
    luaL_checkstack(L, 12, "sort");
    if (!s.has_less) {
        /* all numbers: sort a copy in a userdata (on the Lua heap, under
         * the memory cap), then write it back */
        size_t i;
        for (i = 1; i <= n; i++) {
            lua_rawgeti(L, 1, (int)i);
            bool num = lua_type(L, -1) == LUA_TNUMBER;
            lua_pop(L, 1);
            if (!num)
                break;
        }
        charge(&s, n);
        if (i > n) {
            double *a = lua_newuserdata(L, n * sizeof *a);
            for (i = 0; i < n; i++) {
                lua_rawgeti(L, 1, (int)i + 1);
                a[i] = lua_tonumber(L, -1);
                lua_pop(L, 1);
            }
            sort_numbers(&s, a, n);
            for (i = 0; i < n; i++) {
                lua_pushnumber(L, a[i]);
                lua_rawseti(L, 1, (int)i + 1);
            }
            if (s.steps)
                luna_watchdog_charge(L, (double)s.steps);
            return 0;
        }
    }
    /* less and __lt are script code */
    luna_watchdog_check_cstack(L);
    if (s.has_less && !lua_iscfunction(L, 2) && !lua_isnil(L, lua_upvalueindex(1))) {
        /* A Lua order function runs instructions at every comparison, so
         * the hook bounds the library's own sort: use it (it is faster). */
        lua_pushvalue(L, lua_upvalueindex(1));
        lua_insert(L, 1);
        lua_call(L, 2, 0);
        return 0;
    }
    sort_values(&s, n);
    if (s.steps)
        luna_watchdog_charge(L, (double)s.steps);
    return 0;
}

void luna_sort_register(lua_State *L)
{
    lua_getglobal(L, "table");
    if (lua_istable(L, -1))
        lua_getfield(L, -1, "sort");
    else
        lua_pushnil(L);
    lua_remove(L, -2);
    lua_pushcclosure(L, luna_sort_sort, 1);
    lua_setfield(L, -2, "sort");
}
