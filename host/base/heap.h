#ifndef LUNA_HEAP_H
#define LUNA_HEAP_H

/* Gives the heap's free pages back to the system after a burst of
 * allocations (a list applied, a seed loaded, a burst of reconciles):
 * glibc's free() returns memory only from the top of the heap, so the
 * holes a burst leaves would keep RSS at its peak.  It walks every free
 * chunk whether it frees or not (0.3 ms after syncing 20,000 objects,
 * ~0.1 s on a fragmented 1 GB heap): call it after bursts, not per item.
 * Nothing without glibc. */

#ifdef __GLIBC__
#include <malloc.h>
static inline void luna_heap_trim(void) { malloc_trim(0); }
#else
static inline void luna_heap_trim(void) {}
#endif

#endif
