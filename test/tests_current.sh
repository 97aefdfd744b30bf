#!/bin/sh
# tests_current.sh -- test/tests.am and test/README.md's table of modules
# are what test/tests.list gives.  test/tests_list.sh writes both, and make
# runs it when the list is newer than the fragment, but a commit can still
# carry a list edited without a build, or a fragment or table edited by
# hand: automake would then declare other tests than the list, and the
# suite would run the list's.
: "${srcdir:=.}"
exec sh "$srcdir/test/tests_list.sh" check
