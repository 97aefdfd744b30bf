/*
 * www.h -- the index page's files (www/), compiled into the library by
 * www/embed.sh, which generates www_files[] into the build tree: a program
 * serving /debug/pprof/ needs no files at run time.
 */
#ifndef CPPROF_WWW_H
#define CPPROF_WWW_H

#include <stddef.h>

typedef struct {
    const char *name;         /* file name without directory: "index.css" */
    const char *content_type;
    const unsigned char *data;
    size_t len;
} www_file;

/* Every file, ended by a row whose name is NULL. */
extern const www_file www_files[];

#endif
