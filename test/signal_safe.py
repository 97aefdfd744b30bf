#!/usr/bin/env python3
"""signal_safe.py -- the SIGNAL-SAFE rule as a check, not a comment.

Every function a signal handler of cpprof's can reach must be marked
SIGNAL-SAFE in its source, and every library function it reaches must be
async-signal-safe.  This reads the call graph gcc itself writes
(-fcallgraph-info, one .ci file per translation unit, compiled at -O0 so
that no call is hidden by inlining), takes as roots every function that
src/ installs with `sa_sigaction = f` (a new handler is a new root without
anyone editing this file), walks it, and fails on:
  - a reached function of src/ not marked: a comment holding SIGNAL-SAFE
    directly above its definition, or a section opened by a comment
    "everything in this section is SIGNAL-SAFE" / "everything below is
    SIGNAL-SAFE" (a section ends at the next "/* ---- " rule);
  - a reached function from outside src/ that is not on ASYNC_SIGNAL_SAFE;
  - an indirect call reached anywhere but in INDIRECT_OK;
  - a call to a function cpprof interposes (sigaction, malloc...), whose
    interposer does work no handler may do.
It prints every root and every reached function with its file and line.
The idea is Go's compiler's //go:nowritebarrierrec check: the rule holds
for everything reachable, not just for what someone remembered to mark.

usage: signal_safe.py SRCDIR CI_FILE...
"""
import os
import re
import sys

# Library functions a handler may call, each for a stated reason.
POSIX = "POSIX signal-safety(7)"
SYSCALL = "glibc's bare wrapper of one system call"
ASYNC_SIGNAL_SAFE = {
    **{f: POSIX for f in (
        "write", "read", "open", "openat", "close", "fstat", "sigaction", "__sigaction",
        "raise", "getpid", "clock_gettime", "memchr", "memcpy", "memmove",
        "memset", "memcmp", "strlen", "strchr", "strcmp", "strncmp",
        "sigprocmask", "pthread_sigmask", "sigemptyset", "sigaddset",
        "sigismember", "sigfillset", "sigdelset", "_exit", "kill",
        "getppid", "pthread_kill")},
    **{f: SYSCALL for f in (
        "syscall", "gettid", "prctl", "sigaltstack", "getrusage",
        "timer_settime", "timer_gettime", "tgkill", "pread", "pread64",
        "lseek")},
    "__errno_location": "a thread-pointer load, no state",
    "pthread_self": "a thread-pointer load, no state",
}

# Indirect calls a handler may make: function -> why it is safe.
INDIRECT_OK = {}

NODE = re.compile(r'node: \{ title: "([^"]+)" label: "([^"\\]+)\\n([^:"]+):(\d+):\d+"')
EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')
INSTALL = re.compile(r'sa_sigaction\s*=\s*(\w+)\s*;')
SECTION_OPEN = re.compile(r'everything (in this section|below)( here)? is\s+SIGNAL-SAFE')
RULE = re.compile(r'^/\* ----')


def read_graph(files):
    """Nodes (title -> (name, file, line)) and edges (title -> titles)."""
    nodes, edges = {}, {}
    for path in files:
        with open(path) as f:
            for line in f:
                m = NODE.match(line)
                if m:
                    title, name, file, lineno = m.groups()
                    # A unit's definition wins over another's declaration.
                    defined = 'shape : ellipse' not in line
                    old = nodes.get(title)
                    if old is None or (defined and not old[3]):
                        nodes[title] = (name, file, int(lineno), defined)
                    continue
                m = EDGE.match(line)
                if m:
                    edges.setdefault(m.group(1), set()).add(m.group(2))
    return nodes, edges


def roots_of(srcdir):
    """Every handler src/ installs, as (file, function)."""
    roots = []
    for name in sorted(os.listdir(srcdir)):
        if name.endswith('.c'):
            with open(os.path.join(srcdir, name)) as f:
                for fn in INSTALL.findall(f.read()):
                    roots.append((name, fn))
    return roots


def marked(file, line, cache={}):
    """Whether the definition at file:line is marked SIGNAL-SAFE."""
    if file not in cache:
        with open(file) as f:
            cache[file] = f.read().split('\n')
    text = cache[file]
    i = line - 2  # the line above the definition, 0-based
    # The comment block right above (with at most a blank-free gap).
    while i >= 0 and text[i].strip() == '':
        i -= 1
    j = i
    if j >= 0 and text[j].rstrip().endswith('*/'):
        while j >= 0 and '/*' not in text[j]:
            j -= 1
        if 'SIGNAL-SAFE' in '\n'.join(text[max(j, 0):i + 1]):
            return True
    # Inside a SIGNAL-SAFE section.
    for k in range(line - 2, -1, -1):
        if SECTION_OPEN.search(text[k]) or (
                k + 1 < len(text) and SECTION_OPEN.search(
                    text[k] + ' ' + text[k + 1].lstrip('* '))):
            return True
        if RULE.match(text[k]):
            return False
    return False


def main():
    srcdir, files = sys.argv[1], sys.argv[2:]
    nodes, edges = read_graph(files)
    roots = roots_of(srcdir)
    if not roots:
        print('FAIL: no handler installed with sa_sigaction found in', srcdir)
        return 1
    todo, seen, via = [], set(), {}
    for file, fn in roots:
        title = os.path.join(srcdir, file) + ':' + fn
        title = title if title in nodes else fn
        todo.append(title)
        via[title] = 'handler'
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        for callee in edges.get(t, ()):
            if callee not in seen:
                via.setdefault(callee, t)
                todo.append(callee)
    errors = []
    srcabs = os.path.abspath(srcdir)
    print('roots:', ', '.join(f'{fn} ({file})' for file, fn in roots))
    for t in sorted(seen, key=lambda t: (nodes.get(t, (t, '', 0))[1], t)):
        name, file, line, defined = nodes.get(t, (t, '?', 0, False))
        caller = nodes.get(via.get(t), (via.get(t),))[0]
        if t == '__indirect_call':
            continue
        if defined and not os.path.abspath(file).startswith(
                os.path.dirname(srcabs) + os.sep):
            # gcc names a definition by its first declaration: a libc
            # header means cpprof defines a libc function (an interposer),
            # whose work a handler must not get by calling libc.
            errors.append(f'{name}, reached from {caller}, is a function '
                          'cpprof interposes: a handler calls glibc\'s own')
        elif defined:
            ok = marked(file, line)
            print(f'  {"marked  " if ok else "UNMARKED"} {name} '
                  f'({os.path.relpath(file, srcabs + "/..")}:{line})')
            if not ok:
                errors.append(f'{name} ({file}:{line}), reached from '
                              f'{caller}, is not marked SIGNAL-SAFE')
        elif name in ASYNC_SIGNAL_SAFE:
            print(f'  library  {name}: {ASYNC_SIGNAL_SAFE[name]}')
        else:
            errors.append(f'{name} (from {file}), reached from {caller}, '
                          'is not a known async-signal-safe function')
    for t in sorted(seen):
        if '__indirect_call' in edges.get(t, ()) and \
                nodes.get(t, (t,))[0] not in INDIRECT_OK:
            errors.append(f'{nodes.get(t, (t,))[0]} makes an indirect call '
                          'from signal-handler code')
    print(f'{len(seen)} functions reachable from {len(roots)} handlers')
    for e in errors:
        print('FAIL:', e)
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
