/*
 * symbolize_profile.h -- the symbolization pass over a built profile
 * (symbolize_profile.c): what every caller of builder_encode runs first.
 */
#ifndef CPPROF_SYMBOLIZE_PROFILE_H
#define CPPROF_SYMBOLIZE_PROFILE_H

#include "builder.h"

/* Gives every location of b its lines (once) and mapping, and b its
 * mappings: the process's executable mappings now, then the objects
 * unloaded since their samples were taken.  In one symbolizer session;
 * may be run again before another encoding. */
int symbolize_profile(builder *b);

/* symbolize_profile, then builder_encode: what an endpoint sends. */
int symbolize_and_encode(builder *b, unsigned char **buf, size_t *len);

#endif
