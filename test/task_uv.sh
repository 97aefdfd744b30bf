#!/bin/sh
# task_uv.sh -- test/task_pool.sh's checks on test/task_uv: the same three
# tenants' work as requests on a libuv server whose connections are tasks,
# all run by one loop thread (so no job moves between threads: labels
# must follow the connection), each connection parked in await_request
# between requests.
TASK_PROGRAM=task_uv PARK_FUNCTION=await_request MOVES=0 \
    exec sh "$(dirname "$0")/task_pool.sh"
