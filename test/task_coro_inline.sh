#!/bin/sh
# task_coro_inline.sh -- test/task_coro.sh's checks on test/task_coro
# --inline: the coroutines also resume one another on their own threads,
# as an event's set() resumes its waiters (a step delivers the replies
# other jobs wait for, resuming them from its body, inline, while it runs
# in its own task) and by symmetric transfer from such a resumed job.  A
# job resumed inline runs in its own task, not under the labels of the
# job that resumed it: no sample in a tenant's work carries another
# tenant's labels, and each tenant's CPU share is its true one.
TASK_PROGRAM=task_coro TASK_ARGS=--inline PARK_FUNCTION=run_job \
    SCOPE_LABEL=step=job exec sh "$(dirname "$0")/task_pool.sh"
