/* controller/loader.c — see controller/loader.h. */
#include "controller/loader.h"

#include <dirent.h>
#include <lauxlib.h>
#include <limits.h>
#include <lualib.h>
#include <stdbool.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "lua/lua_core.h"
#include "controller/spec.h"
#include "script/sandbox.h"
#include "lua/lua_util.h"
#include "script/watchdog.h"

#define CONTROLLERS_KEY "luna.controllers"
#define SOURCES_KEY "luna.controller_sources"
#define FAILURES_KEY "luna.controller_failures"
#define WEBHOOKS_KEY "luna.webhooks"

static int is_lib_dir(const char *dir)
{
    char probe[PATH_MAX];
    int n = snprintf(probe, sizeof probe, "%s/luna/init.lua", dir);
    return n > 0 && (size_t)n < sizeof probe && access(probe, R_OK) == 0;
}

int luna_loader_find_lib(const char *argv0, const char **dir, luna_error *err)
{
    static char found[PATH_MAX];
    const char *env = getenv("LUNA_LUA_DIR");
    if (env && *env) {
        if (!is_lib_dir(env))
            return luna_error_set(err, LUNA_ENOTFOUND,
                                  "LUNA_LUA_DIR=%s has no luna/init.lua", env);
        snprintf(found, sizeof found, "%s", env);
        *dir = found;
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        if (!argv0 || !realpath(argv0, exe))
            return luna_error_set(err, LUNA_ENOTFOUND, "cannot locate the luna executable");
    } else {
        exe[n] = '\0';
    }
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    /* build/luna, build/test/luna, PREFIX/bin/luna */
    static const char *const rel[] = { "/../lua", "/../../lua", "/../share/lua/5.1" };
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char cand[PATH_MAX];
        int len = snprintf(cand, sizeof cand, "%s%s", exe, rel[i]);
        if (len > 0 && (size_t)len < sizeof cand && is_lib_dir(cand) && realpath(cand, found)) {
            *dir = found;
            return 0;
        }
    }
    return luna_error_set(err, LUNA_ENOTFOUND,
                          "cannot find luna's Lua library (luna/init.lua) near %s; set LUNA_LUA_DIR",
                          exe);
}

/* luna.core in a runtime state: the script-facing table and the
 * controller spec reader luna.controller{} uses (controller/spec.h).  The
 * runtime adds core.runtime when it installs the script API
 * (api/api.h). */
static int open_core(lua_State *L)
{
    luna_lua_core_push(L);
    luna_lua_controller_spec_register(L);
    return 1;
}

lua_State *luna_loader_new(const char *lib_dir, luna_error *err)
{
    /* Born with the watchdog's allocator, so each controller's share of the
     * heap is its own account (watchdog.h); a LuaJIT that refuses custom
     * allocators gets the heap cap alone. */
    luna_error why = { 0 };
    lua_State *L = luna_watchdog_newstate(NULL, &why);
    if (!L) {
        L = luaL_newstate();
        if (!L) {
            luna_error_set(err, LUNA_ENOMEM, "cannot create a Lua state: out of memory");
            return NULL;
        }
        static bool warned;
        if (!warned) {
            warned = true;
            luna_warn("no per-controller Lua memory accounts: only the heap cap applies",
                      "error", why.msg);
        }
    }
    lua_atpanic(L, luna_lua_panic);
    luaL_openlibs(L);

    lua_getglobal(L, "package");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua", lib_dir, lib_dir);
    lua_setfield(L, -2, "path");
    lua_getfield(L, -1, "preload");
    lua_pushcfunction(L, open_core);
    lua_setfield(L, -2, "luna.core");
    lua_pop(L, 2);

    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, CONTROLLERS_KEY);
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, SOURCES_KEY);
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, FAILURES_KEY);
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, WEBHOOKS_KEY);
    if (luna_watchdog_install(L, NULL, err) < 0 || luna_sandbox_install(L, err) < 0) {
        lua_close(L);
        return NULL;
    }
    return L;
}

static void hex_digest(EVP_MD_CTX *ctx, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    static const char hex[] = "0123456789abcdef";
    for (unsigned int i = 0; i < len && i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
}

/* Hex SHA-256 of the file's bytes ("" if it cannot be read). */
static void file_sha256(const char *path, char out[65])
{
    out[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(ctx);
        fclose(f);
        return;
    }
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        EVP_DigestUpdate(ctx, buf, n);
    fclose(f);
    hex_digest(ctx, out);
    EVP_MD_CTX_free(ctx);
}

/* The digest of a controller: its file's, or when it required modules of
 * the controllers directory while loading (the list at deps), the SHA-256
 * of "<file digest>\n" and "<path> <digest>\n" per module in path order,
 * so a change to a module it uses is a change of the controller. */
static void controller_sha256(lua_State *L, const char *path, int deps, char out[65])
{
    file_sha256(path, out);
    int n = (int)lua_objlen(L, deps);
    if (n == 0)
        return;
    lua_getglobal(L, "table");
    lua_getfield(L, -1, "sort");
    lua_pushvalue(L, deps);
    lua_call(L, 1, 0); /* strings only: cannot raise */
    lua_pop(L, 1);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(ctx);
        return;
    }
    EVP_DigestUpdate(ctx, out, strlen(out));
    EVP_DigestUpdate(ctx, "\n", 1);
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, deps, i);
        const char *dep = lua_tostring(L, -1);
        char sha[65];
        file_sha256(dep, sha);
        EVP_DigestUpdate(ctx, dep, strlen(dep));
        EVP_DigestUpdate(ctx, " ", 1);
        EVP_DigestUpdate(ctx, sha, strlen(sha));
        EVP_DigestUpdate(ctx, "\n", 1);
        lua_pop(L, 1);
    }
    hex_digest(ctx, out);
    EVP_MD_CTX_free(ctx);
}

/* Pushes package.loaded["luna.webhook"][fn] (nil when the module is not
 * loaded: then no file declared a webhook). */
static void webhook_fn(lua_State *L, const char *fn)
{
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
    lua_getfield(L, -1, "luna.webhook");
    if (lua_istable(L, -1))
        lua_getfield(L, -1, fn);
    else
        lua_pushnil(L);
    lua_replace(L, -3);
    lua_pop(L, 1);
}

/* [-1, +2]: checks the value a controller file returned is a controller
 * luna.controller made, or a set of webhooks luna.webhooks made; pushes it
 * and the list of the webhook declarations it carries (or nil), or raises. */
static int check_controller(lua_State *L)
{
    bool controller = luna_controller_spec_get(L, 1) != NULL;
    webhook_fn(L, "collect");
    if (lua_isfunction(L, -1)) {
        lua_pushvalue(L, 1);
        lua_call(L, 1, 1);
    }
    if (!controller && lua_isnil(L, -1))
        return luaL_error(L, "the file must return luna.controller{...}, got %s "
                             "(a file of webhooks only returns luna.webhooks{...})",
                          luaL_typename(L, 1));
    lua_pushvalue(L, 1);
    lua_insert(L, -2);
    return 2;
}

/* Appends each declaration of the list at idx to the state's webhooks, as
 * { file = path, decl = d, account = the file's memory account }; a name
 * already declared is an error. */
static int add_webhooks(lua_State *L, int idx, const char *path, unsigned account,
                        luna_error *err)
{
    if (!lua_istable(L, idx))
        return 0;
    lua_getfield(L, LUA_REGISTRYINDEX, WEBHOOKS_KEY);
    int all = lua_gettop(L);
    int have = (int)lua_objlen(L, all), had = have;
    int n = (int)lua_objlen(L, idx);
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, i);
        lua_getfield(L, -1, "path");
        const char *p = lua_tostring(L, -1);
        for (int j = 1; p && j <= have; j++) {
            lua_rawgeti(L, all, j);
            lua_getfield(L, -1, "decl");
            lua_getfield(L, -1, "path");
            bool dup = lua_tostring(L, -1) && strcmp(lua_tostring(L, -1), p) == 0;
            lua_getfield(L, -3, "file");
            if (dup) {
                luna_error_set(err, LUNA_ELUA, "%s: webhook %s is already declared in %s", path,
                               p, lua_tostring(L, -1));
                lua_settop(L, all);
                for (int k = have; k > had; k--) { /* none of this file's */
                    lua_pushnil(L);
                    lua_rawseti(L, all, k);
                }
                lua_settop(L, all - 1);
                return LUNA_ELUA;
            }
            lua_pop(L, 4);
        }
        lua_pop(L, 1);
        lua_createtable(L, 0, 3);
        lua_pushstring(L, path);
        lua_setfield(L, -2, "file");
        lua_pushnumber(L, account);
        lua_setfield(L, -2, "account");
        lua_insert(L, -2);
        lua_setfield(L, -2, "decl");
        lua_rawseti(L, all, ++have);
    }
    lua_settop(L, all - 1);
    return 0;
}

/* The load error of path when luna.controller refused the spec: "path:line:
 * message" without a traceback (the line sets the offending field, else the
 * line of the call when the message has it); false when the error at the
 * top is something else. */
static bool spec_load_error(lua_State *L, const char *path, luna_error *err)
{
    char msg[512], field[128];
    if (!luna_controller_spec_last_error(L, msg, sizeof msg, field, sizeof field))
        return false;
    const char *raised = lua_tostring(L, -1);
    const char *at = raised ? strstr(raised, msg) : NULL;
    if (!msg[0] || !at)
        return false; /* a refused spec the script caught, then another error */
    int line = field[0] ? luna_controller_spec_field_line(path, field) : 0;
    if (line == 0 && at > raised) {
        /* "chunk:N: message" from the caller's frame */
        const char *colon = at - 2 >= raised && at[-1] == ' ' && at[-2] == ':' ? at - 2 : NULL;
        const char *digits = colon;
        while (digits && digits > raised && digits[-1] >= '0' && digits[-1] <= '9')
            digits--;
        if (digits && digits < colon && digits > raised && digits[-1] == ':')
            line = atoi(digits);
    }
    if (line > 0)
        luna_error_set(err, LUNA_ELUA, "%s:%d: %s", path, line, msg);
    else
        luna_error_set(err, LUNA_ELUA, "%s: %s", path, msg);
    return true;
}

int luna_loader_load_file(lua_State *L, const char *path, luna_error *err)
{
    int top = lua_gettop(L);
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (luna_sandbox_preload(L, err) < 0 || luna_sandbox_loadfile(L, path, dir, err) < 0)
        return LUNA_ELUA;
    char stale[8], stale_field[8];
    luna_controller_spec_last_error(L, stale, sizeof stale, stale_field, sizeof stale_field);
    lua_pushcfunction(L, luna_lua_traceback);
    lua_insert(L, -2);
    /* What the file keeps (module-level tables, the modules it requires)
     * is charged to its own account, which its controller then takes over
     * (luna_loader_account). */
    struct luna_watchdog_limits lim = luna_watchdog_get_config(L).limits;
    lim.account = luna_watchdog_account_new(L, path);
    struct luna_watchdog_guard g = { .what = "controller file", .limits = &lim };
    luna_sandbox_deps_begin(L);
    int rc = luna_watchdog_pcall(L, 0, 1, -2, &g);
    luna_sandbox_deps_end(L);
    lua_insert(L, -2); /* traceback, deps, result */
    int deps = lua_gettop(L) - 1;
    if (rc != 0) {
        /* A message without the file's position (raised from a tail call,
         * or a non-string error) gets the path in front. */
        const char *msg = lua_tostring(L, -1);
        size_t plen = strlen(path);
        if (g.stop != LUNA_WATCHDOG_RUNNING) {
            char reason[256];
            luna_watchdog_describe(&g, reason, sizeof reason);
            luna_error_set(err, LUNA_ELUA, "%s: %s", path, reason);
        } else if (spec_load_error(L, path, err)) {
            /* set */
        } else if (msg && strncmp(msg, path, plen) == 0) {
            luna_error_set(err, LUNA_ELUA, "%s", msg);
        } else {
            luna_error_set(err, LUNA_ELUA, "%s: %s", path, msg ? msg : "(error)");
        }
        lua_settop(L, top);
        if (g.stop == LUNA_WATCHDOG_MEMORY)
            luna_watchdog_collect(L);
        return LUNA_ELUA;
    }
    /* stack: traceback, deps, value */
    lua_pushcfunction(L, check_controller);
    lua_insert(L, -2);
    if (lua_pcall(L, 1, 2, -4) != 0) {
        luna_error_set(err, LUNA_ELUA, "%s: %s", path, lua_tostring(L, -1));
        lua_settop(L, top);
        return LUNA_ELUA;
    }
    /* stack: traceback, deps, value, webhooks */
    if (add_webhooks(L, lua_gettop(L), path, lim.account, err) < 0) {
        lua_settop(L, top);
        return LUNA_ELUA;
    }
    lua_pop(L, 1);
    if (!luna_controller_spec_get(L, -1)) {
        lua_settop(L, top); /* webhooks only */
        return 0;
    }
    lua_getfield(L, LUA_REGISTRYINDEX, CONTROLLERS_KEY);
    lua_pushvalue(L, -2);
    int n = (int)lua_objlen(L, -2) + 1;
    lua_rawseti(L, -2, n);
    /* Where it came from, and a digest of the file to tell on reload
     * whether the code changed. */
    char sha[65];
    controller_sha256(L, path, deps, sha);
    lua_getfield(L, LUA_REGISTRYINDEX, SOURCES_KEY);
    lua_createtable(L, 0, 3);
    lua_pushstring(L, path);
    lua_setfield(L, -2, "file");
    lua_pushstring(L, sha);
    lua_setfield(L, -2, "sha256");
    lua_pushnumber(L, lim.account);
    lua_setfield(L, -2, "account");
    lua_rawseti(L, -2, n);
    lua_settop(L, top);
    return 0;
}

int luna_loader_source(lua_State *L, int i, const char **file, const char **sha256)
{
    lua_getfield(L, LUA_REGISTRYINDEX, SOURCES_KEY);
    lua_rawgeti(L, -1, i);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 2);
        return LUNA_ENOTFOUND;
    }
    lua_getfield(L, -1, "file");
    lua_getfield(L, -2, "sha256");
    /* the strings stay referenced by the registry table */
    *file = lua_tostring(L, -2);
    *sha256 = lua_tostring(L, -1);
    lua_pop(L, 4);
    return 0;
}

/* The "account" field of entry i of the registry list at key, or 0. */
static unsigned entry_account(lua_State *L, const char *key, int i)
{
    lua_getfield(L, LUA_REGISTRYINDEX, key);
    lua_rawgeti(L, -1, i);
    unsigned id = 0;
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "account");
        id = (unsigned)lua_tonumber(L, -1);
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
    return id;
}

unsigned luna_loader_account(lua_State *L, int i)
{
    return entry_account(L, SOURCES_KEY, i);
}

int luna_loader_count(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, CONTROLLERS_KEY);
    int n = (int)lua_objlen(L, -1);
    lua_pop(L, 1);
    return n;
}

static int has_lua_suffix(const char *name)
{
    size_t len = strlen(name);
    return len > 4 && name[0] != '.' && strcmp(name + len - 4, ".lua") == 0;
}

static int compare_names(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static bool has_suffix(const char *name, const char *suffix)
{
    size_t len = strlen(name), slen = strlen(suffix);
    return len > slen && strcmp(name + len - slen, suffix) == 0;
}

/* A controller file: *.lua, except the specs `luna test` runs (*_test.lua),
 * which live next to the controllers they test, and the modules
 * controllers require (*.mod.lua, docs/authoring.md "Modules"). */
static int select_lua(const struct dirent *d)
{
    return has_lua_suffix(d->d_name) && !has_suffix(d->d_name, "_test.lua") &&
           !has_suffix(d->d_name, ".mod.lua");
}

/* Appends { file = path, error = msg } to the state's load failures. */
static void record_failure(lua_State *L, const char *path, const char *msg)
{
    lua_getfield(L, LUA_REGISTRYINDEX, FAILURES_KEY);
    lua_createtable(L, 0, 2);
    lua_pushstring(L, path);
    lua_setfield(L, -2, "file");
    lua_pushstring(L, msg);
    lua_setfield(L, -2, "error");
    lua_rawseti(L, -2, (int)lua_objlen(L, -2) + 1);
    lua_pop(L, 1);
}

int luna_loader_failure_count(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, FAILURES_KEY);
    int n = lua_istable(L, -1) ? (int)lua_objlen(L, -1) : 0;
    lua_pop(L, 1);
    return n;
}

int luna_loader_failure(lua_State *L, int i, const char **file, const char **error)
{
    lua_getfield(L, LUA_REGISTRYINDEX, FAILURES_KEY);
    lua_rawgeti(L, -1, i);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 2);
        return LUNA_ENOTFOUND;
    }
    lua_getfield(L, -1, "file");
    lua_getfield(L, -2, "error");
    /* the strings stay referenced by the registry table */
    *file = lua_tostring(L, -2);
    *error = lua_tostring(L, -1);
    lua_pop(L, 4);
    return 0;
}

int luna_loader_each_file(const char *dir, bool require_all,
                          int (*load)(void *ud, const char *path, luna_error *err),
                          void (*failed)(void *ud, const char *file, const char *msg), void *ud,
                          luna_error *err)
{
    struct dirent **names;
    int n = scandir(dir, &names, select_lua, compare_names);
    if (n < 0)
        return luna_error_set(err, LUNA_EIO, "%s: cannot read directory: %m", dir);
    if (n == 0) {
        free(names);
        return luna_error_set(err, LUNA_ENOTFOUND, "%s: no *.lua controller files", dir);
    }
    int loaded = 0, nfailed = 0;
    luna_error first = { 0 };
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX];
        luna_error one = { 0 };
        int len = snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (len < 0 || (size_t)len >= sizeof path) {
            luna_error_set(&one, LUNA_EINVAL, "%s/%s: path too long", dir, names[i]->d_name);
            luna_error("controller load failed", "file", names[i]->d_name, "error", one.msg);
            failed(ud, names[i]->d_name, one.msg);
            if (nfailed++ == 0)
                first = one;
        } else if (load(ud, path, &one) == 0) {
            loaded++;
        } else {
            luna_error("controller load failed", "file", path, "error", one.msg);
            failed(ud, path, one.msg);
            if (nfailed++ == 0)
                first = one;
        }
        free(names[i]);
    }
    free(names);
    if (nfailed && (require_all || loaded == 0)) {
        luna_error_set(err, first.code, "%d of %d controller files failed to load; first: %s",
                       nfailed, n, first.msg);
        return first.code;
    }
    return loaded;
}

static int load_into(void *ud, const char *path, luna_error *err)
{
    return luna_loader_load_file(ud, path, err);
}

static void failed_into(void *ud, const char *file, const char *msg)
{
    record_failure(ud, file, msg);
}

int luna_loader_load_dir(lua_State *L, const char *dir, bool require_all, luna_error *err)
{
    return luna_loader_each_file(dir, require_all, load_into, failed_into, L, err);
}

int luna_loader_webhook_count(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, WEBHOOKS_KEY);
    int n = lua_istable(L, -1) ? (int)lua_objlen(L, -1) : 0;
    lua_pop(L, 1);
    return n;
}

int luna_loader_push_webhook(lua_State *L, int i)
{
    lua_getfield(L, LUA_REGISTRYINDEX, WEBHOOKS_KEY);
    lua_rawgeti(L, -1, i);
    lua_remove(L, -2);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        return LUNA_ENOTFOUND;
    }
    lua_getfield(L, -1, "decl");
    lua_remove(L, -2);
    return 0;
}

unsigned luna_loader_webhook_account(lua_State *L, int i)
{
    return entry_account(L, WEBHOOKS_KEY, i);
}
