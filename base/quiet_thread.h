// SPDX-License-Identifier: MIT
// quietThread: a std::thread that takes none of the process's signals.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace smc
{

// The library's threads leave signals to the application's: a process-directed signal (SIGCHLD,
// SIGTERM, SIGINT...) goes to a thread that does not block it, and a program that waits for one
// in sigsuspend() on its own thread (nginx's master) would otherwise never see it. The thread
// starts with every signal blocked (inherited from the creating thread, whose mask is restored at
// once), so no signal can reach it even before its first instruction. Signals a fault raises
// (SIGSEGV, SIGBUS) still stop the process.
template <typename F> std::thread quietThread(F&& body)
{
    sigset_t all, previous;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &previous);
    std::thread t(std::forward<F>(body));
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    return t;
}

} // namespace smc
