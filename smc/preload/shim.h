// SPDX-License-Identifier: MIT
// Shim: the process's state under smc-run: its stack, its settings, and which descriptors are SMC.
#pragma once

#include <sys/epoll.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/mutex.h"
#include "base/unique_fd.h"
#include "smc/preload/publisher.h"
#include "smc/socket/internal/arrivals.h"
#include "smc/socket/internal/socket_impl.h"
#include "smc/socket/socket.h"
#include "smc/socket/stack.h"

namespace smc::preload
{

// The model (docs/design.md, "smc-run"): the application's descriptor is always a real kernel
// descriptor. Until a connection is SMC it is the TCP socket itself, and whatever we do not
// redirect reaches the kernel as it is; a fallback is simply not redirecting. Once a connection
// is SMC (decided inside connect() or accept(), before the application sees it), its number is
// made to refer to the connection's ready descriptor (a Unix socket end whose readiness mirrors
// the connection), so poll, select and epoll work unchanged; reads, writes and the rest go to
// the connection, socket options and addresses to the TCP socket.
struct Conn {
    std::shared_ptr<SocketImpl> impl;
    UniqueFd tcp; // our own descriptor of the TCP socket: options, addresses
    // O_NONBLOCK of the open file, as fcntl(2) and ioctl(FIONBIO) set it through the shim.
    std::atomic<bool> nonBlocking{false};
    // Descriptor numbers that refer to this connection (dup): it ends with the last.
    std::atomic<int> numbers{1};
    // The fork generation it was made in: a child only drops the parent's connections.
    std::uint64_t generation = 0;
    // Its ready descriptor may be somewhere we cannot see (a dup, SCM_RIGHTS, an owner set by
    // fcntl or ioctl): then its socket pair is never reused (net::ReadyFd::reuseWhenDone).
    std::atomic<bool> shared{false};
    // The epoll sets its number is registered in, as the program's epoll_ctl calls left them;
    // guarded by the number's stripe. At its close they are removed: the socket pair outlives
    // the number when it is reused, and so would they.
    std::vector<int> epolls;
};

// A connection whose last number is closing (Shim::forget): once the kernel closed the number,
// finish() closes the connection, leaving its socket pair for a later connection when nothing
// else can hold it. Destroyed unfinished, it finishes as if the close failed (no reuse).
class Closing
{
public:
    Closing() = default;
    Closing(Closing&& other) noexcept
        : fd_(other.fd_), conn_(std::move(other.conn_)), reusable_(other.reusable_)
    {
    }
    Closing& operator=(Closing&&) = delete;
    ~Closing() { finish(false); }
    // `closed`: the kernel's close of the number succeeded. Keeps errno.
    void finish(bool closed) noexcept;
    // Whether there is a connection to finish.
    bool pending() const noexcept { return conn_ != nullptr; }

private:
    friend class Shim;
    int fd_ = -1;
    std::shared_ptr<Conn> conn_;
    bool reusable_ = false; // its registrations all removed while the number was still its own
};

struct Settings {
    bool debug = false;     // SMC_RUN_DEBUG: one line per connection on stderr
    SocketOptions options;  // SMC_RUN_SNDBUF, SMC_RUN_RCVBUF, SMC_RUN_BUSY_POLL
    StackConfig stack;      // SMC_RUN_POLICY
    bool reusePairs = true; // SMC_RUN_REUSE=0: no ready socket pair serves a later connection
};

struct Setup;    // setup.h
struct Answered; // setup.h

// What a call on a number goes to.
struct Route {
    std::shared_ptr<Conn> conn;   // an SMC connection
    std::shared_ptr<Setup> setup; // a handshake under way (then error is set)
    // When set, the call fails with it: EAGAIN (a handshake under way), EOPNOTSUPP (the
    // parent's handshake, in a forked child).
    int error = 0;
};

// Whether route() waits for a handshake under way: never (the call answers at once), when the
// number is blocking and the call may wait, or always (a call with no way to say "later").
enum class Wait : std::uint8_t { Never, IfBlocking, Always };

// What a call does with the connection: nothing (its options and addresses), reads its bytes
// (which a handshake under way may answer with EAGAIN on the TCP socket itself, as TCP would
// with nothing to read), or anything else (its bytes either way, or a copy of the number).
enum class Use : std::uint8_t { None, Read, Any };

class Shim
{
public:
    // Descriptors at or above this are never redirected (they stay TCP).
    static constexpr int kMaxFd = 1 << 16;

    static Shim& instance() noexcept;
    // exit(3) and _exit(2): the connections this process still has end as the kernel's close
    // would end them at its exit (orderly, unless something is left unread), where the peer
    // would see a reset after the bytes, not the end of the stream TCP shows it. Waits for no
    // lock and allocates nothing (_exit comes from signal handlers and forked children too);
    // does nothing in a process that never made a stack, or in a vfork child.
    static void closeAllAtExit() noexcept;

    const Settings& settings() const noexcept { return settings_; }
    // The process's stack, made on first use (and again in a child after fork). Null when it
    // cannot be had: then everything stays TCP.
    StackCore* stack();
    // Server handshakes run here, client handshakes on the stack's own pool: a process that is
    // both ends of its connections (nginx proxying to itself) could otherwise fill the pool
    // with clients that wait for servers queued behind them. Valid once stack() gave one.
    Executor& serverHandshakes();
    // Client handshakes waiting for the server's answer (setup.h, beginConnecting); null
    // before stack() gave one.
    std::shared_ptr<Arrivals> arrivals();
    std::uint64_t generation() const noexcept { return generation_.load(); }
    // Whether this is the process the table belongs to: not a vfork(2) child, which shares the
    // table's memory with its parent until it execs (and closes descriptors meanwhile: Python's
    // subprocess), so it must leave the table alone.
    bool owner() const noexcept { return ::getpid() == owner_.load(std::memory_order_relaxed); }

    // What `fd` is to us; empty for a descriptor that is not ours (the common case costs one
    // relaxed load). A handshake under way on a blocking number, or with Wait::Always, is
    // waited for: then the number is SMC or TCP. A call that uses the connection begins or
    // continues the handshake of one accepted for SMC (setup.h: beginAccepted, Answered);
    // calls on its options and addresses (Use::None) do not.
    Route route(int fd, Wait wait = Wait::IfBlocking, Use use = Use::Any);
    // Whether `fd` is, or may become, a number whose calls the shim answers (a connection, a
    // handshake, a socket that has not connected or been accepted for SMC yet). A hint.
    bool mayRedirect(int fd) const noexcept { return marked(fd) || tracked(fd); }
    // Whether `fd` is a TCP socket our socket() made that has not connected yet (its type was
    // asked then): a connect need not ask again.
    bool unconnectedTcp(int fd) const noexcept { return tracked(fd) && !marked(fd); }
    // SO_RCVBUF (`receive`) or SO_SNDBUF as the program set it on `fd` before its connection:
    // `bytes` is half what the kernel reports, what Linux's SMC sizes that buffer by. The
    // number keeps it until it is closed, replaced or made anew.
    void setBufferSize(int fd, bool receive, std::size_t bytes) noexcept;
    // What listener `listener` was set to, connection `fd` it accepted has too.
    void inheritBufferSizes(int listener, int fd) noexcept;
    // The options of the connection number `fd` makes or accepts: the run's, with the buffer
    // sizes set on it (capped at the largest buffer).
    SocketOptions optionsFor(int fd) const noexcept;
    // While one lives, this thread's calls reach the kernel as they are (route() finds
    // nothing): for the library's own calls on a number the table holds.
    class Bypass
    {
    public:
        Bypass() noexcept { tlsBypass = true; }
        ~Bypass() { tlsBypass = false; }
        Bypass(const Bypass&) = delete;
        Bypass& operator=(const Bypass&) = delete;
    };
    void add(int fd, std::shared_ptr<Conn> conn);

    // The number `fd` goes (close, or dup2 onto it): its announcement is dropped, its handshake
    // cut short, and its connection closed if it was the last number of one (only dropped if
    // it is the parent's), by the Closing returned, once the kernel closed the number. Not
    // shared, its ready descriptor's socket pair then serves a later connection, out of the
    // epoll sets the number was in. `replaced`: the number refers to another file already
    // (dup2 onto it), so its epoll registrations can no longer be named: no reuse.
    [[nodiscard]] Closing forget(int fd, bool replaced = false);
    // `fd`'s connection, if it has one (or is closing), may have its ready descriptor held
    // elsewhere from now on (a copy of the number, SCM_RIGHTS, an owner): its pair is never
    // reused. Call it before the call that may copy the number.
    void markShared(int fd);

    // `fd` was accepted for SMC: its handshake waits for its first use (route()).
    void addAccepted(int fd);
    // The connections this program was started with that another process accepted for SMC and
    // never used (inetd, tcpserver: accept, fork, exec with the socket as standard input and
    // output) are taken on as accepted here (inherited.cpp). Once, by instance().
    void adoptInherited();
    // `fd`'s handshake answered on the TCP socket and waits for the client (setup.h), until a
    // call took it on and the number's next state is in the table (dropAnswered, if `answered`
    // is still the number's). Closing the number ends it: the TCP socket shuts down (a copy in
    // a forked child does not keep the client waiting).
    void addAnswered(int fd, std::shared_ptr<Answered> answered);
    bool holdsAnswered(int fd, const Answered& answered) const;
    void dropAnswered(int fd, const Answered& answered);

    // The listener announcement held for listening socket `fd` (see registry.h).
    void holdAnnouncement(int fd, UniqueFd announcement);
    bool announced(int fd) const;
    void dropAnnouncement(int fd);

    // epoll registrations of a number that may still change its file (a new TCP socket until
    // it connects or listens, a number whose handshake is under way) are kept, so that
    // moveTo() can move them along: epoll registers a (number, file) pair, and a registration
    // left on the old file would never hear of the new one.
    void track(int fd) noexcept;
    void untrack(int fd);
    int epollControl(int epfd, int op, int fd, epoll_event* event);
    // `fd` refers to `file` from now on (dup3, its FD_CLOEXEC kept), with its tracked
    // registrations. Holds fd's lock. False, nothing changed, when dup3 fails.
    bool moveTo(int fd, int file);

    // A handshake begins on `fd`: the number moves to the setup's stand-in (moveTo), tracked
    // until the handshake ends. False, nothing changed, when it cannot be moved.
    bool addSetup(int fd, std::shared_ptr<Setup> setup);
    // Its end: `fd` refers to `file` (the connection's ready descriptor with `conn`, or the TCP
    // socket without), its registrations moved, and the handshake's waiters woken. False if
    // the number is not the setup's any more (closed meanwhile), or could not be moved (it
    // then stays on the stand-in, shut down: a dead socket; logged).
    bool settle(int fd, Setup& setup, int file, std::shared_ptr<Conn> conn);

    // One line on stderr when SMC_RUN_DEBUG is set.
    void log(const char* format, ...) const __attribute__((format(printf, 2, 3)));

private:
    struct Watch {
        int epfd;
        epoll_event event;
    };
    // The table's lock for a number, and what it guards besides conns_ and announcements_:
    // the few numbers with a handshake under way or tracked registrations.
    struct BufferSizes {
        std::size_t receive = 0, send = 0;
    };
    struct Stripe {
        Mutex mutex;
        std::unordered_map<int, std::shared_ptr<Setup>> setups SMC_GUARDED_BY(mutex);
        std::unordered_map<int, std::vector<Watch>> watches SMC_GUARDED_BY(mutex);
        std::unordered_set<int> accepted SMC_GUARDED_BY(mutex); // awaiting their first use
        std::unordered_map<int, std::shared_ptr<Answered>> answered SMC_GUARDED_BY(mutex);
        // Between forget() and the kernel's close of the number (Closing::finish).
        std::unordered_map<int, std::shared_ptr<Conn>> closing SMC_GUARDED_BY(mutex);
        std::unordered_map<int, BufferSizes> sizes SMC_GUARDED_BY(mutex); // setBufferSize
    };
    friend class Closing;
    // Closing::finish: the number's entry in `closing` goes.
    void closed(int fd, const Conn& conn);

    Shim();
    // fork(2): every lock is taken before, and let go after in both processes, so the child's
    // copies are consistent; the child then forgets its parent's stack (its threads are not
    // there).
    static void beforeFork() noexcept;
    static void afterForkParent() noexcept;
    static void afterForkChild() noexcept;
    Stripe& stripe(int fd) const noexcept { return stripes_[static_cast<unsigned>(fd) % kStripes]; }
    // Whether the table may hold something for `fd` (no lock: a hint the caller confirms).
    bool marked(int fd) const noexcept
    {
        return fd >= 0 && fd < kMaxFd && marked_[fd].load(std::memory_order_relaxed);
    }
    bool tracked(int fd) const noexcept
    {
        return fd >= 0 && fd < kMaxFd && tracked_[fd].load(std::memory_order_relaxed);
    }
    // What setBufferSize recorded for `fd`, if anything. Takes its stripe.
    std::optional<BufferSizes> sizesOf(int fd) const noexcept;
    void remark(int fd, Stripe& s) SMC_REQUIRES(s.mutex);
    void keepRegistrations(int fd, Conn& conn, Stripe& s) SMC_REQUIRES(s.mutex);
    bool moveLocked(int fd, int file, Stripe& s) SMC_REQUIRES(s.mutex);
    void settled(int fd, Stripe& s) SMC_REQUIRES(s.mutex);

    static thread_local bool tlsBypass;
    static inline std::atomic<bool> stackMade_{false}; // closeAllAtExit has something to end
    std::atomic<bool> sizesSet_{false};                // a number has buffer sizes: sizesOf looks
    static constexpr unsigned kStripes = 64;
    Settings settings_;
    std::atomic<std::uint64_t> generation_{1};
    std::atomic<pid_t> owner_{::getpid()};
    // Per number: whether conns_, announcements_ or a setup has something, so a descriptor that
    // is not ours costs one relaxed load; and whether its registrations are tracked.
    // conns_[fd] and announcements_[fd] are guarded by stripe(fd), a lock picked at run time,
    // which clang's analysis cannot express; TSan checks it in CI.
    std::unique_ptr<std::atomic<bool>[]> marked_;
    std::unique_ptr<std::atomic<bool>[]> tracked_;
    mutable std::array<Stripe, kStripes> stripes_;
    std::vector<std::shared_ptr<Conn>> conns_;
    std::vector<UniqueFd> announcements_;
    Mutex stackMutex_;
    // The stack's own threads (not Executor::shared(): a child after fork needs new ones).
    std::unique_ptr<Executor> executor_ SMC_GUARDED_BY(stackMutex_);
    std::unique_ptr<Executor> serverHandshakes_ SMC_GUARDED_BY(stackMutex_);
    std::shared_ptr<Arrivals> arrivals_ SMC_GUARDED_BY(stackMutex_);
    std::unique_ptr<SmcStack> stack_ SMC_GUARDED_BY(stackMutex_);
    std::unique_ptr<Publisher> publisher_ SMC_GUARDED_BY(stackMutex_); // for smc-ss
    bool stackFailed_ SMC_GUARDED_BY(stackMutex_) = false;
};

// O_NONBLOCK of the file `fd` refers to, read and set.
bool nonBlocking(int fd) noexcept;
void setNonBlocking(int fd, bool on) noexcept;

// The errno of an error code (EIO for one that is not a system error).
int errnoOf(std::error_code ec) noexcept;

// How a socket call fails: -1, with errno `e`.
inline int fail(int e) noexcept
{
    errno = e;
    return -1;
}

} // namespace smc::preload
