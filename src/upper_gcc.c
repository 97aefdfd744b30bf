/*
 * upper_gcc.c -- the two entry points of libgcc_s's unwinder that
 * cpprof_do's cleanup needs, found when an unwind first needs them, so
 * that libcpprof.so does not link libgcc_s.
 *
 * cpprof_do restores the labels when a C++ exception or a thread's
 * cancellation unwinds through it (thread.c): -fexceptions gives its frame
 * the personality routine __gcc_personality_v0, and its cleanup calls
 * _Unwind_Resume, both libgcc_s's.  Linked, libgcc_s is one more object in
 * every process, and its destructors cost every forked child that exits 3
 * page faults (bench/fork).  Only an unwind reaches these two, and an
 * unwind runs in libgcc_s (a C++ program links it; glibc loads it for
 * pthread_cancel before the thread unwinds), so they are looked up then:
 * in the global scope, else in the copy glibc loaded for itself, else
 * loaded.  Both are hidden: the personality pointer of cpprof_do's unwind
 * data binds to this object's own, and nothing of the program's binds to
 * either.  Built into libcpprof.so only: libcpprof.a and the tests link
 * libgcc_s, as any program built with -fexceptions does.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* The Itanium C++ ABI's unwinder types, as <unwind.h> has them (which
 * src/unwind.h, cpprof's own unwinder, hides from this directory): the
 * reason code and the actions are ints, the exception class 64 bits; the
 * two structures only pass through. */
enum { URC_CONTINUE_UNWIND = 8 };
struct _Unwind_Exception;
struct _Unwind_Context;
typedef int (*personality_fn)(int, int, uint64_t, struct _Unwind_Exception *,
                              struct _Unwind_Context *);
typedef void (*resume_fn)(struct _Unwind_Exception *);

int __gcc_personality_v0(int, int, uint64_t, struct _Unwind_Exception *,
                         struct _Unwind_Context *)
    __attribute__((visibility("hidden")));
void _Unwind_Resume(struct _Unwind_Exception *)
    __attribute__((visibility("hidden"), noreturn));

/* libgcc_s's `name`, or NULL.  (These two are hidden here, so the global
 * scope never answers with this object's own.) */
static void *libgcc_symbol(const char *name)
{
    void *sym = dlsym(RTLD_DEFAULT, name);
    if (sym)
        return sym;
    void *h = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
    return h ? dlsym(h, name) : NULL;
}

int __gcc_personality_v0(int version, int actions, uint64_t class,
                         struct _Unwind_Exception *e,
                         struct _Unwind_Context *context)
{
    static _Atomic(personality_fn) real;
    personality_fn f = atomic_load_explicit(&real, memory_order_acquire);
    if (!f) {
        f = (personality_fn)libgcc_symbol("__gcc_personality_v0");
        if (!f) /* an unwinder without it: the frame unwinds uncleaned */
            return URC_CONTINUE_UNWIND;
        atomic_store_explicit(&real, f, memory_order_release);
    }
    return f(version, actions, class, e, context);
}

void _Unwind_Resume(struct _Unwind_Exception *e)
{
    static _Atomic(resume_fn) real;
    resume_fn f = atomic_load_explicit(&real, memory_order_acquire);
    if (!f) {
        f = (resume_fn)libgcc_symbol("_Unwind_Resume");
        if (!f) /* the personality above found one: this cannot be */
            abort();
        atomic_store_explicit(&real, f, memory_order_release);
    }
    f(e);
    abort(); /* _Unwind_Resume does not return */
}
