#!/bin/sh
# task_coro.sh -- test/task_pool.sh's checks on test/task_coro: the same
# three tenants' jobs as C++20 coroutines whose promise derives from
# cpprof::task_promise, parked at their co_await in run_job (the stack's
# frame is the coroutine's body), holding a cpprof::scope step=job across
# every co_await: its labels go with the coroutine's task.
TASK_PROGRAM=task_coro PARK_FUNCTION=run_job SCOPE_LABEL=step=job \
    exec sh "$(dirname "$0")/task_pool.sh"
