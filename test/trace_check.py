#!/usr/bin/env python3
"""trace_check.py -- holds a trace of the demo (/debug/pprof/trace) to the
demo's own record of its jobs (jobrunner --job-log).

Usage: trace_check.py perfetto DECODED_TEXT JOB_LOG TIDS
       trace_check.py json TRACE_JSON JOB_LOG TIDS
       trace_check.py flight DECODED_TEXT MARKS SECONDS

DECODED_TEXT is `protoc --decode=perfetto.protos.Trace` of the trace, read
by the vendored perfetto_trace.proto: protoc, not cpprof's own code, reads
the bytes.  TRACE_JSON is the ?format=json form, read with Python's json.
TIDS is a file of the demo's thread ids, listed from /proc before and after
the trace: threads alive throughout, each of which must have one track.

Checks, printing what it measured:
  - one thread track per thread alive throughout the window;
  - each tenant's label-span time within 5% of its jobs' time in the
    window (the job log's intervals, on CLOCK_MONOTONIC as the trace);
  - every CPU sample with labels lies inside a label span of its own
    thread with exactly those labels.  A label switch is stamped just
    after the thread's set changes, so a sample that lands between the two
    (a few hundred nanoseconds) is taken with the new labels and stamped
    before the new span: a sample counts as inside when within EDGE_NS of
    such a span.
The flight form holds a flight recorder's snapshot to trace_flight.c's
MARKS (the log events it made, with their times, and when it asked for
the snapshot): every mark of the last SECONDS is there, none older.
Exit status 1 with the reasons when any check fails.
"""
import json
import re
import sys

EDGE_NS = 20000
TOLERANCE = 0.05


def fail(msgs):
    for m in msgs:
        print("FAIL: " + m)
    sys.exit(1)


# ---- protoc's text format --------------------------------------------------

TOKEN = re.compile(r'\s*(?:([A-Za-z_][\w.]*)\s*(:)?\s*(\{)?|(\})|'
                   r'"((?:[^"\\]|\\.)*)"|(-?[\w.+-]+))')


def unescape(s):
    """protoc writes bytes outside printable ASCII as octal escapes."""
    out = bytearray()
    i = 0
    raw = s.encode("latin-1", "backslashreplace")
    while i < len(raw):
        c = raw[i]
        if c == 0x5C and i + 1 < len(raw):
            n = raw[i + 1]
            if 0x30 <= n <= 0x37:
                j = i + 1
                while j < len(raw) and j < i + 4 and 0x30 <= raw[j] <= 0x37:
                    j += 1
                out.append(int(raw[i + 1:j], 8))
                i = j
                continue
            out.append({ord("n"): 10, ord("t"): 9, ord("r"): 13}.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return out.decode("utf-8", "replace")


def parse_text(text):
    """Nested dicts of lists: {"packet": [{...}, ...]}."""
    stack = [{}]
    pos = 0
    pending = None
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ValueError("cannot parse at %r" % text[pos:pos + 40])
        pos = m.end()
        name, _, brace, close, string, bare = m.groups()
        if close:
            stack.pop()
        elif name and brace:
            child = {}
            stack[-1].setdefault(name, []).append(child)
            stack.append(child)
        elif name and pending is None:
            pending = name  # its value is the next token
        else:
            value = unescape(string) if string is not None else (name or bare)
            if pending is None:
                raise ValueError("value without a field: %r" % value)
            stack[-1].setdefault(pending, []).append(value)
            pending = None
    return stack[0]


def one(d, key, default=None):
    v = d.get(key)
    return v[0] if v else default


def read_perfetto(path):
    """The model: threads {tid: name}, spans [(tid, t0, t1, labels)],
    samples [(tid, ts, labels)], window (start, end)."""
    trace = parse_text(open(path, encoding="utf-8").read())
    names, cats, anames = {}, {}, {}
    tracks = {}  # uuid -> ("thread", tid) or ("labels", parent uuid)
    threads = {}
    open_slices = {}  # track uuid -> [(ts, name, labels)]
    spans, samples, logs = [], [], []
    start = end = None
    for p in trace.get("packet", []):
        for idata in p.get("interned_data", []):
            for e in idata.get("event_names", []):
                names[one(e, "iid")] = one(e, "name")
            for e in idata.get("event_categories", []):
                cats[one(e, "iid")] = one(e, "name")
            for e in idata.get("debug_annotation_names", []):
                anames[one(e, "iid")] = one(e, "name")
        for cs in p.get("clock_snapshot", []):
            for c in cs.get("clocks", []):
                if one(c, "clock_id") in ("3", "BUILTIN_CLOCK_MONOTONIC"):
                    start = int(one(c, "timestamp"))
        for td in p.get("track_descriptor", []):
            uuid = one(td, "uuid")
            th = one(td, "thread")
            if th:
                tid = int(one(th, "tid"))
                tracks[uuid] = ("thread", tid)
                threads[tid] = one(th, "thread_name", "")
            elif one(td, "parent_uuid"):
                tracks[uuid] = ("child", one(td, "parent_uuid"))
        for ev in p.get("track_event", []):
            ts = int(one(p, "timestamp"))
            end = ts if end is None else max(end, ts)
            name = one(ev, "name") or names.get(one(ev, "name_iid"))
            cat = ",".join(one(ev, "categories", "") and ev["categories"] or
                           [cats.get(i, "") for i in
                            ev.get("category_iids", [])])
            labels, message = {}, None
            for a in ev.get("debug_annotations", []):
                an = one(a, "name") or anames.get(one(a, "name_iid"))
                if an == "message":
                    message = one(a, "string_value")
                elif an == "labels":  # a CPU sample's, as a dictionary
                    for d in a.get("dict_entries", []):
                        labels[one(d, "name")] = one(d, "string_value")
                elif one(a, "string_value") is not None and an not in (
                        "stack", "reason", "tid"):
                    labels[an] = one(a, "string_value")
            uuid = one(ev, "track_uuid")
            kind = one(ev, "type")
            if kind == "TYPE_SLICE_BEGIN":
                open_slices.setdefault(uuid, []).append((ts, name, cat,
                                                         labels))
            elif kind == "TYPE_SLICE_END":
                t0, n, c, l = open_slices[uuid].pop()
                if "labels" in c.split(","):
                    spans.append((uuid, t0, ts, l))
            elif kind == "TYPE_INSTANT" and name == "cpu":
                samples.append((uuid, ts, labels))
            elif kind == "TYPE_INSTANT" and "log" in cat.split(","):
                logs.append((name, ts, message))
    if any(open_slices.values()):
        fail(["slices left open: %r" % {k: v for k, v in
                                         open_slices.items() if v}])

    def tid_of(uuid):
        seen = set()
        while uuid in tracks and uuid not in seen:
            seen.add(uuid)
            kind, v = tracks[uuid]
            if kind == "thread":
                return v
            uuid = v
        return None

    spans = [(tid_of(u), a, b, l) for u, a, b, l in spans]
    samples = [(tid_of(u), ts, l) for u, ts, l in samples]
    read_perfetto.logs = logs
    return threads, spans, samples, (start, end)


def read_json(path):
    doc = json.load(open(path, encoding="utf-8"))
    threads, spans, samples = {}, [], []
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            if e["tid"] < 1000000000:
                threads[e["tid"]] = e["args"]["name"]
        elif e.get("ph") == "X" and e.get("cat") == "labels":
            t0 = round(e["ts"] * 1000)
            spans.append((e["tid"], t0, t0 + round(e["dur"] * 1000),
                          e["args"]["labels"]))
        elif e.get("ph") == "i" and e.get("cat") == "cpu":
            samples.append((e["tid"], round(e["ts"] * 1000),
                            e["args"].get("labels", {})))
    other = doc["otherData"]
    return threads, spans, samples, (other["start_ns"], other["end_ns"])


# ---- The checks --------------------------------------------------------------

def job_truth(path, start, end):
    """Each tenant's jobs' time in the window, and the jobs there as
    (tenant, start, end, tid)."""
    truth, jobs = {}, []
    for line in open(path, encoding="utf-8"):
        tenant, a, b, tid = line.split()
        a, b = max(int(a), start), min(int(b), end)
        if b > a:
            truth[tenant] = truth.get(tenant, 0) + b - a
            jobs.append((tenant, a, b, int(tid)))
    return truth, jobs


def least_covered(tenant, jobs, spans, count=3):
    """The tenant's jobs least covered by their own thread's spans of the
    tenant: what a failed share comes from, and where in the job."""
    mine = {}
    for tid, a, b, labels in spans:
        if labels.get("tenant") == tenant:
            mine.setdefault(tid, []).append((a, b))
    rows = []
    for t, a, b, tid in jobs:
        if t != tenant:
            continue
        covered = [(max(a, x), min(b, y)) for x, y in mine.get(tid, [])
                   if min(b, y) > max(a, x)]
        got = sum(y - x for x, y in covered)
        first = min((x for x, _ in covered), default=b)
        last = max((y for _, y in covered), default=a)
        rows.append((b - a - got, tid, a, b, first - a, b - last))
    rows.sort(reverse=True)
    return ["job on thread %d from %d, %.3f ms: %.3f ms without its span "
            "(%.3f ms at its start, %.3f ms at its end)"
            % (tid, a, (b - a) / 1e6, lost / 1e6, head / 1e6, tail / 1e6)
            for lost, tid, a, b, head, tail in rows[:count]]


def check(form, path, job_log, tids_path):
    threads, spans, samples, (start, end) = (
        read_perfetto(path) if form == "perfetto" else read_json(path))
    problems = []
    if start is None or end is None or end <= start:
        fail(["no window in the trace: start %r end %r" % (start, end)])
    print("%s: window %.3f s, %d thread tracks, %d label spans, "
          "%d CPU samples" % (form, (end - start) / 1e9, len(threads),
                              len(spans), len(samples)))

    alive = {int(t) for t in open(tids_path).read().split()}
    missing = sorted(alive - set(threads))
    if missing:
        problems.append("threads without a track: %s" % missing)

    truth, jobs = job_truth(job_log, start, end)
    traced = {}
    for tid, a, b, labels in spans:
        if "tenant" in labels:
            a, b = max(a, start), min(b, end)
            traced[labels["tenant"]] = traced.get(labels["tenant"], 0) + \
                max(0, b - a)
    for tenant in sorted(set(truth) | set(traced)):
        t, s = truth.get(tenant, 0), traced.get(tenant, 0)
        off = abs(s - t) / t if t else float("inf")
        print("%s: tenant %s jobs %.4f s, label spans %.4f s, off %.2f%%"
              % (form, tenant, t / 1e9, s / 1e9, 100 * off))
        if off > TOLERANCE:
            problems.append("tenant %s: spans %.4f s against jobs %.4f s"
                            % (tenant, s / 1e9, t / 1e9))
            problems += least_covered(tenant, jobs, spans)
    if len(truth) < 3:
        problems.append("jobs of %d tenants in the window, want 3"
                        % len(truth))

    by_thread = {}
    for tid, a, b, labels in spans:
        by_thread.setdefault(tid, []).append((a, b, labels))
    labelled = outside = 0
    for tid, ts, labels in samples:
        if not labels:
            continue
        labelled += 1
        if not any(a - EDGE_NS <= ts <= b + EDGE_NS and l == labels
                   for a, b, l in by_thread.get(tid, [])):
            outside += 1
            if outside <= 5:
                problems.append("CPU sample of thread %s at %d with %r is "
                                "in no span of those labels"
                                % (tid, ts, labels))
    print("%s: %d labelled CPU samples, %d outside their spans"
          % (form, labelled, outside))
    if labelled < 20:
        problems.append("only %d labelled CPU samples" % labelled)
    if problems:
        fail(problems)


def check_flight(path, marks_path, seconds):
    read_perfetto(path)
    logged = {int(msg): ts for name, ts, msg in read_perfetto.logs
              if name == "mark" and msg}
    made, at, returned = [], None, {}
    for line in open(marks_path, encoding="utf-8"):
        f = line.split()
        if f[0] == "mark":
            made.append(int(f[1]))
            returned[int(f[1])] = int(f[2])
        elif f[0] == "snapshot_at":
            at = int(f[1])
    if at is None:
        fail(["no snapshot time in %s" % marks_path])
    since = at - int(float(seconds) * 1e9)
    edge = 1000000  # a mark stamped within 1 ms of the cut may go either way
    want = {t for t in made if t >= since + edge}
    old = {t for t in made if t < since - edge}
    missing = sorted(want - set(logged))
    stale = sorted(old & set(logged))
    print("flight: %d marks made, %d in the last %s s, %d in the snapshot, "
          "%d of those missing, %d older ones kept"
          % (len(made), len(want), seconds, len(logged), len(missing),
             len(stale)))
    problems = []
    if len(want) < 100:
        problems.append("only %d marks in the window" % len(want))
    if missing:
        problems.append("marks missing: %s" % missing[:5])
    if stale:
        problems.append("marks older than the window: %s" % stale[:5])
    # Each event's time lies between the program's clock readings just
    # before and just after its cpprof_trace_log call (a bound in time
    # would fail whenever the machine preempted the thread between them:
    # 1.7 ms once in CI); 1 us either side for the format's rounding.
    outside = [(t, ts) for t, ts in logged.items()
               if t in returned and not t - 1000 <= ts <= returned[t] + 1000]
    if outside:
        t, ts = outside[0]
        problems.append("%d marks' event times outside their call, e.g. %d "
                        "for a call from %d to %d"
                        % (len(outside), ts, t, returned[t]))
    if problems:
        fail(problems)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "flight":
        check_flight(*sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] in ("perfetto", "json"):
        check(*sys.argv[1:])
    else:
        print(__doc__)
        sys.exit(2)
