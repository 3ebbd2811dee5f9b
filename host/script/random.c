/* script/random.c — see script/random.h. */
#include "script/random.h"

#include <lauxlib.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

struct generator {
    uint64_t s[4];
};

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** (Blackman and Vigna): 2^256 - 1 period, passes BigCrush. */
static uint64_t next(struct generator *g)
{
    uint64_t result = rotl(g->s[1] * 5, 7) * 9;
    uint64_t t = g->s[1] << 17;
    g->s[2] ^= g->s[0];
    g->s[3] ^= g->s[1];
    g->s[1] ^= g->s[2];
    g->s[0] ^= g->s[3];
    g->s[2] ^= t;
    g->s[3] = rotl(g->s[3], 45);
    return result;
}

/* splitmix64 spreads one 64-bit seed over the four words (never all zero). */
static void seed(struct generator *g, uint64_t x)
{
    for (int i = 0; i < 4; i++) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        g->s[i] = z ^ (z >> 31);
    }
}

static int l_random(lua_State *L)
{
    struct generator *g = lua_touserdata(L, lua_upvalueindex(1));
    double r = (double)(next(g) >> 11) * 0x1.0p-53; /* [0, 1) */
    switch (lua_gettop(L)) {
    case 0:
        lua_pushnumber(L, r);
        return 1;
    case 1: {
        double u = floor(luaL_checknumber(L, 1));
        luaL_argcheck(L, u >= 1, 1, "interval is empty");
        lua_pushnumber(L, floor(r * u) + 1);
        return 1;
    }
    case 2: {
        double l = floor(luaL_checknumber(L, 1)), u = floor(luaL_checknumber(L, 2));
        luaL_argcheck(L, l <= u, 2, "interval is empty");
        lua_pushnumber(L, floor(r * (u - l + 1)) + l);
        return 1;
    }
    default:
        return luaL_error(L, "wrong number of arguments");
    }
}

static int l_randomseed(lua_State *L)
{
    struct generator *g = lua_touserdata(L, lua_upvalueindex(1));
    double x = luaL_checknumber(L, 1);
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    seed(g, bits);
    return 0;
}

void luna_lua_random_push(lua_State *L)
{
    struct generator *g = lua_newuserdata(L, sizeof *g);
    uint64_t x;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x) {
        /* no entropy yet (early boot): the clock and the address, which
         * differ between generators and runs */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)(uintptr_t)g;
    }
    seed(g, x);
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, l_random, 1);
    lua_insert(L, -2); /* random, generator */
    lua_pushcclosure(L, l_randomseed, 1);
}
