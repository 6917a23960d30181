// SPDX-License-Identifier: MIT
// ReadyFd: a descriptor whose poll readiness (readable, writable) the library sets.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "base/mutex.h"
#include "base/result.h"
#include "base/unique_fd.h"

namespace smc::net
{

// One end of a Unix socket pair goes to the application; we hold both. Readable: one byte
// waits on the application's end. Not writable: the application's end has enough of its
// (smallest) send buffer in flight for poll to say so, which only we drain. So poll, select
// and epoll see a socket's readiness, level-triggered, and the application never reads or
// writes it itself.
class ReadyFd
{
public:
    // Errors: socketpair's errno. Starts not readable, writable. Takes a pair a ReadyFd left
    // for reuse (reuseWhenDone) if there is one.
    static Result<ReadyFd> create();
    ReadyFd(ReadyFd&&) noexcept;
    // Closes both ends, or leaves the pair for a later create() (reuseWhenDone).
    ~ReadyFd();

    // The owner says nobody but this object will hold either end when it goes (the program's
    // numbers of fd() closed, out of every epoll set, never copied or sent): the pair then
    // serves a later create(). Not after count(true) (the peer may have been given our end),
    // nor for a pair made before a fork or a spawn (beforeFork, spawning). Never blocks.
    void reuseWhenDone() noexcept;
    // Never reused, whatever reuseWhenDone says later (its file may be held elsewhere).
    void neverReuse() noexcept;
    // Around fork(2) (pthread_atfork): every pair made so far has copies in the child, which
    // closes those waiting for reuse. The cache's lock is held across the fork.
    static void beforeFork() noexcept;
    static void afterForkParent() noexcept;
    static void afterForkChild() noexcept;
    // A child is about to start without fork handlers (posix_spawn, system, popen): it may keep
    // numbers of pairs made so far, which are then never reused.
    static void spawning() noexcept;
    // Closes the pairs waiting for reuse (tests).
    static void dropReusable() noexcept;
    // The numbers from `first` to `last` are about to be closed by someone else (close_range,
    // closefrom): pairs waiting for reuse with an end among them are dropped.
    static void closingRange(unsigned first, unsigned last) noexcept;
    // How many create() calls took a pair left for reuse, in this process.
    static std::uint64_t reused() noexcept;

    int fd() const noexcept { return app_.get(); }
    // Our end: a byte sent into it makes fd() readable. A peer that holds a copy (pulses:
    // the SMC-D peer wakes the application itself) may also read our fill from it (fd() looks
    // writable early: only its own connection loses) or shut it down (settle() fails).
    int pulseFd() const noexcept { return ours_.get(); }

    // Counted mode, for pulses: every byte on fd() is owed to someone, ours (set()) and the
    // peer's (expect()), and settle() takes exactly what is owed, never a byte more: a pulse
    // that comes for new bytes while we settle stays, and keeps fd() readable. set() then
    // never drains (only settle() does, on the reading thread). Starts off. Turning it on or
    // off drains what is queued (set() then says again what is readable); once it was on, a
    // peer may still send a late pulse, so every set() that is not readable drains.
    void count(bool on) noexcept;
    bool counting() const noexcept;
    void expect(unsigned pulses) noexcept;
    // Takes what is owed, waiting for bytes still on their way; the wait comes off
    // `patience`. False if they did not come within it or the other end was shut down (the
    // peer broke its promise).
    bool settle(std::chrono::microseconds& patience) noexcept;
    // Idempotent; a few syscalls when something changes, none otherwise. `again`: the peer
    // sent something (or may have): a readable fd that stays readable turns readable anew, as
    // a TCP socket does for each arrival, since an edge-triggered poller that decided from
    // FIONREAD that it read everything (nginx) waits for that edge. Never blocks.
    // Counted: a byte is sent when readable, unless one is owed already or `promised` (the
    // peer's pulse is on its way), or for `again`.
    void set(bool readable, bool writable, bool again = false, bool promised = false) noexcept;
    // While held, set() only remembers what it was asked, and release() does the last of it:
    // the number of a connection still being set up shows nothing before the connection is
    // there to answer (smc-run). Never blocks.
    void hold() noexcept;
    void release() noexcept;

private:
    ReadyFd(UniqueFd app, UniqueFd ours, std::size_t fill, std::uint64_t made) noexcept;
    void apply(bool readable, bool writable, bool again, bool promised) noexcept
        SMC_REQUIRES(mutex_);
    UniqueFd app_;
    UniqueFd ours_;
    std::size_t fill_;        // what makes app_ not writable (create())
    std::uint64_t forks_ = 0; // the count of forks and spawns before it was made
    mutable Mutex mutex_;
    bool readable_ SMC_GUARDED_BY(mutex_) = false;
    bool writable_ SMC_GUARDED_BY(mutex_) = true;
    bool counting_ SMC_GUARDED_BY(mutex_) = false;
    bool reuse_ SMC_GUARDED_BY(mutex_) = false;   // reuseWhenDone()
    bool counted_ SMC_GUARDED_BY(mutex_) = false; // count(true) ran: the peer may hold our end
    bool never_ SMC_GUARDED_BY(mutex_) = false;   // neverReuse()
    bool strays_ SMC_GUARDED_BY(mutex_) = false;  // counted once: a late pulse may still come
    unsigned owed_ SMC_GUARDED_BY(mutex_) = 0;    // counted: bytes sent or promised, not taken
    struct Wanted {
        bool readable, writable, again, promised;
    };
    bool held_ SMC_GUARDED_BY(mutex_) = false;
    std::optional<Wanted> wanted_ SMC_GUARDED_BY(mutex_); // set() while held
};

} // namespace smc::net
