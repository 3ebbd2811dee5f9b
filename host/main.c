/*
 * main.c — the luna command line.
 *
 *   luna --version | --help
 *   luna run [--kubeconfig FILE] [--context NAME] [--log-level L] [--log-format F]
 *            [--reconcile-instruction-limit N] [--reconcile-time-limit S]
 *            [--lua-memory-limit MIB] DIR
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "devserver.h"
#include "error.h"
#include "kubeconfig.h"
#include "log.h"
#include "lua_host.h"
#include "runtime.h"
#include "watchdog.h"

static void usage(FILE *out)
{
    fputs("usage: luna [--version] [--help] <command> [options]\n"
          "\n"
          "commands:\n"
          "  run [options] DIR     run the controllers in DIR/*.lua\n"
          "  dev-server [options]  run an in-memory Kubernetes API server (--help for options)\n"
          "\n"
          "run options:\n"
          "  --kubeconfig FILE     kubeconfig to use (default: $KUBECONFIG, ~/.kube/config,\n"
          "                        or the in-cluster service account)\n"
          "  --context NAME        kubeconfig context (default: current-context)\n"
          "  --log-level LEVEL     debug, info, warn or error (default: info)\n"
          "  --log-format FORMAT   text or json (default: text)\n"
          "  --reconcile-instruction-limit N\n"
          "                        Lua instructions a reconcile may run without yielding\n"
          "                        (default: 100000000; 0: unlimited)\n"
          "  --reconcile-time-limit SECONDS\n"
          "                        seconds a reconcile may run without yielding\n"
          "                        (default: 2; 0: unlimited)\n"
          "  --lua-memory-limit MIB\n"
          "                        cap on the scripts' Lua heap (default: 128; 0: none)\n",
          out);
}

struct run_opts {
    const char *kubeconfig;
    const char *context;
    const char *dir;
    struct luna_watchdog_config limits;
};

/* A number >= 0 for a limit flag, or -1. */
static double parse_limit(const char *name, const char *value)
{
    char *end;
    double v = strtod(value, &end);
    if (end == value || *end || !(v >= 0) || v > 1e15) {
        fprintf(stderr, "luna: --%s wants a number >= 0, got '%s'\n", name, value);
        return -1;
    }
    return v;
}

static int parse_log_opts(const char *name, const char *value)
{
    if (strcmp(name, "log-level") == 0) {
        int level = luna_log_level_parse(value);
        if (level < 0) {
            fprintf(stderr, "luna: unknown log level '%s'\n", value);
            return -1;
        }
        luna_log_set_level((enum luna_log_level)level);
    } else if (strcmp(name, "log-format") == 0) {
        if (strcmp(value, "json") == 0)
            luna_log_set_format(LUNA_LOG_JSON);
        else if (strcmp(value, "text") == 0)
            luna_log_set_format(LUNA_LOG_TEXT);
        else {
            fprintf(stderr, "luna: unknown log format '%s'\n", value);
            return -1;
        }
    }
    return 0;
}

static int cmd_run(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "kubeconfig", required_argument, NULL, 'k' },
        { "context", required_argument, NULL, 'c' },
        { "log-level", required_argument, NULL, 'l' },
        { "log-format", required_argument, NULL, 'f' },
        { "reconcile-instruction-limit", required_argument, NULL, 'I' },
        { "reconcile-time-limit", required_argument, NULL, 'T' },
        { "lua-memory-limit", required_argument, NULL, 'M' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct run_opts opts = { .limits = luna_watchdog_config_default() };
    int ch, idx;
    double v;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
        switch (ch) {
        case 'k': opts.kubeconfig = optarg; break;
        case 'c': opts.context = optarg; break;
        case 'l':
        case 'f':
            if (parse_log_opts(longopts[idx].name, optarg) < 0)
                return 2;
            break;
        case 'I':
        case 'T':
        case 'M':
            if ((v = parse_limit(longopts[idx].name, optarg)) < 0)
                return 2;
            if (ch == 'I')
                opts.limits.limits.instructions = v;
            else if (ch == 'T')
                opts.limits.limits.seconds = v;
            else
                opts.limits.memory = v * 1048576.0 >= (double)SIZE_MAX
                                         ? SIZE_MAX : (size_t)(v * 1048576.0);
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fputs("luna run: expected one controllers directory\n", stderr);
        usage(stderr);
        return 2;
    }
    opts.dir = argv[optind];

    struct luna_run_config cfg = {
        .argv0 = argv[0],
        .dir = opts.dir,
        .kubeconfig = opts.kubeconfig,
        .context = opts.context,
        .limits = &opts.limits,
    };
    return luna_runtime_run(&cfg);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("luna %s\n", LUNA_VERSION);
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "dev-server") == 0)
        return luna_devserver_main(argc - 1, argv + 1);
    fprintf(stderr, "luna: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
