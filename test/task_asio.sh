#!/bin/sh
# task_asio.sh -- test/task_pool.sh's checks on test/task_asio: the same
# three tenants' jobs on Boost.Asio, an io_context run by 4 threads, each
# step a timer's handler run in the job's task by cpprof::run_in on
# whichever thread is free, each job parked in wait_for_io.
TASK_PROGRAM=task_asio PARK_FUNCTION=wait_for_io \
    exec sh "$(dirname "$0")/task_pool.sh"
