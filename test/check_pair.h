/*
 * check_pair.h -- a label set of one key and value, for the Check suites
 * whose cases build many (check_inherit, check_tasks, check_trace); it
 * fails the case, as Check does, when the set cannot be made.
 */
#ifndef CPPROF_TEST_CHECK_PAIR_H
#define CPPROF_TEST_CHECK_PAIR_H

#include <check.h>
#include <cpprof.h>

static inline cpprof_labelset *make(const char *k, const char *v)
{
    cpprof_labelset *s;
    const char *kv[] = {k, v};
    ck_assert_int_eq(cpprof_labels(&s, 2, kv), 0);
    return s;
}

#endif
