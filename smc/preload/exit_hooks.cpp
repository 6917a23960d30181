// SPDX-License-Identifier: MIT
// _exit and _Exit: a process that ends that way ends its connections as exit(3) does.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

#include "smc/preload/shim.h"

namespace
{
// The connections end as at exit(3), then what libc's _exit does: every thread of the process
// goes (exit_group does not return).
[[noreturn]] void endProcess(int status) noexcept
{
    smc::preload::Shim::closeAllAtExit();
    for (;;)
        ::syscall(SYS_exit_group, status);
}
} // namespace

extern "C" {

// A program that writes its answer and calls _exit without closing (a forking server's child
// often does, to leave its parent's stdio buffers and atexit handlers alone) relies on the
// kernel's close at its end, as one that calls exit(3) does.
void _exit(int status)
{
    endProcess(status);
}

void _Exit(int status) noexcept
{
    endProcess(status);
}
}
