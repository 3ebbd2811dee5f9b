/* script/sandbox.c — see script/sandbox.h.
 *
 * One concept over ~900 lines: the one environment every script runs
 * in (its globals, views, `require` and realms); its parts guard the same
 * tables.
 */
#include "script/sandbox.h"

#include <lauxlib.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "script/pattern.h"
#include "script/random.h"
#include "script/sort.h"
#include "script/watchdog.h"

/* Registry keys (their addresses). */
static char k_base;        /* template of the globals every environment gets */
static char k_globals_mt;  /* metatable of an environment's globals table */
static char k_views;       /* weak: real table -> its read-only view */
static char k_readonly;    /* weak: view or environment -> the table it shows */
static char k_script_mts;  /* weak set: metatables scripts set */
static char k_loading;     /* value of a realm's module entry while it loads */
static char k_realm_math;  /* a realm's key of its own math view */
static char k_core_view;   /* the view scripts get for require "luna.core" */
static char k_deps;        /* while tracking: the module paths required, in order */
static char k_host_threads; /* weak set: coroutines only the host may resume */
static char k_string_methods; /* the sandbox's string functions, for ("x"):f() */

/* The allow lists (docs/isolation.md lists the same). */
static const char *const base_names[] = {
    "assert", "error", "next", "pcall", "rawequal", "rawget", "select",
    "tonumber", "tostring", "type", "unpack", "_VERSION", NULL,
};
struct lib_allow {
    const char *name;
    const char *const *fields;
};
static const char *const string_fields[] = {
    "byte", "char", "find", "format", "gmatch", "gsub", "len", "lower", "match", "rep",
    "reverse", "sub", "upper", NULL,
};
static const char *const table_fields[] = {
    "concat", "insert", "maxn", "remove", "sort", NULL,
};
static const char *const math_fields[] = {
    "abs", "acos", "asin", "atan", "atan2", "ceil", "cos", "cosh", "deg", "exp", "floor",
    "fmod", "frexp", "huge", "ldexp", "log", "log10", "max", "min", "modf", "pi", "pow",
    "rad", "random", "randomseed", "sin", "sinh", "sqrt", "tan", "tanh", NULL,
};
static const char *const bit_fields[] = {
    "tobit", "tohex", "bnot", "band", "bor", "bxor", "lshift", "rshift", "arshift", "rol",
    "ror", "bswap", NULL,
};
static const char *const coroutine_fields[] = {
    "create", "resume", "running", "status", "wrap", "yield", "isyieldable", NULL,
};
static const char *const os_fields[] = { "clock", "date", "difftime", "getenv", "time", NULL };
static const char *const debug_fields[] = { "traceback", NULL };
static const struct lib_allow libs[] = {
    { "string", string_fields }, { "table", table_fields }, { "math", math_fields },
    { "bit", bit_fields }, { "coroutine", coroutine_fields }, { "os", os_fields },
    { "debug", debug_fields }, { NULL, NULL },
};

/* Public luna modules scripts may require (read-only views). */
static const char *const luna_modules[] = {
    "luna", "luna.meta", "luna.finalizers", "luna.conditions", "luna.events", "luna.errors",
    "luna.time", "luna.predicates", NULL,
};
/* What scripts get of luna.core.json. */
static const char *const core_json_fields[] = {
    "encode", "decode", "array", "object", "is_array", "is_object", "null", NULL,
};
/* Globals and modules that exist in plain LuaJIT but not here, for clearer
 * messages. */
static const char *const removed_names[] = {
    "io", "dofile", "loadfile", "getfenv", "setfenv", "collectgarbage", "newproxy", "module",
    "package", "jit", "ffi", "gcinfo", NULL,
};

static bool in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return true;
    return false;
}

static void registry_get(lua_State *L, void *key)
{
    lua_pushlightuserdata(L, key);
    lua_rawget(L, LUA_REGISTRYINDEX);
}

/* Sets registry[key] to the value on top (popped). */
static void registry_set(lua_State *L, void *key)
{
    lua_pushlightuserdata(L, key);
    lua_insert(L, -2);
    lua_rawset(L, LUA_REGISTRYINDEX);
}

static void new_weak_table(lua_State *L)
{
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
}

static int abs_index(lua_State *L, int idx)
{
    return idx < 0 && idx > LUA_REGISTRYINDEX ? lua_gettop(L) + idx + 1 : idx;
}

/* ---- read-only views ---------------------------------------------------- */

/* __newindex of a view: upvalue 1 is the view's name ("luna", "string"). */
static int view_newindex(lua_State *L)
{
    const char *path = lua_tostring(L, lua_upvalueindex(1));
    if (lua_type(L, 2) == LUA_TSTRING)
        return luaL_error(L, "%s.%s is read-only", path, lua_tostring(L, 2));
    return luaL_error(L, "%s is read-only", path);
}

/* __index of a standard library's mirror: a field that is not there was
 * left out of the sandbox. */
static int view_missing(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TSTRING)
        return luaL_error(L, "%s.%s is not available to luna scripts",
                          lua_tostring(L, lua_upvalueindex(1)), lua_tostring(L, 2));
    lua_pushnil(L);
    return 1;
}

/* [-0, +1] Pushes the read-only view of the table at idx: an empty table
 * whose metatable reads from a mirror (a snapshot of the table, nested
 * tables as views too) and refuses writes.  One view per table (memoized);
 * strict mirrors raise on fields that are not there. */
static void push_view(lua_State *L, int idx, const char *path, bool strict)
{
    idx = abs_index(L, idx);
    registry_get(L, &k_views);
    int views = lua_gettop(L);
    lua_pushvalue(L, idx);
    lua_rawget(L, views);
    if (!lua_isnil(L, -1)) {
        lua_replace(L, views);
        return;
    }
    lua_pop(L, 1);
    lua_newtable(L);
    int mirror = lua_gettop(L);
    lua_newtable(L);
    int view = lua_gettop(L);
    lua_createtable(L, 0, 3);
    lua_pushvalue(L, mirror);
    lua_setfield(L, -2, "__index");
    lua_pushstring(L, path);
    lua_pushcclosure(L, view_newindex, 1);
    lua_setfield(L, -2, "__newindex");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, view);
    lua_pushvalue(L, idx);
    lua_pushvalue(L, view);
    lua_rawset(L, views);
    registry_get(L, &k_readonly);
    lua_pushvalue(L, view);
    lua_pushvalue(L, mirror);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
        int value = lua_gettop(L);
        lua_pushvalue(L, value - 1);
        if (lua_istable(L, value)) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s.%s", path,
                     lua_type(L, value - 1) == LUA_TSTRING ? lua_tostring(L, value - 1) : "?");
            push_view(L, value, sub, strict);
        } else {
            lua_pushvalue(L, value);
        }
        lua_rawset(L, mirror);
    }
    if (strict) {
        lua_createtable(L, 0, 1);
        lua_pushstring(L, path);
        lua_pushcclosure(L, view_missing, 1);
        lua_setfield(L, -2, "__index");
        lua_setmetatable(L, mirror);
    }
    lua_pushvalue(L, view);
    lua_replace(L, views);
    lua_settop(L, views);
}

/* Pushes what the view or environment at idx shows, or nothing (returns
 * false) if idx is an ordinary table. */
static bool push_shown(lua_State *L, int idx)
{
    idx = abs_index(L, idx);
    registry_get(L, &k_readonly);
    lua_pushvalue(L, idx);
    lua_rawget(L, -2);
    lua_remove(L, -2);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return false;
    }
    return true;
}

/* ---- globals ------------------------------------------------------------ */

/* __index of an environment's globals table: (globals, name). */
static int undefined_global(lua_State *L)
{
    if (lua_type(L, 2) != LUA_TSTRING)
        return luaL_error(L, "undefined global (a %s key)", luaL_typename(L, 2));
    const char *name = lua_tostring(L, 2);
    if (in_list(removed_names, name))
        return luaL_error(L, "undefined global '%s' (%s is not available to luna scripts)", name,
                          name);
    return luaL_error(L, "undefined global '%s'", name);
}

/* __newindex of an environment: (env, name, value). */
static int assign_global(lua_State *L)
{
    const char *name = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?";
    return luaL_error(L, "assignment to global '%s': luna scripts cannot set globals, "
                         "use a local (local %s = ...)", name, name);
}

/* ---- sandboxed base functions ------------------------------------------- */

static int sb_getmetatable(lua_State *L)
{
    luaL_checkany(L, 1);
    if (!lua_getmetatable(L, 1)) {
        lua_pushnil(L);
        return 1;
    }
    int mt = lua_gettop(L);
    lua_pushliteral(L, "__metatable");
    lua_rawget(L, mt);
    if (!lua_isnil(L, -1))
        return 1;
    lua_pop(L, 1);
    registry_get(L, &k_script_mts);
    lua_pushvalue(L, mt);
    lua_rawget(L, -2);
    if (lua_toboolean(L, -1)) {
        lua_pushvalue(L, mt);
        return 1;
    }
    lua_pushnil(L);
    return 1;
}

static int sb_setmetatable(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    int t = lua_type(L, 2);
    luaL_argcheck(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table expected");
    if (lua_getmetatable(L, 1)) {
        lua_pushliteral(L, "__metatable");
        lua_rawget(L, -2);
        if (!lua_isnil(L, -1))
            return luaL_error(L, "cannot change a protected metatable");
        lua_pop(L, 2);
    }
    if (t == LUA_TTABLE) {
        registry_get(L, &k_script_mts);
        lua_pushvalue(L, 2);
        lua_pushboolean(L, 1);
        lua_rawset(L, -3);
        lua_pop(L, 1);
    }
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

static int sb_rawset(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkany(L, 2);
    luaL_checkany(L, 3);
    if (push_shown(L, 1))
        return luaL_error(L, "rawset: the table is read-only");
    lua_settop(L, 3);
    lua_rawset(L, 1);
    return 1;
}

/* pairs: upvalue 1 the real pairs, 2 the real next. */
static int sb_pairs(lua_State *L)
{
    luaL_checkany(L, 1);
    if (lua_istable(L, 1) && push_shown(L, 1)) {
        lua_pushvalue(L, lua_upvalueindex(2));
        lua_insert(L, -2);
        lua_pushnil(L);
        return 3;
    }
    lua_settop(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, 1, 3);
    return 3;
}

/* ipairs: upvalue 1 the real ipairs. */
static int sb_ipairs(lua_State *L)
{
    luaL_checkany(L, 1);
    if (lua_istable(L, 1) && push_shown(L, 1))
        lua_replace(L, 1);
    lua_settop(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, 1, 3);
    return 3;
}

/* A message handler for xpcall: upvalue 1 the script's handler.  When the
 * watchdog raised the error, LuaJIT runs the handler while the hook is
 * still marked active, so the hook could not stop a handler that loops:
 * then the message goes through unchanged instead. */
static int handler_trampoline(lua_State *L)
{
    const struct luna_watchdog_guard *g = luna_watchdog_current(L);
    if (g && g->stop != LUNA_WATCHDOG_RUNNING)
        return 1;
    luna_watchdog_check_cstack(L);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

static int wrap_handler(lua_State *L)
{
    if (lua_isfunction(L, 1)) {
        lua_settop(L, 1);
        lua_pushcclosure(L, handler_trampoline, 1);
    }
    return 1;
}

void luna_sandbox_protect_top(lua_State *L)
{
    registry_get(L, &k_host_threads);
    if (lua_istable(L, -1)) {
        lua_pushvalue(L, -2);
        lua_pushboolean(L, 1);
        lua_rawset(L, -3);
    }
    lua_pop(L, 1);
}

/* is_host(v): whether v is a coroutine the host resumes (upvalue-free;
 * reads the registry set). */
static int is_host_thread(lua_State *L)
{
    registry_get(L, &k_host_threads);
    lua_pushvalue(L, 1);
    lua_rawget(L, -2);
    return 1;
}

/* coroutine.resume refuses the host's coroutines: a script resuming a
 * reconcile that waits for the API would hand it a forged answer, and the
 * real one would arrive for a coroutine that moved on.  A Lua function
 * around the real resume, like xpcall below. */
static const char resume_src[] =
    "local resume, is_host, error, check = ...\n"
    "return function(co, ...)\n"
    "  check()\n"
    "  if is_host(co) then\n"
    "    error(\"coroutine.resume: this coroutine belongs to the host (a reconcile waiting for \"\n"
    "      .. \"the API, or a callback thread): scripts cannot resume it\", 2)\n"
    "  end\n"
    "  return resume(co, ...)\n"
    "end\n";

/* A library function that calls back into Lua, behind the C-stack guard:
 * a Lua function that checks, then tail-calls the real one (so no C frame
 * of its own). */
static const char guarded_src[] =
    "local check, f = ...\n"
    "return function(...)\n"
    "  check()\n"
    "  return f(...)\n"
    "end\n";

/* coroutine.wrap: the function it returns resumes, so that is guarded. */
static const char wrap_src[] =
    "local check, wrap = ...\n"
    "return function(fn)\n"
    "  local w = wrap(fn)\n"
    "  return function(...)\n"
    "    check()\n"
    "    return w(...)\n"
    "  end\n"
    "end\n";

/* Replaces t[name] (t on top) with the result of chunk(check, t[name]). */
static int guard_field(lua_State *L, const char *chunk, size_t len, const char *name,
                       luna_error *err)
{
    if (luaL_loadbuffer(L, chunk, len, "=luna.sandbox") != 0) {
        luna_error_set(err, LUNA_ELUA, "sandbox %s: %s", name, lua_tostring(L, -1));
        lua_pop(L, 1);
        return LUNA_ELUA;
    }
    lua_pushcfunction(L, luna_watchdog_check_cstack);
    lua_getfield(L, -3, name);
    lua_call(L, 2, 1);
    lua_setfield(L, -2, name);
    return 0;
}

/* xpcall stays a Lua function around the real one, so a reconcile can
 * still yield (call the API) inside it. */
static const char xpcall_src[] =
    "local xpcall, wrap = ...\n"
    "return function(f, handler, ...)\n"
    "  return xpcall(f, wrap(handler), ...)\n"
    "end\n";

/* load(chunk [, chunkname [, mode [, env]]]): upvalue 1 the environment. */
static int sb_load(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TSTRING)
        return luaL_argerror(L, 1, "string expected (luna scripts load text chunks only)");
    size_t len;
    const char *s = lua_tolstring(L, 1, &len);
    const char *name = luaL_optstring(L, 2, s);
    const char *mode = luaL_optstring(L, 3, "t");
    lua_settop(L, 4); /* what is pushed below goes above the arguments */
    if (strchr(mode, 'b') || (len > 0 && s[0] == '\033')) {
        lua_pushnil(L);
        lua_pushliteral(L, "binary chunks cannot be loaded by luna scripts");
        return 2;
    }
    /* A name of the file ("@path") or literal ("=text") form would pass
     * for one of the host's files in tracebacks and in print's source=:
     * the script's chunk keeps the [string "..."] form. */
    if (name[0] == '@' || name[0] == '=')
        name = lua_pushfstring(L, "(load) %s", name); /* kept below the chunk */
    if (luaL_loadbufferx(L, s, len, name, "t") != 0) {
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;
    }
    if (!lua_isnoneornil(L, 4)) {
        luaL_checktype(L, 4, LUA_TTABLE);
        lua_pushvalue(L, 4);
    } else {
        lua_pushvalue(L, lua_upvalueindex(1));
    }
    lua_setfenv(L, -2);
    return 1;
}

/* print(...): one info log line, its text the message (escaped and cut to
 * the line bound by the writer: nothing a script prints can start a line
 * of its own or pass for the host's keys). */
static int sb_print(lua_State *L)
{
    if (!luna_log_enabled(LUNA_LOG_INFO))
        return 0;
    luna_watchdog_check_cstack(L); /* __tostring may print again */
    int n = lua_gettop(L);
    lua_getglobal(L, "tostring");
    int ts = lua_gettop(L);
    if (n == 1) {
        /* one value: its string as it is, not a copy */
        lua_pushvalue(L, ts);
        lua_pushvalue(L, 1);
        lua_call(L, 1, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            return luaL_error(L, "'tostring' must return a string to 'print'");
    } else {
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        for (int i = 1; i <= n; i++) {
            /* the separator first: the buffer may only grow while its own
             * parts are on top of the stack */
            if (i > 1)
                luaL_addchar(&b, ' ');
            lua_pushvalue(L, ts);
            lua_pushvalue(L, i);
            lua_call(L, 1, 1);
            if (lua_type(L, -1) != LUA_TSTRING)
                return luaL_error(L, "'tostring' must return a string to 'print'");
            luaL_addvalue(&b);
        }
        luaL_pushresult(&b);
    }
    size_t text_len;
    const char *text = lua_tolstring(L, -1, &text_len);
    const char *pairs[8];
    int np = 0;
    /* Who is printing comes from the guard the code runs under: the
     * sandbox knows nothing of controllers. */
    const struct luna_watchdog_guard *g = luna_watchdog_current(L);
    char serial[2 * sizeof(unsigned long) + 1];
    if (g && g->owner) {
        pairs[2 * np] = "controller";
        pairs[2 * np++ + 1] = g->owner;
    }
    if (g && g->key) {
        pairs[2 * np] = "key";
        pairs[2 * np++ + 1] = g->key;
    }
    if (g && g->serial) {
        snprintf(serial, sizeof serial, "%lx", g->serial);
        pairs[2 * np] = "reconcile_id";
        pairs[2 * np++ + 1] = serial;
    }
    char source[PATH_MAX + 32];
    lua_Debug ar;
    if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
        snprintf(source, sizeof source, "%s:%d", ar.short_src, ar.currentline);
        pairs[2 * np] = "source";
        pairs[2 * np++ + 1] = source;
    }
    luna_log_record(LUNA_LOG_INFO, text, text_len, pairs, np, NULL, 0);
    return 0;
}

/* ---- require ------------------------------------------------------------ */

/* [-0, +1] The view scripts get of luna.core (memoized). */
static void push_core_view(lua_State *L)
{
    registry_get(L, &k_core_view);
    if (!lua_isnil(L, -1))
        return;
    lua_pop(L, 1);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "luna.core");
    lua_call(L, 1, 1);
    int core = lua_gettop(L);
    lua_createtable(L, 0, 2);
    int out = lua_gettop(L);
    lua_getfield(L, core, "version");
    lua_setfield(L, out, "version");
    lua_getfield(L, core, "json");
    int json = lua_gettop(L);
    lua_createtable(L, 0, 8);
    for (const char *const *f = core_json_fields; *f; f++) {
        lua_getfield(L, json, *f);
        lua_setfield(L, -2, *f);
    }
    lua_setfield(L, out, "json");
    /* digests (sha256) are pure functions: scripts may use them */
    lua_getfield(L, core, "crypto");
    lua_setfield(L, out, "crypto");
    push_view(L, out, "luna.core", false);
    lua_pushvalue(L, -1);
    registry_set(L, &k_core_view);
    lua_replace(L, core);
    lua_settop(L, core);
}

static bool valid_module_name(const char *name)
{
    bool start = true;
    for (const char *p = name; *p; p++) {
        if (*p == '.') {
            if (start)
                return false;
            start = true;
        } else if (*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                   (!start && *p >= '0' && *p <= '9')) {
            start = false;
        } else {
            return false;
        }
    }
    return !start;
}

static int load_in_realm(lua_State *L, const char *path, const char *dir, int realm,
                         luna_error *err);

/* Adds path to the tracked dependencies, if tracking (once per path). */
static void record_dep(lua_State *L, const char *path)
{
    registry_get(L, &k_deps);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        return;
    }
    lua_getfield(L, -1, path);
    bool seen = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (!seen) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, path);
        lua_pushstring(L, path);
        lua_rawseti(L, -2, (int)lua_objlen(L, -2) + 1);
    }
    lua_pop(L, 1);
}

void luna_sandbox_deps_begin(lua_State *L)
{
    lua_newtable(L);
    registry_set(L, &k_deps);
}

void luna_sandbox_deps_end(lua_State *L)
{
    registry_get(L, &k_deps);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        lua_newtable(L);
    }
    lua_pushnil(L);
    registry_set(L, &k_deps);
}

/* require(name): upvalue 1 the controllers directory, upvalue 2 the realm
 * (the module instances of one controller file, see push_env). */
static int sb_require(lua_State *L)
{
    luna_watchdog_check_cstack(L);
    const char *name = luaL_checkstring(L, 1);
    const char *dir = lua_tostring(L, lua_upvalueindex(1));
    int realm = lua_upvalueindex(2);
    if (in_list(luna_modules, name)) {
        lua_getglobal(L, "require");
        lua_pushstring(L, name);
        lua_call(L, 1, 1);
        if (!lua_istable(L, -1))
            return 1;
        push_view(L, -1, name, false);
        return 1;
    }
    if (strcmp(name, "luna.core") == 0) {
        push_core_view(L);
        return 1;
    }
    if (strcmp(name, "math") == 0) {
        lua_pushlightuserdata(L, &k_realm_math);
        lua_rawget(L, realm);
        return 1;
    }
    for (const struct lib_allow *lib = libs; lib->name; lib++) {
        if (strcmp(lib->name, name) == 0) {
            registry_get(L, &k_base);
            lua_getfield(L, -1, name);
            return 1;
        }
    }
    if (in_list(removed_names, name) || strncmp(name, "luna.", 5) == 0 ||
        strncmp(name, "jit.", 4) == 0)
        return luaL_error(L, "module '%s' is not available to luna scripts (they may require "
                             "luna, luna.meta, luna.finalizers, luna.conditions, luna.events, "
                             "luna.errors, luna.time, luna.predicates, luna.core and modules "
                             "under the controllers directory)", name);
    if (!valid_module_name(name))
        return luaL_error(L, "invalid module name '%s': use dotted names of letters, digits "
                             "and underscores", name);
    /* Two homes: DIR/NAME.mod.lua, a flat file name that survives a
     * ConfigMap (whose keys cannot hold '/') and that the loader skips as
     * a controller, and DIR/a/b.lua for `a.b` (luna run only).  A name
     * both answer is refused rather than guessed. */
    char path[PATH_MAX], flat[PATH_MAX];
    int len = snprintf(path, sizeof path, "%s/%s.lua", dir, name);
    int flen = snprintf(flat, sizeof flat, "%s/%s.mod.lua", dir, name);
    if (len < 0 || (size_t)len >= sizeof path || flen < 0 || (size_t)flen >= sizeof flat)
        return luaL_error(L, "module name '%s' is too long", name);
    for (char *p = path + strlen(dir) + 1; p < path + len - 4; p++)
        if (*p == '.')
            *p = '/';
    if (access(flat, F_OK) == 0) {
        if (access(path, F_OK) == 0)
            return luaL_error(L, "module '%s' is ambiguous: both %s and %s exist (keep one)",
                              name, flat, path);
        memcpy(path, flat, (size_t)flen + 1);
        len = flen;
    }
    record_dep(L, path);
    int modules = realm;
    lua_getfield(L, modules, path);
    if (lua_touserdata(L, -1) == &k_loading)
        return luaL_error(L, "module '%s' requires itself (loop while loading %s)", name, path);
    if (!lua_isnil(L, -1))
        return 1;
    lua_pop(L, 1);
    if (access(path, R_OK) != 0)
        return luaL_error(L, "module '%s' not found: no file %s or %s (luna scripts may "
                             "require luna, its helpers and modules of the controllers "
                             "directory)",
                          name, flat, path);
    luna_error err;
    if (load_in_realm(L, path, dir, realm, &err) < 0) {
        lua_pushstring(L, err.msg);
        return lua_error(L);
    }
    lua_pushlightuserdata(L, &k_loading);
    lua_setfield(L, modules, path);
    lua_pushstring(L, name);
    if (lua_pcall(L, 1, 1, 0) != 0) {
        lua_pushnil(L);
        lua_setfield(L, modules, path);
        return lua_error(L);
    }
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, modules, path);
    return 1;
}

/* ---- environments ------------------------------------------------------- */

/* [-0, +1] A new realm: the table of the module instances of one controller
 * file (path -> the module's value, or &k_loading while it loads) and, at
 * &k_realm_math, its own math (a read-only view whose random and
 * randomseed draw from a generator of its own, script/random.h).  Every
 * file of the realm requires through it, so a controller file and the
 * modules it requires share module instances, and no two controller files
 * share any (docs/isolation.md, "Nothing shared between controllers"). */
static void push_realm(lua_State *L)
{
    lua_newtable(L);
    int realm = lua_gettop(L);
    lua_newtable(L);
    int math = lua_gettop(L);
    registry_get(L, &k_base);
    lua_getfield(L, -1, "math");
    if (push_shown(L, -1)) {
        int mirror = lua_gettop(L);
        for (lua_pushnil(L); lua_next(L, mirror); lua_pop(L, 1)) {
            lua_pushvalue(L, -2);
            lua_pushvalue(L, -2);
            lua_rawset(L, math);
        }
    }
    lua_settop(L, math);
    luna_lua_random_push(L);
    lua_setfield(L, math, "randomseed");
    lua_setfield(L, math, "random");
    push_view(L, math, "math", true);
    lua_pushlightuserdata(L, &k_realm_math);
    lua_insert(L, -2);
    lua_rawset(L, realm);
    lua_settop(L, realm);
}

/* [-0, +1] A fresh environment: an empty table that reads the file's
 * globals table (a copy of the template plus require, load, loadstring,
 * _G and the realm's math) and refuses assignments; the globals table
 * raises on unknown names.  realm: the realm's stack index. */
static void push_env(lua_State *L, const char *dir, int realm)
{
    realm = abs_index(L, realm);
    lua_newtable(L);
    int globals = lua_gettop(L);
    registry_get(L, &k_base);
    int tmpl = lua_gettop(L);
    for (lua_pushnil(L); lua_next(L, tmpl); lua_pop(L, 1)) {
        lua_pushvalue(L, -2);
        lua_pushvalue(L, -2);
        lua_rawset(L, globals);
    }
    lua_pop(L, 1);
    lua_newtable(L);
    int env = lua_gettop(L);
    lua_pushstring(L, dir);
    lua_pushvalue(L, realm);
    lua_pushcclosure(L, sb_require, 2);
    lua_setfield(L, globals, "require");
    lua_pushlightuserdata(L, &k_realm_math);
    lua_rawget(L, realm);
    lua_setfield(L, globals, "math");
    lua_pushvalue(L, env);
    lua_pushcclosure(L, sb_load, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, globals, "load");
    lua_setfield(L, globals, "loadstring");
    lua_pushvalue(L, env);
    lua_setfield(L, globals, "_G");
    registry_get(L, &k_globals_mt);
    lua_setmetatable(L, globals);
    lua_createtable(L, 0, 3);
    lua_pushvalue(L, globals);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, assign_global);
    lua_setfield(L, -2, "__newindex");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, env);
    registry_get(L, &k_readonly);
    lua_pushvalue(L, env);
    lua_pushvalue(L, globals);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    lua_replace(L, globals);
}

/* Loads path as a text chunk whose environment requires through the realm
 * at realm; pushes the function, or sets err and pushes nothing. */
static int load_in_realm(lua_State *L, const char *path, const char *dir, int realm,
                         luna_error *err)
{
    realm = abs_index(L, realm);
    if (luaL_loadfilex(L, path, "t") != 0) {
        luna_error_set(err, LUNA_ELUA, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return LUNA_ELUA;
    }
    push_env(L, dir, realm);
    lua_setfenv(L, -2);
    return 0;
}

int luna_sandbox_loadfile(lua_State *L, const char *path, const char *dir, luna_error *err)
{
    push_realm(L);
    int rc = load_in_realm(L, path, dir, -1, err);
    if (rc == 0)
        lua_remove(L, -2); /* the realm lives on in the chunk's require */
    else
        lua_pop(L, 1);
    return rc;
}

/* ---- installation -------------------------------------------------------- */

/* os.time() and os.date(fmt) without a time read base/clock.h's wall
 * clock (the fake clock's under `luna test`, so time-based logic can be
 * stepped with env:advance); given one, the real function (upvalue 1)
 * does the rest, as it does every other form. */
static int call_real(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

static int sandbox_os_time(lua_State *L)
{
    if (lua_isnoneornil(L, 1)) {
        lua_pushnumber(L, floor(luna_wall_clock_now()));
        return 1;
    }
    return call_real(L);
}

static int sandbox_os_date(lua_State *L)
{
    if (lua_isnoneornil(L, 2)) {
        lua_settop(L, 1);
        lua_pushnumber(L, floor(luna_wall_clock_now()));
    }
    return call_real(L);
}

/* [-0, +1] A copy of the real library `name` with only the fields listed. */
static void push_lib_copy(lua_State *L, const struct lib_allow *lib)
{
    lua_getglobal(L, lib->name);
    int real = lua_gettop(L);
    lua_newtable(L);
    if (lua_istable(L, real)) {
        for (const char *const *f = lib->fields; *f; f++) {
            lua_getfield(L, real, *f);
            lua_setfield(L, -2, *f);
        }
    }
    lua_remove(L, real);
}

/* [-0, +0] luna_sandbox_preload's protected body. */
static int preload_modules(lua_State *L)
{
    for (const char *const *m = luna_modules; *m; m++) {
        lua_getglobal(L, "require");
        lua_pushstring(L, *m);
        lua_call(L, 1, 0);
    }
    push_core_view(L);
    lua_pop(L, 1);
    return 0;
}

int luna_sandbox_preload(lua_State *L, luna_error *err)
{
    lua_pushcfunction(L, preload_modules);
    if (lua_pcall(L, 0, 0, 0) != 0) {
        const char *msg = lua_tostring(L, -1);
        luna_error_set(err, LUNA_ELUA, "loading luna's Lua library: %s", msg ? msg : "(error)");
        lua_pop(L, 1);
        return LUNA_ELUA;
    }
    return 0;
}

int luna_sandbox_install(lua_State *L, luna_error *err)
{
    lua_getglobal(L, "string");
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        return luna_error_set(err, LUNA_ELUA, "the sandbox needs the standard libraries");
    }
    lua_pop(L, 1);
    new_weak_table(L);
    registry_set(L, &k_views);
    new_weak_table(L);
    registry_set(L, &k_readonly);
    new_weak_table(L);
    registry_set(L, &k_script_mts);

    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, undefined_global);
    lua_setfield(L, -2, "__index");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    registry_set(L, &k_globals_mt);

    lua_newtable(L);
    int base = lua_gettop(L);
    for (const char *const *n = base_names; *n; n++) {
        lua_getglobal(L, *n);
        lua_setfield(L, base, *n);
    }
    lua_pushcfunction(L, sb_print);
    lua_setfield(L, base, "print");
    lua_pushcfunction(L, sb_getmetatable);
    lua_setfield(L, base, "getmetatable");
    lua_pushcfunction(L, sb_setmetatable);
    lua_setfield(L, base, "setmetatable");
    lua_pushcfunction(L, sb_rawset);
    lua_setfield(L, base, "rawset");
    lua_getglobal(L, "pairs");
    lua_getglobal(L, "next");
    lua_pushcclosure(L, sb_pairs, 2);
    lua_setfield(L, base, "pairs");
    lua_getglobal(L, "ipairs");
    lua_pushcclosure(L, sb_ipairs, 1);
    lua_setfield(L, base, "ipairs");
    if (luaL_loadbuffer(L, xpcall_src, sizeof xpcall_src - 1, "=luna.sandbox") != 0) {
        luna_error_set(err, LUNA_ELUA, "sandbox xpcall: %s", lua_tostring(L, -1));
        lua_settop(L, base - 1);
        return LUNA_ELUA;
    }
    lua_getglobal(L, "xpcall");
    lua_pushcfunction(L, wrap_handler);
    lua_call(L, 2, 1);
    lua_setfield(L, base, "xpcall");
    new_weak_table(L);
    registry_set(L, &k_host_threads);
    for (const struct lib_allow *lib = libs; lib->name; lib++) {
        push_lib_copy(L, lib);
        int rc = 0;
        if (strcmp(lib->name, "string") == 0) {
            /* our own pattern functions: they count their steps (class 4) */
            luna_pattern_register(L);
            rc = guard_field(L, guarded_src, sizeof guarded_src - 1, "format", err);
            lua_pushvalue(L, -1);
            registry_set(L, &k_string_methods);
        } else if (strcmp(lib->name, "table") == 0) {
            /* our own sort: counts its comparisons (class 4), C-stack guard */
            luna_sort_register(L);
        } else if (strcmp(lib->name, "coroutine") == 0) {
            rc = guard_field(L, wrap_src, sizeof wrap_src - 1, "wrap", err);
            if (rc == 0 && luaL_loadbuffer(L, resume_src, sizeof resume_src - 1,
                                           "=luna.sandbox") != 0) {
                luna_error_set(err, LUNA_ELUA, "sandbox resume: %s", lua_tostring(L, -1));
                rc = LUNA_ELUA;
            }
            if (rc == 0) {
                lua_getfield(L, -2, "resume");
                lua_pushcfunction(L, is_host_thread);
                lua_getglobal(L, "error");
                lua_pushcfunction(L, luna_watchdog_check_cstack);
                lua_call(L, 4, 1);
                lua_setfield(L, -2, "resume");
            }
        } else if (strcmp(lib->name, "os") == 0) {
            lua_getfield(L, -1, "time");
            lua_pushcclosure(L, sandbox_os_time, 1);
            lua_setfield(L, -2, "time");
            lua_getfield(L, -1, "date");
            lua_pushcclosure(L, sandbox_os_date, 1);
            lua_setfield(L, -2, "date");
        }
        if (rc < 0) {
            lua_settop(L, base - 1);
            return rc;
        }
        push_view(L, -1, lib->name, true);
        lua_setfield(L, base, lib->name);
        lua_pop(L, 1);
    }
    registry_set(L, &k_base);

    /* Methods on strings ("x"):rep(3) read the string metatable's __index:
     * the same functions as the sandbox's string (without dump, with our
     * pattern functions and guards). */
    lua_pushliteral(L, "");
    if (lua_getmetatable(L, -1)) {
        registry_get(L, &k_string_methods);
        lua_setfield(L, -2, "__index");
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return 0;
}

/* ---- the API scripts can reach (luna stubs' spec) ---------------------- */

struct api_walk {
    void (*fn)(void *ud, const char *path, const char *type);
    void *ud;
    int readonly, seen; /* stack slots: k_readonly, tables already walked */
};

/* Reports every string key of the table shown by the view at idx (or the
 * table itself), recursing into tables. */
static void walk_api(lua_State *L, struct api_walk *w, int idx, const char *path, int depth)
{
    idx = abs_index(L, idx);
    lua_pushvalue(L, idx);
    lua_rawget(L, w->readonly);
    int table = lua_istable(L, -1) ? lua_gettop(L) : idx;
    lua_pushvalue(L, table);
    lua_rawget(L, w->seen);
    bool seen = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (seen || depth > 6) {
        lua_settop(L, idx);
        return;
    }
    lua_pushvalue(L, table);
    lua_pushboolean(L, 1);
    lua_rawset(L, w->seen);
    for (lua_pushnil(L); lua_next(L, table); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            continue;
        char sub[512];
        snprintf(sub, sizeof sub, "%s.%s", path, lua_tostring(L, -2));
        w->fn(w->ud, sub, luaL_typename(L, -1));
        if (lua_istable(L, -1))
            walk_api(L, w, -1, sub, depth + 1);
    }
    lua_settop(L, idx);
}

static int list_api(lua_State *L)
{
    struct api_walk *w = lua_touserdata(L, 1);
    registry_get(L, &k_readonly);
    w->readonly = lua_gettop(L);
    lua_newtable(L);
    w->seen = lua_gettop(L);
    for (const char *const *m = luna_modules; *m; m++) {
        lua_getglobal(L, "require");
        lua_pushstring(L, *m);
        lua_call(L, 1, 1);
        w->fn(w->ud, *m, luaL_typename(L, -1));
        if (lua_istable(L, -1)) {
            push_view(L, -1, *m, false);
            walk_api(L, w, -1, *m, 0);
        }
        lua_settop(L, w->seen);
    }
    push_core_view(L);
    w->fn(w->ud, "luna.core", "table");
    walk_api(L, w, -1, "luna.core", 0);
    return 0;
}

int luna_sandbox_list_api(lua_State *L, void (*fn)(void *ud, const char *path, const char *type),
                              void *ud, luna_error *err)
{
    struct api_walk w = { .fn = fn, .ud = ud };
    int top = lua_gettop(L);
    lua_pushcfunction(L, list_api);
    lua_pushlightuserdata(L, &w);
    int rc = lua_pcall(L, 1, 0, 0);
    if (rc != 0) {
        luna_error_set(err, LUNA_ELUA, "listing the script API: %s",
                       lua_tostring(L, -1) ? lua_tostring(L, -1) : "error");
        lua_settop(L, top);
        return LUNA_ELUA;
    }
    lua_settop(L, top);
    return 0;
}
