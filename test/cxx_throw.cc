// cxx_throw.cc -- lets check_labels.c see a C++ exception pass through
// cpprof_do(), which is C: the exception must unwind cpprof_do's frame and
// the thread's labels must be restored before the catch runs.
#include <cpprof.h>
#include <stdexcept>

static void throw_inside(void *, const cpprof_labelset *)
{
    throw std::runtime_error("job failed");
}

// Runs cpprof_do(NULL, labels, <throws>) and returns the thread's label set
// as seen in the catch block (with a reference), or NULL with *caught = 0.
extern "C" cpprof_labelset *cxx_do_and_catch(const cpprof_labelset *labels,
                                             int *caught)
{
    *caught = 0;
    try {
        cpprof_do(nullptr, labels, throw_inside, nullptr);
    } catch (const std::runtime_error &) {
        *caught = 1;
        return cpprof_thread_labels();
    }
    return nullptr;
}
