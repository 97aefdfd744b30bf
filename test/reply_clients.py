#!/usr/bin/env python3
"""reply_clients.py -- clients that ask for a large reply and never read
it, against a cpprof server, and what the serving process's memory does
meanwhile (test/trace_flight_clients.sh).

Usage: reply_clients.py PORT PID PATH CLIENTS [gzip]

Resets the process's peak resident size (/proc/PID/clear_refs, 5), then
opens CLIENTS connections one after another, each with a 4 KiB receive
buffer, asking for PATH (with Accept-Encoding: gzip when told) and never
reading it: each waits until its reply's status line is in its socket
(peeked, not read), at most 60 s, so that the server has made the reply
before the next client asks.  Then, with every connection still open, it
prints one line

  clients N ok A refused R retry_after S growth_kib G

(A replies 200, R 503; S the Retry-After of the first 503, "-" when
none; G the process's peak resident size less its size before the first
client), then a reading client asks for PATH (plain) and for the index
(/debug/pprof/?format=json) and prints

  reader STATUS BYTES json=OK|BAD
  index STATUS

and closes everything.  A status line that never came is a failure
(exit status 1); what to judge is the caller's.
"""
import json
import socket
import sys
import time
import urllib.error
import urllib.request


def kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise SystemExit("no %s for %d" % (field, pid))


def ask(port, path, gzip):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n" %
               (path, port, "Accept-Encoding: gzip\r\n" if gzip else ""))
              .encode())
    return s


def status_of(s):
    """The status and the headers in s's first bytes, peeked."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        s.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            head = s.recv(4096, socket.MSG_PEEK)
        except socket.timeout:
            break
        if b"\r\n\r\n" in head or len(head) >= 4096:
            lines = head.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
            headers = dict((k.strip().lower(), v.strip()) for k, _, v in
                           (l.partition(":") for l in lines[1:]))
            return lines[0].split()[1], headers
        if not head:
            break
        time.sleep(0.01)
    raise SystemExit("FAIL: no reply's status line within 60 s")


def fetch(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path),
                                    timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def main():
    port, pid, path, n = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                          int(sys.argv[4]))
    gzip = len(sys.argv) > 5 and sys.argv[5] == "gzip"
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")
    before = kib(pid, "VmRSS")
    clients, ok, refused, retry = [], 0, 0, "-"
    for _ in range(n):
        s = ask(port, path, gzip)
        clients.append(s)
        code, headers = status_of(s)
        ok += code == "200"
        if code == "503":
            refused += 1
            if retry == "-":
                retry = headers.get("retry-after", "none")
    growth = kib(pid, "VmHWM") - before
    print("clients %d ok %d refused %d retry_after %s growth_kib %d" %
          (n, ok, refused, retry, growth), flush=True)
    code, body = fetch(port, path)
    try:
        json.loads(body)
        parsed = "OK"
    except ValueError:
        parsed = "BAD"
    print("reader %d %d json=%s" % (code, len(body), parsed), flush=True)
    code, _ = fetch(port, "/debug/pprof/?format=json")
    print("index %d" % code, flush=True)
    for s in clients:
        s.close()


if __name__ == "__main__":
    main()
