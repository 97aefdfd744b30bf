#!/bin/sh
# nginx.sh -- Debian's nginx, a pre-forking server, in zero-code mode with
# its default master and 2 workers, `daemon off` and `daemon on`: the
# address asked for serves (the master; with `daemon on`, the daemon the
# started process forked), its index lists both workers,
# and under a keep-alive request load a 2 s CPU profile fetched from a
# listed worker has samples in nginx's request path (ngx_http_*).
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
        CPPROF_HTTP_FORK_DELAY_MS=200 "$NGINX" -p "$tmp/ngx" \
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
    done
    # Load on two keep-alive connections, for longer than the profiles.
    for c in 1 2; do
        curl -s -o /dev/null "http://127.0.0.1:$nport/[1-200000]" &
        echo $! >>"$tmp/load.pids"
    done
    found=0 profiles=
    while read -r pid url; do
        curl -s --max-time 30 -o "$tmp/w$pid.pb.gz" "${url}profile?seconds=2" &
        profiles="$profiles $!"
    done <"$tmp/listed"
    for p in $profiles; do wait "$p" || fail "daemon $daemon: a worker's profile failed"; done
    while read -r pid url; do
        go tool pprof -traces "$tmp/w$pid.pb.gz" >"$tmp/w$pid.traces" 2>&1 ||
            fail "daemon $daemon: pprof on worker $pid's profile: $(cat "$tmp/w$pid.traces")"
        n=$(grep -c ' ngx_http_' "$tmp/w$pid.traces")
        echo "worker $pid: $n frames in ngx_http_*"
        [ "$n" -gt 0 ] && found=$((found + 1))
    done <"$tmp/listed"
    kill $(cat "$tmp/load.pids") 2>/dev/null
    rm -f "$tmp/load.pids"
    [ "$found" -gt 0 ] || fail "daemon $daemon: no worker's profile has a frame in ngx_http_*"
    echo "ok: daemon $daemon: $base lists 2 workers; $found of their profiles in ngx_http_*"
    end_nginx
}

check_mode off
check_mode on
echo PASS
