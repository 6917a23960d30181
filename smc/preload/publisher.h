// SPDX-License-Identifier: MIT
// Publisher: a process's SMC connections and statistics, for smc-ss, on an abstract Unix socket.
#pragma once

#include <memory>

#include "base/executor.h"
#include "base/unique_fd.h"
#include "smc/socket/stack.h"

namespace smc::preload
{

// Listens on "smc-core/p/PID" (abstract: gone with the process). Each connection gets one
// answer and is closed: a line of JSON ({"pid", "command", "smcss": smcssJson}) and then the
// smcss table, written with a 200 ms limit so that a peer that does not read holds the
// executor's thread no longer than that. Nothing is read from the peer.
class Publisher
{
public:
    // Errors: socket(2)'s, bind(2)'s, listen(2)'s; an executor watch that failed (io_error).
    static Result<std::unique_ptr<Publisher>> start(SmcStack& stack, Executor& executor);
    ~Publisher();
    // In a fork(2) child, which never uses the parent's publisher: the parent's name goes from
    // this process (the listener is closed). Nothing else is touched.
    void leaveInChild() noexcept { listener_.reset(); }
    Publisher(const Publisher&) = delete;
    Publisher& operator=(const Publisher&) = delete;

private:
    Publisher(SmcStack& stack, Executor& executor, UniqueFd listener);
    void answer() noexcept;

    SmcStack& stack_;
    Executor& executor_;
    UniqueFd listener_;
    int watch_ = -1;
};

} // namespace smc::preload
