/*
 * symbolize_debuginfo.h -- the files libdwfl reads for symbolize.c: where
 * an object's separate debug file is, and how compressed debug sections
 * reach libdw (symbolize_debuginfo.c).
 *
 * Two of libdwfl's defaults cost the host more than it should pay:
 *   - dwfl_standard_find_debuginfo() ends, when no local file is found
 *     (any library without its -dbg package), with the debuginfod client:
 *     it dlopens libdebuginfod, which brings libcurl, its TLS stack and
 *     Kerberos into the host process (4 MB of RSS, their constructors
 *     run), and, where DEBUGINFOD_URLS is set, downloads debug files from
 *     the network from inside the host.  Here files are looked for where
 *     they are installed, and nowhere else.
 *   - libdw inflates every compressed debug section whole, into malloc'd
 *     buffers, when it opens a file (glibc's debug file: 10 MB).  Freed at
 *     the end of a session, they stay in the host's RSS all the same when
 *     they were taken from a thread's malloc arena, whose top glibc's
 *     malloc_trim() does not give back.  Here such a file is handed to
 *     libdw as a copy in a memfd with its sections inflated: its pages are
 *     the memfd's, and go with it when libdw closes it.  The copy is kept
 *     (not mapped: not in the host's RSS) while the symbolizer keeps its
 *     tables, since inflating glibc's again costs 37 ms.
 */
#ifndef CPPROF_SYMBOLIZE_DEBUGINFO_H
#define CPPROF_SYMBOLIZE_DEBUGINFO_H

#include <elfutils/libdwfl.h>

/* A Dwfl_Callbacks.find_elf: dwfl_linux_proc_find_elf's file, as an
 * inflated copy when it has compressed sections. */
int symdi_find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
                   Dwarf_Addr base, char **file_name, Elf **elfp);

/* A Dwfl_Callbacks.find_debuginfo: the debug file by build id
 * (/usr/lib/debug/.build-id/), then by .gnu_debuglink, in the object's
 * directory, its .debug subdirectory and under /usr/lib/debug (with the
 * link's CRC checked when the object has no build id for libdwfl to
 * check), as an inflated copy when it has compressed sections; a dwz
 * alternate file by libdwfl's build-id search.  Never the debuginfod
 * client.  An open descriptor (and the file's name in
 * *debuginfo_file_name), or -1. */
int symdi_find_debuginfo(Dwfl_Module *mod, void **userdata,
                         const char *modname, Dwarf_Addr base,
                         const char *file_name, const char *debuglink_file,
                         GElf_Word debuglink_crc, char **debuginfo_file_name);

/* The inflated copies kept from one session to the next: let go of them
 * (with the rest of the symbolizer's state, after symbolize_idle_seconds),
 * and their bytes (counted in the symbolizer's own memory).  Under the
 * symbolizer's lock. */
void symdi_drop_copies(void);
size_t symdi_kept_bytes(void);

#endif
