/* process_metrics.c — see process_metrics.h. */
#include "serve/process_metrics.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The fields of /proc/self/stat we use. */
struct proc_stat {
    double utime, stime;      /* clock ticks */
    double starttime;         /* ticks after boot */
    double vsize;             /* bytes */
    double rss;               /* pages */
};

static int read_stat(struct proc_stat *st)
{
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f)
        return -1;
    char line[1024];
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    /* The command name (field 2) may contain spaces and parentheses: the
     * fields we want follow the last ')'. */
    const char *p = strrchr(line, ')');
    if (!p)
        return -1;
    /* Fields 3.. : state ppid pgrp session tty_nr tpgid flags minflt
     * cminflt majflt cmajflt utime stime cutime cstime priority nice
     * num_threads itrealvalue starttime vsize rss */
    unsigned long long utime, stime, starttime, vsize;
    long long rss;
    int got = sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
                     "%*d %*d %*d %*d %*d %*d %llu %llu %lld",
                     &utime, &stime, &starttime, &vsize, &rss);
    if (got != 5)
        return -1;
    st->utime = (double)utime;
    st->stime = (double)stime;
    st->starttime = (double)starttime;
    st->vsize = (double)vsize;
    st->rss = (double)rss;
    return 0;
}

static double ticks_per_second(void)
{
    long t = sysconf(_SC_CLK_TCK);
    return t > 0 ? (double)t : 100.0;
}

static double cpu_seconds(void *ud)
{
    struct proc_stat st;
    return read_stat(&st) ? NAN : (st.utime + st.stime) / ticks_per_second();
}

static double resident_bytes(void *ud)
{
    struct proc_stat st;
    long page = sysconf(_SC_PAGESIZE);
    return read_stat(&st) || page <= 0 ? NAN : st.rss * (double)page;
}

static double virtual_bytes(void *ud)
{
    struct proc_stat st;
    return read_stat(&st) ? NAN : st.vsize;
}

static double open_fds(void *ud)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return NAN;
    double n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* not the descriptor opendir itself holds */
}

static double max_fds(void *ud)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return NAN;
    return rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur;
}

/* Boot time (btime in /proc/stat) + starttime: seconds since the epoch. */
static double start_time(void *ud)
{
    struct proc_stat st;
    if (read_stat(&st))
        return NAN;
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return NAN;
    char line[256];
    double btime = NAN;
    while (fgets(line, sizeof line, f)) {
        unsigned long long b;
        if (sscanf(line, "btime %llu", &b) == 1) {
            btime = (double)b;
            break;
        }
    }
    fclose(f);
    return btime + st.starttime / ticks_per_second();
}

int luna_process_metrics_register(struct luna_metrics *reg, luna_error *err)
{
    static const struct {
        const char *name, *help;
        enum luna_metric_type type;
        luna_metric_fn fn;
    } series[] = {
        { "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
          LUNA_METRIC_COUNTER, cpu_seconds },
        { "process_resident_memory_bytes", "Resident memory size in bytes.",
          LUNA_METRIC_GAUGE, resident_bytes },
        { "process_virtual_memory_bytes", "Virtual memory size in bytes.",
          LUNA_METRIC_GAUGE, virtual_bytes },
        { "process_open_fds", "Number of open file descriptors.", LUNA_METRIC_GAUGE,
          open_fds },
        { "process_max_fds", "Maximum number of open file descriptors.", LUNA_METRIC_GAUGE,
          max_fds },
        { "process_start_time_seconds",
          "Start time of the process since unix epoch in seconds.", LUNA_METRIC_GAUGE,
          start_time },
    };
    for (size_t i = 0; i < sizeof series / sizeof series[0]; i++) {
        struct luna_metric_desc d = {
            .name = series[i].name, .help = series[i].help, .type = series[i].type,
        };
        struct luna_metric_family *f;
        int rc = luna_metrics_register(reg, &d, &f, err);
        if (rc)
            return rc;
        if (luna_metric_lookup(f, NULL))
            continue;
        rc = luna_metric_func(f, NULL, series[i].fn, NULL, NULL, NULL, err);
        if (rc)
            return rc;
    }
    return 0;
}
