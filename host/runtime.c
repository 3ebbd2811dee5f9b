/* runtime.c — see runtime.h. */
#include "runtime.h"

#include <lauxlib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "controller.h"
#include "discovery.h"
#include "http.h"
#include "informer_factory.h"
#include "kube_client.h"
#include "kubeconfig.h"
#include "log.h"
#include "loop.h"
#include "lua_host.h"
#include "lua_runtime.h"
#include "watchdog.h"

#define SYNC_CHECK_S 0.05
#define DEFAULT_GRACE_S 30.0

struct runtime {
    const struct luna_run_config *cfg;
    lua_State *L;
    int thread_ref;
    struct luna_kubeconfig *kcfg;
    luna_http_client *http;
    struct luna_kube_client *kc;
    struct luna_discovery *disc;
    struct luna_informer_factory *factory;
    struct luna_controller **controllers;
    size_t n;
    bool started, stopping;
    size_t draining;
    int exit_code;
    ev_timer sync_check;
    ev_timer grace;
    ev_signal sigterm, sigint;
};

static void on_drained(void *ud)
{
    struct runtime *rt = ud;
    if (rt->draining > 0 && --rt->draining == 0) {
        luna_info("shutdown complete");
        ev_break(luna_loop(), EVBREAK_ALL);
    }
}

static void grace_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    luna_warn("shutdown grace period over: abandoning in-flight reconciles");
    ev_break(loop, EVBREAK_ALL);
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct runtime *rt = w->data;
    if (rt->stopping) {
        luna_warn("second signal: exiting now");
        rt->exit_code = 1;
        ev_break(loop, EVBREAK_ALL);
        return;
    }
    rt->stopping = true;
    luna_info("shutdown requested", "signal", w->signum == SIGTERM ? "SIGTERM" : "SIGINT");
    ev_timer_stop(loop, &rt->sync_check);
    double grace = rt->cfg->grace_period > 0 ? rt->cfg->grace_period : DEFAULT_GRACE_S;
    ev_timer_set(&rt->grace, grace, 0.);
    ev_timer_start(loop, &rt->grace);
    rt->draining = rt->n + 1;
    for (size_t i = 0; i < rt->n; i++)
        luna_controller_shutdown(rt->controllers[i], on_drained, rt);
    on_drained(rt); /* the +1 above: no controllers also ends here */
}

static void sync_check_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct runtime *rt = w->data;
    for (size_t i = 0; i < rt->n; i++)
        if (!luna_controller_synced(rt->controllers[i]))
            return;
    ev_timer_stop(loop, w);
    char count[16];
    snprintf(count, sizeof count, "%zu", luna_informer_factory_count(rt->factory));
    luna_info("caches synced", "informers", count);
    rt->started = true;
    for (size_t i = 0; i < rt->n; i++)
        luna_controller_start(rt->controllers[i]);
}

static int connect_api(struct runtime *rt, luna_error *err)
{
    struct luna_kubeconfig_options kopts;
    luna_kubeconfig_options_from_env(&kopts);
    kopts.path = rt->cfg->kubeconfig;
    kopts.context = rt->cfg->context;
    int rc = luna_kubeconfig_load(&kopts, &rt->kcfg, err);
    if (rc < 0)
        return rc;
    struct luna_kubeconfig *k = rt->kcfg;
    luna_info("kubeconfig loaded", "source", k->source, "server", k->server,
              "context", k->context ? k->context : "(in-cluster)", "namespace", k->namespace,
              "auth", luna_auth_kind_name(k->auth));
    if (!(rt->http = luna_http_client_new(luna_loop(), err)))
        return err->code;
    if ((rc = luna_kube_client_new(rt->kcfg, rt->http, &rt->kc, err)) < 0 ||
        (rc = luna_discovery_new(rt->kc, &rt->disc, err)) < 0 ||
        (rc = luna_informer_factory_new(rt->kc, rt->disc, &rt->factory, err)) < 0)
        return rc;
    return 0;
}

static int build_controllers(struct runtime *rt, luna_error *err)
{
    lua_State *L = rt->L;
    int n = luna_lua_host_count(L);
    rt->controllers = calloc((size_t)(n ? n : 1), sizeof *rt->controllers);
    if (!rt->controllers)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    lua_State *T = lua_newthread(L);
    rt->thread_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    struct luna_controller_env env = {
        .factory = rt->factory, .clock = luna_clock_monotonic(), .L = L, .T = T,
    };
    lua_getfield(L, LUA_REGISTRYINDEX, "luna.controllers");
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        int rc = luna_controller_new(&env, -1, &rt->controllers[rt->n], err);
        lua_pop(L, 1);
        if (rc < 0) {
            lua_pop(L, 1);
            return rc;
        }
        rt->n++;
    }
    lua_pop(L, 1);
    return 0;
}

static void teardown(struct runtime *rt)
{
    struct ev_loop *loop = luna_loop();
    ev_timer_stop(loop, &rt->sync_check);
    ev_timer_stop(loop, &rt->grace);
    ev_signal_stop(loop, &rt->sigterm);
    ev_signal_stop(loop, &rt->sigint);
    for (size_t i = 0; i < rt->n; i++)
        luna_controller_free(rt->controllers[i]);
    free(rt->controllers);
    luna_informer_factory_free(rt->factory);
    luna_discovery_free(rt->disc);
    luna_kube_client_free(rt->kc);
    luna_http_client_free(rt->http);
    luna_kubeconfig_free(rt->kcfg);
    if (rt->L)
        lua_close(rt->L);
}

int luna_runtime_run(const struct luna_run_config *cfg)
{
    struct runtime rt = { .cfg = cfg, .thread_ref = LUA_NOREF };
    struct ev_loop *loop = luna_loop();
    luna_error err = { 0 };
    const char *lib;
    if (luna_lua_host_find_lib(cfg->argv0, &lib, &err) < 0 ||
        !(rt.L = luna_lua_host_new(lib, &err))) {
        luna_error("startup failed", "error", err.msg);
        return 1;
    }
    if (cfg->limits)
        luna_watchdog_configure(rt.L, cfg->limits);
    luna_lua_runtime_install(rt.L, NULL, NULL);
    int n = luna_lua_host_load_dir(rt.L, cfg->dir, &err);
    if (n < 0) {
        luna_error("controllers failed to load", "dir", cfg->dir, "error", err.msg);
        teardown(&rt);
        return 1;
    }
    char count[16];
    snprintf(count, sizeof count, "%d", n);
    luna_info("controllers loaded", "dir", cfg->dir, "count", count);

    if (connect_api(&rt, &err) < 0) {
        luna_error("kubeconfig failed", "error", err.msg);
        teardown(&rt);
        return 1;
    }
    luna_lua_runtime_install(rt.L, rt.kc, rt.disc);
    if (build_controllers(&rt, &err) < 0) {
        luna_error("controller setup failed", "error", err.msg);
        teardown(&rt);
        return 1;
    }

    ev_timer_init(&rt.sync_check, sync_check_cb, SYNC_CHECK_S, SYNC_CHECK_S);
    rt.sync_check.data = &rt;
    ev_timer_start(loop, &rt.sync_check);
    ev_timer_init(&rt.grace, grace_cb, 0., 0.);
    ev_signal_init(&rt.sigterm, signal_cb, SIGTERM);
    rt.sigterm.data = &rt;
    ev_signal_init(&rt.sigint, signal_cb, SIGINT);
    rt.sigint.data = &rt;
    ev_signal_start(loop, &rt.sigterm);
    ev_signal_start(loop, &rt.sigint);

    ev_run(loop, 0);
    int code = rt.exit_code;
    teardown(&rt);
    return code;
}
