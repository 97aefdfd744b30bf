#!/bin/sh
# task_fiber.sh -- test/task_pool.sh's checks on test/task_fiber: the same
# three tenants' jobs as Boost.Fiber fibers on 4 threads sharing a ready
# queue, each fiber a task through cpprof::fiber_tasks, resumed on
# whichever thread is free, each job parked in wait_for_io, holding a
# cpprof::scope step=job across every switch: its labels go with the task.
TASK_PROGRAM=task_fiber PARK_FUNCTION=wait_for_io SCOPE_LABEL=step=job \
    exec sh "$(dirname "$0")/task_pool.sh"
