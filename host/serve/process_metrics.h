/*
 * process_metrics.h — client_golang's process collector for luna: the
 * process_* series dashboards chart next to controller-runtime's.
 *
 *   process_cpu_seconds_total       counter  user + system CPU time
 *   process_resident_memory_bytes   gauge
 *   process_virtual_memory_bytes    gauge
 *   process_open_fds                gauge
 *   process_max_fds                 gauge    the soft RLIMIT_NOFILE
 *   process_start_time_seconds      gauge    unix time the process started
 *
 * Each is a function series read from /proc/self at scrape time (Linux);
 * a value that cannot be read is NaN.  Uses metrics.h.  Runs on the loop
 * thread.
 *
 * Ownership: the families are registered in reg and stay there until
 * unregistered (or the registry is freed); nothing else is kept.
 */
#ifndef LUNA_PROCESS_METRICS_H
#define LUNA_PROCESS_METRICS_H

#include "base/error.h"
#include "serve/metrics.h"

/* Registers the six series.  LUNA_EINVAL if a family of one of these names
 * differs, LUNA_ENOMEM.  Registering twice is a no-op. */
int luna_process_metrics_register(struct luna_metrics *reg, luna_error *err);

#endif
