/*
 * http_symbol.c -- /debug/pprof/symbol: program counters to function names,
 * for pprof's remote symbolization (its "symbolz" client).
 *
 * As Go: a GET without a query answers "num_symbols: 1" (pprof only asks
 * whether symbols exist); otherwise the POST body, or else the raw query
 * string, holds addresses joined by '+' (0x-hex, 0-octal or decimal, as
 * strconv.ParseUint base 0), and each one we can name gets a line
 * "ADDRESS NAME".  Unlike Go, which reprints the number as %#x, the address
 * is echoed exactly as the client wrote it: pprof matches answers to
 * questions by that text.  Unknown addresses and junk are skipped; the
 * answer is always a 200.  The body is capped by http_dispatch.c (413).
 */
#define _GNU_SOURCE /* open_memstream */
#include "http.h"
#include "labels.h"
#include "symbolize.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The address a word names, or 0 (pprof never asks for 0, Go skips it). */
static uintptr_t parse_address(const char *word, size_t len)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf || !isdigit((unsigned char)word[0]))
        return 0;
    memcpy(buf, word, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 0);
    return (*end || errno) ? 0 : (uintptr_t)v;
}

/* Writes "WORD NAME\n" when pc has a real function name (a made-up
 * "lib.so+0x..." is no answer).  A session is open. */
static void put_symbol(FILE *f, const char *word, size_t len, uintptr_t pc)
{
    const symbolize_result *res = symbolize_pc(pc);
    if (!res->has_function)
        return;
    fwrite(word, 1, len, f);
    fputc(' ', f);
    text_put_escaped(f, res->frames[0].name, false);
    fputc('\n', f);
}

/* Looks up every '+'-separated word of `in` (whitespace around a word is
 * dropped: a POST body often ends in a newline). */
static void put_symbols(FILE *f, const char *in, size_t len)
{
    const char *end = in + len;
    symbolize_begin();
    while (in < end) {
        const char *plus = memchr(in, '+', (size_t)(end - in));
        const char *stop = plus != NULL ? plus : end;
        const char *a = in, *b = stop;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        uintptr_t pc = parse_address(a, (size_t)(b - a));
        if (pc != 0)
            put_symbol(f, a, (size_t)(b - a), pc);
        in = stop + (plus != NULL);
    }
    symbolize_end();
}

int http_symbol(http_req *r)
{
    size_t len;
    const char *in = http_body(r, &len);
    if (!http_is_post(r)) {
        in = http_raw_query(r);
        len = strlen(in);
    }
    char *text;
    size_t text_len;
    FILE *f = open_memstream(&text, &text_len);
    if (f == NULL)
        return -ENOMEM;
    fputs("num_symbols: 1\n", f);
    if (len > 0)
        put_symbols(f, in, len);
    if (fclose(f) != 0)
        return -ENOMEM;
    int rc = http_reply(r, "text/plain; charset=utf-8", NULL, text, text_len);
    free(text);
    return rc;
}
