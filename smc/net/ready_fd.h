// SPDX-License-Identifier: MIT
// ReadyFd: a descriptor whose poll readiness (readable, writable) the library sets.
#pragma once

#include <optional>

#include "base/mutex.h"
#include "base/result.h"
#include "base/unique_fd.h"

namespace smc::net
{

// One end of a Unix socket pair goes to the application; we hold both. Readable: one byte
// waits on the application's end. Not writable: the application's end has its (smallest)
// send buffer full, which only we drain. So poll, select and epoll see a socket's
// readiness, level-triggered, and the application never reads or writes it itself.
class ReadyFd
{
public:
    // Errors: socketpair's errno. Starts not readable, writable.
    static Result<ReadyFd> create();
    ReadyFd(ReadyFd&&) noexcept;
    ~ReadyFd();

    int fd() const noexcept { return app_.get(); }
    // Idempotent; a few syscalls when something changes, none otherwise. `again`: the peer
    // sent something (or may have): a readable fd that stays readable turns readable anew, as
    // a TCP socket does for each arrival, since an edge-triggered poller that decided from
    // FIONREAD that it read everything (nginx) waits for that edge. Never blocks.
    void set(bool readable, bool writable, bool again = false) noexcept;
    // While held, set() only remembers what it was asked, and release() does the last of it:
    // the number of a connection still being set up shows nothing before the connection is
    // there to answer (smc-run). Never blocks.
    void hold() noexcept;
    void release() noexcept;

private:
    ReadyFd(UniqueFd app, UniqueFd ours) noexcept;
    void apply(bool readable, bool writable, bool again) noexcept SMC_REQUIRES(mutex_);
    UniqueFd app_;
    UniqueFd ours_;
    Mutex mutex_;
    bool readable_ SMC_GUARDED_BY(mutex_) = false;
    bool writable_ SMC_GUARDED_BY(mutex_) = true;
    struct Wanted {
        bool readable, writable, again;
    };
    bool held_ SMC_GUARDED_BY(mutex_) = false;
    std::optional<Wanted> wanted_ SMC_GUARDED_BY(mutex_); // set() while held
};

} // namespace smc::net
