#!/usr/bin/env python3
"""layering.py -- cpprof's modules depend on each other one way only.

docs/ARCHITECTURE.md's "Layers" section lists the levels, bottom first,
each a numbered line naming its modules in backquotes:

    1. **core**: `errors`, `warn`, ...

A module is a family of files in src/ or src/upper/: `unwind` is unwind.h,
unwind_walk.c, unwind_cfi.c and so on (the stem, or the stem up to an underscore; the
longest listed name wins).  This script derives the module graph from two
sources and fails on an arrow from a lower level to a higher one, or on a
cycle among modules of one level:

  * every `#include "..."` line of src/*.[ch] and src/upper/*.[ch];
  * with an object directory, every symbol an object file of the library
    uses (nm's U) that another object defines: the calls and data
    references the includes allow.  A symbol that libc defines too is an
    interposition namesake (cpprof's malloc, pthread_create, ...): a call
    to it is a call to libc as far as the program is concerned, so it
    makes no arrow.  A name defined in both objects (the upper object's
    entry points, which libcpprof.so forwards through its table) is the
    lower definition's, the one libcpprof.so's units bind to.

The folders are the objects: src/ is libcpprof.so, src/upper/ is
libcpprof-upper.so.  A module lies in one folder, and every level of
src/upper/ is above every level of src/: the object line is a line between
levels, which the arrows then keep.

Every file in both folders must belong to a listed module.  On success it prints
the graph, level by level, each module with the modules it uses.

Usage: layering.py SRCDIR ARCHITECTURE_MD [OBJDIR]
"""
import os
import re
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def read_levels(arch):
    """[(level number, level name, [module, ...]), ...] from the Layers
    section of docs/ARCHITECTURE.md."""
    text = open(arch, encoding="utf-8").read()
    m = re.search(r"^## Layers\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not m:
        fail(arch + " has no '## Layers' section")
    levels = []
    for line in m.group(1).splitlines():
        lm = re.match(r"^(\d+)\. \*\*(.+?)\*\*:(.*)$", line)
        if lm:
            mods = re.findall(r"`([A-Za-z0-9_.-]+)`", lm.group(3))
            levels.append((int(lm.group(1)), lm.group(2), mods))
    if not levels:
        fail("no levels ('1. **name**: `module`, ...') under '## Layers'")
    return levels


def stem(name):
    """A file's stem: heap.c -> heap, profile.pb-c.h -> profile."""
    base = os.path.basename(name)
    for suffix in (".pb-c.h", ".pb-c.c", ".pb-c", ".c", ".h", ".o"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def module_of(s, modules):
    """The longest listed module that is stem s or a prefix of it up to an
    underscore, or None."""
    best = None
    for mod in modules:
        if (s == mod or s.startswith(mod + "_")) and (
                best is None or len(mod) > len(best)):
            best = mod
    return best


FOLDERS = ("", "upper/")


def source_files(srcdir):
    """[(folder, file name), ...] of the C sources of both objects."""
    return [(d, f) for d in FOLDERS
            for f in sorted(os.listdir(os.path.join(srcdir, d)))
            if f.endswith((".c", ".h"))]


def include_edges(srcdir, modules, folder_of):
    """{(from module, to module): reason} from the #include lines, and the
    set of source files with no module; folder_of gets each module's
    folder."""
    edges, orphans = {}, []
    for d, f in source_files(srcdir):
        src = module_of(stem(f), modules)
        if src is None:
            orphans.append(d + f)
            continue
        if folder_of.setdefault(src, d) != d:
            fail("module %s has files in src/%s and in src/%s: a module"
                 " lies in one object" % (src, folder_of[src], d))
        for line in open(os.path.join(srcdir, d, f), encoding="utf-8"):
            im = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not im or im.group(1) == "cpprof.h":
                continue  # the public header is below every module
            dst = module_of(stem(im.group(1)), modules)
            if dst is None:
                fail("src/%s%s includes %s, which is in no layer"
                     % (d, f, im.group(1)))
            if dst != src:
                edges.setdefault((src, dst), "src/%s%s includes %s"
                                 % (d, f, im.group(1)))
    return edges, orphans


def nm(path, *args):
    out = subprocess.run(["nm", *args, path], capture_output=True,
                         text=True, check=True).stdout
    return [line.split() for line in out.splitlines()]


def libc_names():
    path = subprocess.run(["gcc", "-print-file-name=libc.so.6"],
                          capture_output=True, text=True,
                          check=True).stdout.strip()
    return {f[-1].split("@")[0] for f in nm(path, "-D", "--defined-only")
            if len(f) >= 3}


def symbol_edges(srcdir, objdir, modules, level_of):
    """{(from module, to module): reason} from the library's objects (of
    sources that still exist: a build directory keeps a removed file's)."""
    sources = {stem(f) for _, f in source_files(srcdir) if f.endswith(".c")}
    objs = {}
    for root, _, files in os.walk(objdir):
        if os.path.basename(root) != ".libs":
            continue  # libtool's objects are its PIC ones (no static build)
        for f in files:
            m = re.match(r"libcpprof(?:_\w+)?_la-(.+)\.o$", f)
            if m and (m.group(1).endswith(".pb-c") or m.group(1) in sources):
                objs[os.path.join(root, f)] = m.group(1)
    if not objs:
        fail("no library objects under " + objdir)
    libc = libc_names()
    defined, used = {}, {}
    for path, s in objs.items():
        mod = module_of(stem(s), modules)
        if mod is None:
            fail("object %s is of no layer" % path)
        for f in nm(path):
            if len(f) == 2 and f[0] == "U":
                used.setdefault(mod, set()).add(f[1])
            elif len(f) == 3 and f[1] in "TDBRVW" and (
                    f[2] not in defined
                    or level_of[mod] < level_of[defined[f[2]][0]]):
                defined[f[2]] = (mod, s)
    edges = {}
    for mod, names in used.items():
        for name in sorted(names):
            if name not in defined or name in libc:
                continue
            dst, s = defined[name]
            if dst != mod:
                edges.setdefault((mod, dst), "%s uses %s (%s)"
                                 % (mod, name, s))
    return edges


def cycles(nodes, edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    succ = {n: sorted(b for (a, b) in edges if a == n) for n in nodes}

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for n in nodes:
        if n not in index:
            visit(n)
    return out


def main():
    if len(sys.argv) not in (3, 4):
        fail("usage: layering.py SRCDIR ARCHITECTURE_MD [OBJDIR]")
    srcdir, arch = sys.argv[1], sys.argv[2]
    levels = read_levels(arch)
    level_of = {}
    for num, _, mods in levels:
        for mod in mods:
            if mod in level_of:
                fail("module %s is listed twice under '## Layers'" % mod)
            level_of[mod] = num
    modules = list(level_of)
    folder_of = {}
    edges, orphans = include_edges(srcdir, modules, folder_of)
    if orphans:
        fail("in no layer of %s: %s" % (arch, " ".join(orphans)))
    lower = [level_of[m] for m in modules if folder_of.get(m) == ""]
    upper = [level_of[m] for m in modules if folder_of.get(m) == "upper/"]
    if lower and upper and max(lower) >= min(upper):
        fail("level %d has modules in src/upper/ but level %d in src/: the"
             " object line must lie between levels" % (min(upper), max(lower)))
    if len(sys.argv) == 4:
        for key, why in symbol_edges(srcdir, sys.argv[3], modules,
                                     level_of).items():
            edges.setdefault(key, why)
    bad = 0
    for (a, b), why in sorted(edges.items()):
        if level_of[a] < level_of[b]:
            print("FAIL: %s (level %d) -> %s (level %d): %s"
                  % (a, level_of[a], b, level_of[b], why))
            bad += 1
    for comp in cycles(modules, edges):
        print("FAIL: a cycle among " + ", ".join(comp) + ":")
        for (a, b), why in sorted(edges.items()):
            if a in comp and b in comp:
                print("    " + why)
        bad += 1
    for num, name, mods in levels:
        if upper and num == min(upper):
            print("---- the object line: libcpprof.so below (src/),"
                  " libcpprof-upper.so above (src/upper/)")
        print("%d %s" % (num, name))
        for mod in mods:
            uses = sorted(b for (a, b) in edges if a == mod)
            print("    %-16s -> %s" % (mod, " ".join(uses) or "-"))
    if bad:
        fail("%d arrow(s) against the order or cycle(s)" % bad)
    print("PASS: %d modules, %d arrows, all downward or level, no cycle"
          % (len(modules), len(edges)))


main()
