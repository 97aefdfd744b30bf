/*
 * census_tasks.h -- the census's reading of the parked tasks (task.h),
 * grouped as they are read (census_tasks.c).  census.c's alone; never
 * called from a signal handler.
 */
#ifndef CPPROF_CENSUS_TASKS_H
#define CPPROF_CENSUS_TASKS_H

#include "census.h"

#include <stdbool.h>

/* Reads the tasks parked now into c->parked, grouped by stack, label set
 * and reason, each group holding a reference to its tasks' own set (the
 * caller marks it, census.h), and with `each` every task into c->tasks.
 * c has no parked tasks before.  On an error (-ENOMEM) c holds what was
 * read, for census_release.  Takes the registry lock as
 * task_foreach_parked does. */
int census_read_parked(census *c, bool each);

#endif
