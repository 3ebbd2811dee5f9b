/* lua_loop.c — see lua_loop.h. */
#include "testing/lua_loop.h"

#include <lauxlib.h>
#include <stdbool.h>

#include "base/loop.h"
#include "lua/lua_util.h"

static lua_State *running_state;
static int stop_requested;

lua_State *luna_lua_loop_current(void) { return running_state; }

/* How often a run_until predicate is re-checked while no event arrives, so
 * predicates over state outside the loop (files, child processes) work. */
#define PREDICATE_POLL_S 0.005

struct run_ctx {
    ev_timer deadline;
    ev_timer poll;
    bool timed_out;
};

static void poll_cb(struct ev_loop *loop, ev_timer *w, int revents) {}

static void deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct run_ctx *ctx = (struct run_ctx *)w;
    ctx->timed_out = true;
    ev_break(loop, EVBREAK_ONE);
}

/* Runs one loop iteration at a time until pred (stack index, or 0) is true,
 * stop() is called, or the deadline passes.  Raises if pred raises, after
 * stopping the deadline timer. */
static int run_loop(lua_State *L, int pred, double seconds)
{
    struct ev_loop *loop = luna_loop();
    struct run_ctx ctx = { .timed_out = false };
    lua_State *outer = running_state;
    int outer_stop = stop_requested;
    ev_now_update(loop);
    ev_timer_init(&ctx.deadline, deadline_cb, seconds, 0.);
    ev_timer_start(loop, &ctx.deadline);
    ev_timer_init(&ctx.poll, poll_cb, PREDICATE_POLL_S, PREDICATE_POLL_S);
    if (pred)
        ev_timer_start(loop, &ctx.poll);
    running_state = L;
    stop_requested = 0;
    bool done = false;
    int err = 0;
    while (!done && !ctx.timed_out && !stop_requested) {
        if (pred) {
            lua_pushvalue(L, pred);
            err = lua_pcall(L, 0, 1, 0);
            if (err)
                break;
            done = lua_toboolean(L, -1);
            lua_pop(L, 1);
            if (done)
                break;
        }
        ev_run(loop, EVRUN_ONCE);
    }
    ev_timer_stop(loop, &ctx.deadline);
    ev_timer_stop(loop, &ctx.poll);
    bool stopped = stop_requested;
    running_state = outer;
    stop_requested = outer_stop;
    if (err)
        return lua_error(L);
    lua_pushboolean(L, done || stopped);
    return 1;
}

static int luna_lua_loop_run(lua_State *L)
{
    return run_loop(L, 0, luaL_optnumber(L, 1, 1e9));
}

static int luna_lua_loop_run_until(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    return run_loop(L, 1, luaL_optnumber(L, 2, 5.0));
}

static int luna_lua_loop_stop(lua_State *L)
{
    stop_requested = 1;
    ev_break(luna_loop(), EVBREAK_ONE);
    return 0;
}

static int luna_lua_loop_now(lua_State *L)
{
    lua_pushnumber(L, ev_now(luna_loop()));
    return 1;
}

void luna_lua_loop_register(lua_State *L)
{
    static const luaL_Reg funcs[] = {
        { "run", luna_lua_loop_run },
        { "run_until", luna_lua_loop_run_until },
        { "stop", luna_lua_loop_stop },
        { "now", luna_lua_loop_now },
        { NULL, NULL },
    };
    luna_lua_register_table(L, "loop", funcs);
}
