#!/bin/sh
# nginx.sh -- Debian's nginx, a pre-forking server, in zero-code mode with
# its default master and 2 workers, `daemon off` and `daemon on`: the
# address asked for serves (the master; with `daemon on`, the daemon the
# started process forked); its index lists both workers, armed, by their
# title (`nginx: worker process`); until asked, each runs its 1 thread and
# holds no socket of cpprof's; under a keep-alive request load a 2 s CPU
# profile of each, asked through the master's address
# (/debug/pprof/pid/PID/profile), answers 200, one at least with samples
# in nginx's request path (ngx_http_*); and each worker's part is gone
# again, its 1 thread and no socket of cpprof's, within
# CPPROF_HTTP_WORKER_IDLE_MS of its profile, with a generous bound.
set -u
. "$(dirname "$0")/http_lib.sh"
zero_code_preload
NGINX=${NGINX:-/usr/sbin/nginx}
[ -x "$NGINX" ] || fail "no $NGINX: install nginx-light"
master=
end_nginx() {
    [ -n "$master" ] || master=$(cat "$tmp/ngx/nginx.pid" 2>/dev/null)
    [ -n "$master" ] && kill -QUIT "$master" 2>/dev/null
    for tick in $(seq 100); do
        [ -n "$master" ] && kill -0 "$master" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$master" ] && kill -KILL "$master" 2>/dev/null
    master=
}
trap 'end_nginx; cleanup' EXIT

# A worker's part goes after this long without a request: short, so that
# the test sees it go.
idle_ms=1500

# launch_nginx: nginx on port + port_span (random_port), serving cpprof
# on $port.  As root its workers run as nobody, who must reach the prefix
# directory.
launch_nginx() {
    nport=$((port + port_span))
    mkdir -p "$tmp/ngx" && chmod 755 "$tmp" "$tmp/ngx"
    cat >"$tmp/ngx/nginx.conf" <<CONF
daemon $daemon;
worker_processes 2;
pid $tmp/ngx/nginx.pid;
error_log $tmp/ngx/error.log info;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $tmp/ngx/body;
    proxy_temp_path $tmp/ngx/proxy;
    fastcgi_temp_path $tmp/ngx/fastcgi;
    uwsgi_temp_path $tmp/ngx/uwsgi;
    scgi_temp_path $tmp/ngx/scgi;
    server {
        listen 127.0.0.1:$nport;
        location / { return 200 "hello\n"; }
    }
}
CONF
    : >"$tmp/nginx.err"
    LD_PRELOAD=$PRELOAD CPPROF_HTTP=127.0.0.1:$port \
        CPPROF_HTTP_WORKER_IDLE_MS=$idle_ms "$NGINX" -p "$tmp/ngx" \
        -c "$tmp/ngx/nginx.conf" -e "$tmp/ngx/error.log" \
        </dev/null >"$tmp/nginx.out" 2>>"$tmp/nginx.err" &
}
# Ready: nginx answers, and the index lists both workers.
nginx_ready() {
    curl -s --max-time 2 "http://127.0.0.1:$nport/" >/dev/null &&
        curl -s --max-time 2 "$base/?format=json" >"$tmp/index.json" &&
        jq -r '.forked_processes[] | select(.name == "nginx") |
               "\(.pid) \(.url)"' "$tmp/index.json" >"$tmp/listed" &&
        [ "$(wc -l <"$tmp/listed")" -eq 2 ]
}

# check_mode on|off
check_mode() {
    daemon=$1
    # A daemon's first process exits at once: readiness is judged by
    # the index alone, for up to 30 s.
    serve_on_free_port "nginx (daemon $daemon)" "$tmp/nginx.err" \
        launch_nginx true
    for tick in $(seq 300); do nginx_ready && break; sleep 0.1; done
    nginx_ready || fail "daemon $daemon: the index never listed 2 nginx workers; the started process $demo_pid: $(grep -s '^State' "/proc/$demo_pid/status" || echo exited); listening: $(ss -Hltnp | grep nginx); index: $(cat "$tmp/index.json" "$tmp/nginx.err" "$tmp/ngx/error.log")"
    master=$(cat "$tmp/ngx/nginx.pid")
    # nginx has sent stderr to its error log by then, which cpprof does
    # not write to (warn.c): who listens tells.
    listener=$(ss -Hltnp "sport = :$port" | sed -n 's/.*pid=\([0-9]*\),.*/\1/p')
    [ "$listener" = "$master" ] ||
        fail "daemon $daemon: pid '$listener' listens on $port, not the master $master"
    served=$(curl -s --max-time 5 "$base/cmdline" | tr '\0' ' ')
    case $served in
    *nginx*) ;;
    *) fail "daemon $daemon: $base serves '$served', not nginx" ;;
    esac
    for pid in $(awk '{ print $1 }' "$tmp/listed"); do
        [ "$(cat "/proc/$pid/stat" | awk '{ print $4 }')" = "$master" ] ||
            fail "daemon $daemon: listed pid $pid is not a child of the master $master"
        costs_nothing "$pid" "$master" ||
            fail "daemon $daemon: worker, not yet asked for: $(worker_cost "$pid" "$master")"
        jq -e --argjson p "$pid" --argjson m "$master" --arg u "$base/pid/$pid/" \
            '.forked_processes[] | select(.pid == $p) |
             .title == "nginx: worker process" and .parent == $m and
             .state == "armed" and .url == $u' "$tmp/index.json" >/dev/null ||
            fail "daemon $daemon: the index lists worker $pid as $(jq -c --argjson p "$pid" '.forked_processes[] | select(.pid == $p)' "$tmp/index.json"), not armed, titled 'nginx: worker process', forked by $master, at $base/pid/$pid/"
    done
    echo "ok: daemon $daemon: both workers listed by their title, armed, 1 thread each and no socket of cpprof's"
    # Load on two keep-alive connections, for longer than the profiles.
    for c in 1 2; do
        curl -s -o /dev/null "http://127.0.0.1:$nport/[1-200000]" &
        echo $! >>"$tmp/load.pids"
    done
    found=0 asked=
    while read -r pid url; do
        curl -s --max-time 60 -o "$tmp/w$pid.pb.gz" -w '%{http_code}\n' \
            "$base/pid/$pid/profile?seconds=2" >"$tmp/w$pid.code" &
        asked="$asked $!"
    done <"$tmp/listed"
    # The checks of a part gone must see it come first, or they show
    # nothing: the first worker's, while the profiles run.
    watch_serving "$(awk 'NR == 1 { print $1 }' "$tmp/listed")" "$master" \
        "$(echo $asked | awk '{ print $1 }')"
    for p in $asked; do wait "$p"; done
    while read -r pid url; do
        code=$(cat "$tmp/w$pid.code")
        [ "$code" = 200 ] ||
            fail "daemon $daemon: worker $pid's profile through the master answered '$code': $(head -c 300 "$tmp/w$pid.pb.gz")"
        go tool pprof -traces "$tmp/w$pid.pb.gz" >"$tmp/w$pid.traces" 2>&1 ||
            fail "daemon $daemon: pprof on worker $pid's profile: $(cat "$tmp/w$pid.traces")"
        n=$(grep -c ' ngx_http_' "$tmp/w$pid.traces")
        echo "worker $pid: $n frames in ngx_http_*"
        [ "$n" -gt 0 ] && found=$((found + 1))
    done <"$tmp/listed"
    [ "$found" -gt 0 ] || fail "daemon $daemon: no worker's profile has a frame in ngx_http_*"
    [ "$ws_threads" -gt 1 ] && [ -n "$ws_socket" ] ||
        fail "daemon $daemon: while a worker served its profile it ran at most $ws_threads threads, cpprof's socket '$ws_socket'"
    echo "ok: daemon $daemon: both workers' profiles through the master; $found of them in ngx_http_*; meanwhile one ran $ws_threads threads"
    kill $(cat "$tmp/load.pids") 2>/dev/null
    rm -f "$tmp/load.pids"
    for pid in $(awk '{ print $1 }' "$tmp/listed"); do
        await_costs_nothing "$pid" "$master" $((idle_ms / 1000 + 60))
        echo "ok: daemon $daemon: worker $pid's part went $acn_ms ms after its profile (CPPROF_HTTP_WORKER_IDLE_MS=$idle_ms)"
    done
    end_nginx
}

check_mode off
check_mode on
echo PASS
