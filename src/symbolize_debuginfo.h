/*
 * symbolize_debuginfo.h -- where an object's separate debug file is, for
 * libdwfl (symbolize_debuginfo.c), used by symbolize.c.
 *
 * libdwfl's dwfl_standard_find_debuginfo() ends, when no local file is
 * found (any library without its -dbg package), with the debuginfod
 * client: it dlopens libdebuginfod, which brings libcurl, its TLS stack
 * and Kerberos into the host process (4 MB of RSS, their constructors
 * run), and, where DEBUGINFOD_URLS is set, downloads debug files from the
 * network from inside the host.  cpprof runs in someone's production
 * process: it looks where the files are installed, and nowhere else.
 */
#ifndef CPPROF_SYMBOLIZE_DEBUGINFO_H
#define CPPROF_SYMBOLIZE_DEBUGINFO_H

#include <elfutils/libdwfl.h>

/* A Dwfl_Callbacks.find_debuginfo: the debug file by build id
 * (/usr/lib/debug/.build-id/), then by .gnu_debuglink, in the object's
 * directory, its .debug subdirectory and under /usr/lib/debug (with the
 * link's CRC checked when the object has no build id for libdwfl to
 * check); never the debuginfod client.  An open descriptor (and the
 * file's name in *debuginfo_file_name), or -1. */
int symdi_find_debuginfo(Dwfl_Module *mod, void **userdata,
                         const char *modname, Dwarf_Addr base,
                         const char *file_name, const char *debuglink_file,
                         GElf_Word debuglink_crc, char **debuginfo_file_name);

#endif
