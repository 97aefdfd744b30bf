/*
 * stress_dso.c -- the library stress_sampler.c dlopens and dlcloses in a
 * loop while it is profiled: samples land in code that is mapped and
 * unmapped under the sampler, and dlopen holds the loader lock that the
 * signal handler must never take.
 */

/* Burns `n` iterations inside this library. */
unsigned long stress_dso_work(unsigned long n)
{
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++)
        x += i;
    return x;
}
