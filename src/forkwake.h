/*
 * forkwake.h -- pre-fork workers that cost nothing until asked: the
 * family's table of forked processes, the signal that wakes one, and the
 * program's waits where a woken one starts its part (forkwake.c).
 *
 * The HTTP server (http_forks.c) decides which forks are workers and what
 * a woken worker starts; this module, in libcpprof.so below it, holds what
 * must run in the worker without the server: the fork child's entry in the
 * table, the signal handler, and the interposed waits.
 */
#ifndef CPPROF_FORKWAKE_H
#define CPPROF_FORKWAKE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* A forked process of the family.  `pid` is claimed (0 to -1) before the
 * other fields are written and set last, so a reader that sees a pid sees
 * them. */
typedef struct {
    _Atomic pid_t pid;   /* 0: free; -1: being written */
    pid_t parent;        /* the family's process that forked it */
    _Atomic int serving; /* FORKWAKE_IDLE, _STARTING or _SERVING */
    char comm[16];       /* its name at the fork, which an exec changes */
} forkwake_slot;

enum { FORKWAKE_SLOTS = 4096 };

/* A slot's `serving`: its part is stopped; a wake was taken and the part
 * is being started (the upper object loading, which on a loaded machine
 * can take seconds); the part runs (it was asked, not idle since). */
enum { FORKWAKE_IDLE, FORKWAKE_STARTING, FORKWAKE_SERVING };

/* What a woken worker is asked to do, passed to its start function. */
enum {
    FORKWAKE_START = 1, /* start its part: a request for it is waiting */
    FORKWAKE_ADOPT = 2, /* its parent has exited: take the parent's place */
};

/* In the serving process, before its first fork that should make a
 * worker: maps the family's table (once per family: a worker's forks
 * share it) and installs the wake signal's handler, which forks inherit.
 * 0, or a negative code with why in *why (the program has a handler on
 * the signal: CPPROF_ESIGTAKEN). */
int forkwake_prepare(const char **why);

/* In a fork's child (its fork handler): this process is a worker of
 * `parent`; a wake from it (or the parent's exit, soon after the fork)
 * runs start(what) at this process's next interposed wait.  Lists the
 * process in the table.  Nothing else: no thread, no descriptor, no
 * allocation. */
void forkwake_arm(pid_t parent, void (*start)(int what));
/* No longer a worker waiting to be woken (its part runs, it serves in its
 * own right, or it is a child that must not be one).  `unlist` also
 * takes it out of the table. */
void forkwake_disarm(bool unlist);
/* In a fork's child that is no worker: what the parent was, forgotten
 * (the kernel cleared the parent-death signal). */
void forkwake_forget_after_fork(void);
/* The part started by start() has stopped again: armed as before. */
void forkwake_rearm(void);
/* This process's slot says whether its part runs (the index shows it). */
void forkwake_mark_serving(bool serving);
/* Worker pid's slot state (FORKWAKE_IDLE...), FORKWAKE_IDLE when the
 * table does not list it. */
int forkwake_state_of(pid_t pid);

/* Sends worker pid the wake; 0, or -errno (-ESRCH: gone; -EPERM).  Only
 * to a pid the table lists, whose handler is still the one the fork
 * inherited (an exec'd process would die of the signal): -ENOENT else. */
int forkwake_send(pid_t pid);

/* The program sets an action for signo (siginterpose.c): if it is the
 * worker signal and not cpprof's handler, this process is no worker any
 * longer (a wake would reach the program's handler), nor are its forks. */
void forkwake_signal_claimed(int signo, void *handler);

/* The family's random secret (hex), made by forkwake_prepare: "" before. */
const char *forkwake_secret(void);

/* The table (FORKWAKE_SLOTS slots), or NULL before forkwake_prepare. */
forkwake_slot *forkwake_table(void);

/* Before an exec (execinterpose.c): the process leaves the table and its
 * waits are no longer watched; after a failed exec, back as it was. */
void forkwake_exec(void);
void forkwake_exec_failed(void);

#endif
