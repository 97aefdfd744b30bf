/*
 * labelhooks.c -- the state the modules above the label core keep in it
 * (labelhooks.h): the registered hooks and accounting's switch state.
 * Defined apart from labels.c and thread.c so that both halves of the
 * label core read it without depending on each other.
 */
#include "labelhooks.h"

__thread struct acct_thread acct_self
    __attribute__((tls_model("initial-exec")));
atomic_int accounting_on;
uint64_t acct_short_ticks, acct_pending_max_ticks;
struct label_hooks label_hooks;
