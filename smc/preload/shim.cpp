// SPDX-License-Identifier: MIT
// Shim: settings from the environment, the process's stack, the table of SMC descriptors, fork.
#include "smc/preload/shim.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string_view>

#include "pool/size_class.h"
#include "smc/preload/real.h"
#include "smc/preload/setup.h"
#include "smc/socket/internal/make_stack.h"

namespace smc::preload
{

namespace
{
bool sameFile(int a, int b) noexcept
{
    struct stat x {
    }, y{};
    return ::fstat(a, &x) == 0 && ::fstat(b, &y) == 0 && x.st_dev == y.st_dev &&
           x.st_ino == y.st_ino;
}

// The options the program set on a number during its handshake, for its connection.
void applyOptions(Setup& setup, SocketImpl& impl)
{
    impl.setNonBlocking(setup.nonBlocking.load());
    MutexLocker lock(setup.mutex);
    if (setup.noDelay)
        (void)impl.setNoDelay(*setup.noDelay);
    if (setup.cork)
        (void)impl.setCork(*setup.cork);
    if (setup.recvTimeout)
        impl.setRecvTimeout(*setup.recvTimeout);
    if (setup.sendTimeout)
        impl.setSendTimeout(*setup.sendTimeout);
}

// "65536", "64K", "1M": bytes; 0 when unset or not a size.
std::size_t sizeFrom(const char* name) noexcept
{
    const char* text = std::getenv(name);
    if (!text || !*text)
        return 0;
    char* end = nullptr;
    unsigned long long n = std::strtoull(text, &end, 10);
    if (*end == 'K' || *end == 'k')
        n <<= 10, ++end;
    else if (*end == 'M' || *end == 'm')
        n <<= 20, ++end;
    return *end == '\0' ? static_cast<std::size_t>(n) : 0;
}

// Whether a blocked call that a signal handler woke fails with EINTR, as the kernel decides for
// a socket: always when the call has a timeout (SO_RCVTIMEO, SO_SNDTIMEO), else when the
// handler has no SA_RESTART. Which signal it was is not told here: the call fails if any caught
// signal's handler lacks SA_RESTART (asked only when a handler did interrupt a call).
bool interruptsAsTheKernel(bool timed) noexcept
{
    if (timed)
        return true;
    using Action = struct sigaction;
    for (int sig = 1; sig < NSIG; ++sig) {
        Action action{};
        if (::sigaction(sig, nullptr, &action) == 0 && action.sa_handler != SIG_DFL &&
            action.sa_handler != SIG_IGN && (action.sa_flags & SA_RESTART) == 0)
            return true;
    }
    return false;
}

Settings settingsFromEnvironment() noexcept
{
    Settings s;
    const char* debug = std::getenv("SMC_RUN_DEBUG");
    s.debug = debug && *debug && std::string_view(debug) != "0";
    // SMC_RUN_MODE: smcd (the default: SMC-D is what a host's own peers use), smcr (over
    // SMC_RUN_DEVICE, an ibverbs device), auto (SMC-D first, SMC-R if a device is given).
    const char* mode = std::getenv("SMC_RUN_MODE");
    const std::string_view m(mode ? mode : "");
    s.options.mode = m == "smcr" ? Mode::SmcR : m == "auto" ? Mode::Auto : Mode::SmcD;
    if (const char* device = std::getenv("SMC_RUN_DEVICE"); device && *device) {
        if (s.options.mode != Mode::SmcD) {
            s.stack.smcr = SmcrConfig{};
            s.stack.smcr->device = device;
        }
    }
    // An application expects its reads to sleep, as the kernel's do by default
    // (net.core.busy_poll = 0); SMC_RUN_BUSY_POLL (µs) spins first.
    s.options.busyPoll = std::chrono::microseconds(0);
    if (const char* spin = std::getenv("SMC_RUN_BUSY_POLL")) // at most a second
        s.options.busyPoll =
            std::chrono::microseconds(std::min(std::strtoul(spin, nullptr, 10), 1'000'000ul));
    s.options.onSignal = interruptsAsTheKernel;
    if (std::size_t rcv = sizeFrom("SMC_RUN_RCVBUF"))
        s.options.rmbBytes = rcv;
    if (std::size_t snd = sizeFrom("SMC_RUN_SNDBUF"))
        s.options.sndbufBytes = snd;
    if (const char* policy = std::getenv("SMC_RUN_POLICY")) {
        const std::string_view p(policy);
        s.stack.poolPolicy = p == "global"   ? LockPolicy::Global
                             : p == "bucket" ? LockPolicy::Bucket
                                             : LockPolicy::Default;
    }
    if (const char* reuse = std::getenv("SMC_RUN_REUSE"))
        s.reusePairs = std::string_view(reuse) != "0";
    s.stack.smcTcpOption = false; // our own processes are peers: the registry says so
    return s;
}
} // namespace

Shim& Shim::instance() noexcept
{
    static Shim* shim = new Shim(); // never destroyed: the application may call us from atexit
    // Then, once, the connections this program was started with. The calls that adoption
    // makes itself find the table as it is.
    static std::atomic<bool> adopting{false};
    if (!adopting.load(std::memory_order_acquire) && !adopting.exchange(true)) {
        try {
            shim->adoptInherited();
        } catch (const std::bad_alloc&) {
            // Out of memory this early: what was not adopted stays TCP.
        }
    }
    return *shim;
}

Shim::Shim()
    : settings_(settingsFromEnvironment()), marked_(new std::atomic<bool>[kMaxFd]()),
      tracked_(new std::atomic<bool>[kMaxFd]()), conns_(kMaxFd), announcements_(kMaxFd)
{
    ::pthread_atfork(beforeFork, afterForkParent, afterForkChild);
    // Our descriptors (a connection has several: its buffers, doorbells, ready socket) go to
    // the upper half of what the process may open, the program's keep the lower half.
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur >= 256)
        UniqueFd::placementFloor() = static_cast<int>(std::min<rlim_t>(limit.rlim_cur, kMaxFd) / 2);
}

Executor& Shim::serverHandshakes()
{
    MutexLocker lock(stackMutex_);
    return *serverHandshakes_;
}

std::shared_ptr<Arrivals> Shim::arrivals()
{
    MutexLocker lock(stackMutex_);
    return arrivals_;
}

StackCore* Shim::stack()
{
    MutexLocker lock(stackMutex_);
    if (!stack_ && !stackFailed_) {
        executor_ = std::make_unique<Executor>(Executor::Config{});
        arrivals_ = std::make_shared<Arrivals>(*executor_, false); // clients: no sources
        serverHandshakes_ = std::make_unique<Executor>(
            Executor::Config{.threads = 0, .maxBlocking = settings_.stack.handshakeThreads});
        Result<std::unique_ptr<SmcStack>> made =
            makeStack(settings_.stack, StackHooks{executor_.get(), nullptr});
        if (made) {
            stack_ = std::move(*made);
            static const bool registered = std::atexit(closeAllAtExit) == 0; // once: fork keeps it
            stackMade_.store(true, std::memory_order_release);
            if (!registered)
                log("connections left open at exit will look reset to their peers");
            Result<std::unique_ptr<Publisher>> p = Publisher::start(*stack_, *executor_);
            if (p)
                publisher_ = std::move(*p);
            else
                log("connections not published for smc-ss: %s", p.error().message().c_str());
        } else {
            stackFailed_ = true; // TCP from now on, said once
            log("no SMC stack (%s): TCP only", made.error().message().c_str());
        }
    }
    return stack_ ? &coreOf(*stack_) : nullptr;
}

thread_local bool Shim::tlsBypass = false;

Route Shim::route(int fd, Wait wait, Use use)
{
    std::optional<bool> nonBlock; // O_NONBLOCK, read once per call
    auto nonBlocked = [&] {
        if (!nonBlock)
            nonBlock = nonBlocking(fd);
        return *nonBlock;
    };
    // A read that may not wait is answered on the TCP socket itself until the client's CONFIRM
    // is there.
    auto later = [&] {
        return use == Use::Read &&
               (wait == Wait::Never || (wait == Wait::IfBlocking && nonBlocked()));
    };
    while (marked(fd) && !tlsBypass) {
        std::shared_ptr<Setup> setup;
        std::shared_ptr<Answered> answered;
        {
            Stripe& s = stripe(fd);
            MutexLocker lock(s.mutex);
            if (conns_[fd])
                return {conns_[fd], nullptr, 0};
            if (use == Use::None && (s.accepted.contains(fd) || s.answered.contains(fd)))
                return {}; // the TCP socket, as it is until then
            // A vfork child (inetd's, Python's subprocess: dup2 onto its standard input, then
            // exec) leaves the handshake to the program it becomes, which adopts the number.
            if (s.accepted.contains(fd) && !owner())
                return {};
            if (s.accepted.contains(fd)) {
                s.accepted.erase(fd);
                remark(fd, s);
                lock.unlock();
                // Our ACCEPT went just now, and nothing came after the PROPOSAL: the CONFIRM it
                // asks for is the socket's next edge, no look.
                if (beginAccepted(fd, nonBlocked()) && later())
                    return {nullptr, nullptr, EAGAIN};
                continue;
            }
            if (const auto it = s.setups.find(fd); it != s.setups.end()) {
                setup = it->second;
            } else if (const auto a = s.answered.find(fd); a != s.answered.end()) {
                answered = a->second;
            } else {
                // A call racing the number's close reaches the ready socket itself, and may
                // leave something on it (an option, a read that takes a byte): not reused.
                if (const auto c = s.closing.find(fd); c != s.closing.end())
                    c->second->shared = true;
                return {};
            }
        }
        if (answered) {
            if (answered->generation != generation())
                return {nullptr, nullptr, EOPNOTSUPP}; // the parent's handshake: it ends there
            // Anything but a read that may wait later takes the handshake on from here.
            if (!continueAnswered(fd, answered, later(), nonBlocked()))
                return {nullptr, nullptr, EAGAIN};
            continue;
        }
        if (setup->generation != generation())
            return {nullptr, setup, EOPNOTSUPP}; // the parent's handshake: it ends there
        Setup& st = *setup;
        MutexLocker lock(st.mutex);
        if (!st.over) {
            if (wait == Wait::Never || (wait == Wait::IfBlocking && st.nonBlocking))
                return {nullptr, setup, EAGAIN};
            st.ended.wait(lock, [&st]() SMC_REQUIRES(st.mutex) { return st.over; });
        }
        // Over: the number is SMC or TCP now, as the table says.
    }
    return {};
}

void Shim::add(int fd, std::shared_ptr<Conn> conn)
{
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    keepRegistrations(fd, *conn, s);
    conns_[fd] = std::move(conn);
    marked_[fd].store(true, std::memory_order_relaxed);
}

void Shim::keepRegistrations(int fd, Conn& conn, Stripe& s)
{
    if (conn.shared) // another number's (dup): its list is that number's, and never used
        return;
    conn.epolls.clear();
    if (const auto it = s.watches.find(fd); it != s.watches.end())
        for (const Watch& w : it->second)
            conn.epolls.push_back(w.epfd);
}

void Shim::markShared(int fd)
{
    if (!marked(fd))
        return;
    if (!owner()) { // a vfork child (shares our memory, takes no lock) about to pass it on
        net::ReadyFd::spawning();
        return;
    }
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    if (conns_[fd])
        conns_[fd]->shared = true;
    if (const auto it = s.closing.find(fd); it != s.closing.end())
        it->second->shared = true;
    if (const auto it = s.setups.find(fd); it != s.setups.end()) // still on its stand-in
        it->second->standIn->neverReuse();
}

void Shim::remark(int fd, Stripe& s)
{
    marked_[fd].store(conns_[fd] || announcements_[fd].valid() || s.setups.contains(fd) ||
                          s.accepted.contains(fd) || s.answered.contains(fd) ||
                          s.closing.contains(fd),
                      std::memory_order_relaxed);
}

void Shim::addAccepted(int fd)
{
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    s.accepted.insert(fd);
    s.watches.erase(fd);
    s.sizes.erase(fd);
    marked_[fd].store(true, std::memory_order_relaxed);
    tracked_[fd].store(true, std::memory_order_relaxed); // until its handshake moves it
}

void Shim::addAnswered(int fd, std::shared_ptr<Answered> answered)
{
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    s.answered[fd] = std::move(answered);
    marked_[fd].store(true, std::memory_order_relaxed);
}

bool Shim::holdsAnswered(int fd, const Answered& answered) const
{
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    const auto it = s.answered.find(fd);
    return it != s.answered.end() && it->second.get() == &answered;
}

void Shim::dropAnswered(int fd, const Answered& answered)
{
    std::shared_ptr<Answered> gone; // its end (an RMB back to the pool) not under the lock
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    if (const auto it = s.answered.find(fd);
        it != s.answered.end() && it->second.get() == &answered) {
        gone = std::move(it->second);
        s.answered.erase(it);
        remark(fd, s);
    }
}

Closing Shim::forget(int fd, bool replaced)
{
    Closing closing;
    if ((!marked(fd) && !tracked(fd)) || !owner())
        return closing;
    std::shared_ptr<Conn> conn;
    std::shared_ptr<Setup> setup;
    std::shared_ptr<Answered> answered;
    UniqueFd announcement;
    std::vector<int> epolls;
    {
        Stripe& s = stripe(fd);
        MutexLocker lock(s.mutex);
        tracked_[fd].store(false, std::memory_order_relaxed);
        s.sizes.erase(fd);
        conn = std::move(conns_[fd]);
        if (conn && conn->generation == generation()) {
            if (!conn->shared) // a shared one's list is not this number's to take
                epolls = std::move(conn->epolls);
            s.closing[fd] = conn; // the number stays marked until the kernel closed it
        }
        announcement = std::move(announcements_[fd]);
        if (const auto it = s.answered.find(fd); it != s.answered.end()) {
            answered = std::move(it->second);
            s.answered.erase(it);
        }
        if (const auto it = s.setups.find(fd); it != s.setups.end()) {
            setup = std::move(it->second);
            s.setups.erase(it);
            // The stand-in outlives the number (its handshake holds it): its registrations
            // would outlive the program's close and hear of the handshake's end.
            if (const auto w = s.watches.find(fd); w != s.watches.end())
                for (const Watch& watch : w->second)
                    (void)real().epoll_ctl(watch.epfd, EPOLL_CTL_DEL, fd, nullptr);
        }
        s.watches.erase(fd);
        s.accepted.erase(fd);
        remark(fd, s);
    }
    // A handshake under way gives up now (its task finds the number gone and cleans up); not
    // the parent's, which goes on there.
    if (setup && setup->generation == generation())
        (void)::shutdown(setup->tcp.get(), SHUT_RDWR);
    // An answered handshake ends with its number: the client learns it from the TCP socket,
    // which a forked child's copy would keep open. The parent's, in a child, holds an RMB of
    // the parent's stack: never given back here.
    if (answered && answered->generation == generation())
        (void)real().shutdown(fd, SHUT_RDWR);
    else if (answered)
        (void)new std::shared_ptr<Answered>(std::move(answered));
    if (!conn)
        return closing;
    if (conn->generation != generation()) {
        // The parent's connection: its stack has no threads here. Dropping the number is all a
        // child may do (the parent's connection goes on).
        (void)new std::shared_ptr<Conn>(std::move(conn)); // never destroyed here
        return closing;
    }
    closing.reusable_ = !replaced && !conn->shared && conn->numbers.load() == 1;
    if (closing.reusable_) {
        // The number is still open here, so its registrations can be named; one whose DEL
        // fails would outlive the close: then no reuse.
        const int e = errno;
        for (const int epfd : epolls)
            closing.reusable_ =
                real().epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr) == 0 && closing.reusable_;
        errno = e;
    }
    closing.fd_ = fd;
    closing.conn_ = std::move(conn);
    return closing;
}

void Shim::closed(int fd, const Conn& conn)
{
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    if (const auto it = s.closing.find(fd); it != s.closing.end() && it->second.get() == &conn) {
        s.closing.erase(it);
        remark(fd, s);
    }
}

namespace
{

// Whether this process has a child now, alive or not reaped. One started without our fork
// handlers (a vfork, a clone) may hold a number the program did not mark FD_CLOEXEC, so a
// pair is reused only when there is none (WNOWAIT: nothing is reaped).
bool hasChildren() noexcept
{
    siginfo_t info{};
    return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0 || errno != ECHILD;
}

} // namespace

void Closing::finish(bool closed) noexcept
{
    if (!conn_)
        return;
    std::shared_ptr<Conn> conn = std::move(conn_);
    const int e = errno;
    int cancel = 0; // a cancellation point below would end in std::terminate (noexcept)
    (void)::pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    Shim::instance().closed(fd_, *conn);
    if (conn->numbers.fetch_sub(1) == 1) {
        // Nothing can have copied the number since forget() (markShared runs before a copy,
        // and the number is closed now): whoever held it, shared says so.
        if (closed && reusable_ && !conn->shared && Shim::instance().settings().reusePairs &&
            !hasChildren())
            conn->impl->reuseReadyWhenDone();
        conn->impl->close();
    }
    conn.reset(); // the connection's end, before errno says what the program's close did
    (void)::pthread_setcancelstate(cancel, nullptr);
    errno = e;
}

void Shim::holdAnnouncement(int fd, UniqueFd announcement)
{
    MutexLocker lock(stripe(fd).mutex);
    announcements_[fd] = std::move(announcement);
    marked_[fd].store(true, std::memory_order_relaxed);
}

bool Shim::announced(int fd) const
{
    if (!marked(fd))
        return false;
    MutexLocker lock(stripe(fd).mutex);
    return announcements_[fd].valid();
}

void Shim::dropAnnouncement(int fd)
{
    UniqueFd gone;
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    gone = std::move(announcements_[fd]);
    remark(fd, s);
}

void Shim::track(int fd) noexcept
{
    if (fd < 0 || fd >= kMaxFd)
        return;
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    s.watches.erase(fd); // a number that went by a way we did not see (close_range)
    s.sizes.erase(fd);
    tracked_[fd].store(true, std::memory_order_relaxed);
}

void Shim::setBufferSize(int fd, bool receive, std::size_t bytes) noexcept
{
    if (fd < 0 || fd >= kMaxFd || bytes == 0)
        return;
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    try {
        BufferSizes& sizes = s.sizes[fd];
        (receive ? sizes.receive : sizes.send) = bytes;
        sizesSet_.store(true, std::memory_order_relaxed);
    } catch (const std::bad_alloc&) {
        // Out of memory: the connection gets the run's sizes.
    }
}

std::optional<Shim::BufferSizes> Shim::sizesOf(int fd) const noexcept
{
    if (!sizesSet_.load(std::memory_order_relaxed) || fd < 0 || fd >= kMaxFd)
        return std::nullopt;
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    const auto it = s.sizes.find(fd);
    if (it == s.sizes.end())
        return std::nullopt;
    return it->second;
}

void Shim::inheritBufferSizes(int listener, int fd) noexcept
{
    const std::optional<BufferSizes> sizes = sizesOf(listener);
    if (!sizes)
        return;
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    try {
        s.sizes[fd] = *sizes;
    } catch (const std::bad_alloc&) {
        // Out of memory: the connection gets the run's sizes.
    }
}

SocketOptions Shim::optionsFor(int fd) const noexcept
{
    SocketOptions options = settings_.options;
    const std::optional<BufferSizes> sizes = sizesOf(fd);
    if (!sizes)
        return options;
    // Past the largest buffer a connection may have, the largest: as Linux's SMC caps them.
    const std::size_t most =
        classBytes(maxSizeClass(options.mode == Mode::SmcR ? Tech::SmcR : Tech::SmcD));
    if (sizes->receive != 0)
        options.rmbBytes = std::min(sizes->receive, most);
    if (sizes->send != 0)
        options.sndbufBytes = std::min(sizes->send, most);
    return options;
}

void Shim::untrack(int fd)
{
    if (!tracked(fd))
        return;
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    tracked_[fd].store(false, std::memory_order_relaxed);
    if (const std::shared_ptr<Conn>& conn = conns_[fd]) // registered since add(): kept too
        keepRegistrations(fd, *conn, s);
    s.watches.erase(fd);
}

int Shim::epollControl(int epfd, int op, int fd, epoll_event* event)
{
    if (!tracked(fd) && !marked(fd))
        return real().epoll_ctl(epfd, op, fd, event);
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    const int r = real().epoll_ctl(epfd, op, fd, event);
    const int e = errno;
    if (const auto it = s.closing.find(fd); it != s.closing.end() && r == 0 && op != EPOLL_CTL_DEL)
        it->second->shared = true; // its close may not remove this registration
    if (const std::shared_ptr<Conn>& conn = conns_[fd]; conn && !tracked_[fd]) {
        if (conn->shared) // never reused: nothing to remove at its close
            return r;
        // Whatever says the number is in the set (a MOD, an ADD refused as EEXIST) records it.
        const bool in = (r == 0 && op != EPOLL_CTL_DEL) || (r != 0 && e == EEXIST);
        std::vector<int>& sets = conn->epolls;
        const auto it = std::find(sets.begin(), sets.end(), epfd);
        if (r == 0 && op == EPOLL_CTL_DEL && it != sets.end())
            sets.erase(it);
        else if (in && it == sets.end())
            sets.push_back(epfd);
        errno = e;
        return r;
    }
    if (r != 0)
        return r;
    if (!tracked_[fd].load(std::memory_order_relaxed))
        return r;
    std::vector<Watch>& list = s.watches[fd];
    const auto it =
        std::find_if(list.begin(), list.end(), [epfd](const Watch& w) { return w.epfd == epfd; });
    if (op == EPOLL_CTL_DEL && it != list.end())
        list.erase(it);
    else if (op == EPOLL_CTL_MOD && it != list.end() && event)
        it->event = *event;
    else if (op == EPOLL_CTL_ADD && event)
        list.push_back({epfd, *event});
    return r;
}

bool Shim::moveTo(int fd, int file)
{
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    return moveLocked(fd, file, s);
}

bool Shim::moveLocked(int fd, int file, Stripe& s)
{
    const int fdFlags = real().fcntl(fd, F_GETFD); // as the program set it last
    const bool cloexec = fdFlags >= 0 && (fdFlags & FD_CLOEXEC) != 0;
    // Only registrations that were there move: a set closed meanwhile, or a number that now
    // names another set, has none of this number's (DEL fails), and gets none.
    std::vector<Watch> moved;
    if (const auto it = s.watches.find(fd); it != s.watches.end()) {
        for (const Watch& w : it->second)
            if (real().epoll_ctl(w.epfd, EPOLL_CTL_DEL, fd, nullptr) == 0)
                moved.push_back(w);
    }
    const bool done = real().dup3(file, fd, cloexec ? O_CLOEXEC : 0) >= 0;
    const int e = errno;
    for (Watch& w : moved) // to the new file, or back to the old one
        (void)real().epoll_ctl(w.epfd, EPOLL_CTL_ADD, fd, &w.event);
    if (!moved.empty() || s.watches.contains(fd))
        s.watches[fd] = std::move(moved);
    errno = e;
    return done;
}

bool Shim::addSetup(int fd, std::shared_ptr<Setup> setup)
{
    Stripe& s = stripe(fd);
    MutexLocker lock(s.mutex);
    if (!moveLocked(fd, setup->standIn->fd(), s))
        return false;
    s.setups[fd] = std::move(setup);
    marked_[fd].store(true, std::memory_order_relaxed);
    tracked_[fd].store(true, std::memory_order_relaxed);
    return true;
}

bool Shim::settle(int fd, Setup& setup, int file, std::shared_ptr<Conn> conn)
{
    bool moved = false;
    const bool standsIn = file == setup.standIn->fd(); // the connection's ready descriptor now
    {
        Stripe& s = stripe(fd);
        MutexLocker lock(s.mutex);
        const auto it = s.setups.find(fd);
        // Closed meanwhile: by a call we saw (the setup is gone from the table), or by one we
        // did not (closefrom, a raw syscall: the number means another file now).
        if (it != s.setups.end() && it->second.get() == &setup &&
            sameFile(fd, setup.standIn->fd())) {
            // What the program set on the number meanwhile, applied here, where its own
            // F_SETFL and setsockopt look again (fd_hooks.cpp).
            const bool nonBlock = setup.nonBlocking.load();
            if (!standsIn) // the stand-in has the program's F_SETFL already
                setNonBlocking(file, nonBlock);
            if (conn) {
                conn->nonBlocking = nonBlock;
                applyOptions(setup, *conn->impl);
            }
            // The stand-in that became the connection's ready descriptor stays.
            moved = standsIn || moveLocked(fd, file, s);
            if (!moved) {
                log("fd %d: cannot move to its connection: %s", fd, std::strerror(errno));
            } else {
                if (conn)
                    keepRegistrations(fd, *conn, s);
                conns_[fd] = std::move(conn);
            }
            // What the connection said meanwhile shows now that a call finds it.
            setup.standIn->release();
            s.setups.erase(it);
            s.watches.erase(fd);
            tracked_[fd].store(false, std::memory_order_relaxed);
            remark(fd, s);
        }
    }
    {
        MutexLocker lock(setup.mutex);
        setup.over = true;
    }
    setup.ended.notify_all();
    // A poll(2) still on the stand-in returns; a number left on it reads the end of a stream.
    if (!(moved && standsIn))
        (void)::shutdown(setup.standIn->fd(), SHUT_RDWR);
    return moved;
}

void Shim::log(const char* format, ...) const
{
    if (!settings_.debug)
        return;
    char line[512];
    int n = std::snprintf(line, sizeof line, "smc-run[%d]: ", static_cast<int>(::getpid()));
    va_list args;
    va_start(args, format);
    n += std::vsnprintf(line + n, sizeof line - static_cast<std::size_t>(n) - 1, format, args);
    va_end(args);
    n = std::min<int>(n, sizeof line - 2);
    line[n++] = '\n';
    (void)!real().write(2, line, static_cast<std::size_t>(n)); // one write: lines do not mix
}

void Shim::closeAllAtExit() noexcept
{
    if (!stackMade_.load(std::memory_order_acquire))
        return; // nothing to end, and no shim to make now
    Shim& s = instance();
    if (!s.owner())
        return;
    // No lock is waited for: exit may run in a signal handler on a thread inside a call of
    // ours. What cannot be had now ends as before, a reset to the peer. A connection with
    // several numbers is ended at the first; the others find it ended.
    for (int fd = 0; fd < kMaxFd; ++fd) {
        if (!s.marked(fd))
            continue;
        Stripe& stripe = s.stripe(fd);
        if (!stripe.mutex.tryLock())
            continue;
        if (const std::shared_ptr<Conn>& conn = s.conns_[fd];
            conn && conn->generation == s.generation())
            (void)conn->impl->endAtExit(); // tries its locks, never waits
        stripe.mutex.unlock();
    }
}

void Shim::beforeFork() noexcept SMC_TSA(no_thread_safety_analysis)
{
    Shim& s = instance();
    s.stackMutex_.lock();
    for (Stripe& stripe : s.stripes_)
        stripe.mutex.lock();
    net::ReadyFd::beforeFork(); // last: a ReadyFd goes under a stripe's lock
}

void Shim::afterForkParent() noexcept SMC_TSA(no_thread_safety_analysis)
{
    Shim& s = instance();
    net::ReadyFd::afterForkParent();
    for (Stripe& stripe : s.stripes_)
        stripe.mutex.unlock();
    s.stackMutex_.unlock();
}

void Shim::afterForkChild() noexcept SMC_TSA(no_thread_safety_analysis)
{
    Shim& s = instance();
    // The parent's stack has no threads here: never used or destroyed in this process. Its
    // names, which say "the parent's process", go (below: closing takes stripes).
    Publisher* publisher = s.publisher_.release();
    ShmIsm* device = s.stack_ ? &coreOf(*s.stack_).device() : nullptr;
    (void)s.stack_.release();
    (void)new std::shared_ptr<Arrivals>(std::move(s.arrivals_));
    (void)s.executor_.release();
    (void)s.serverHandshakes_.release();
    s.owner_ = ::getpid();
    s.stackFailed_ = false;
    s.generation_.fetch_add(1);
    for (Stripe& stripe : s.stripes_) {
        // Closes other threads had under way: they are the parent's to finish.
        std::vector<int> closed;
        for (auto& [fd, conn] : stripe.closing) {
            (void)new std::shared_ptr<Conn>(std::move(conn)); // the parent's: never destroyed
            closed.push_back(fd);
        }
        stripe.closing.clear();
        for (const int fd : closed)
            s.remark(fd, stripe);
        stripe.mutex.unlock();
    }
    s.stackMutex_.unlock();
    // Last: closing the parent's cached pairs and names goes through our close(), which takes
    // stripes.
    net::ReadyFd::afterForkChild();
    if (publisher)
        publisher->leaveInChild();
    if (device)
        device->leaveInChild();
}

bool nonBlocking(int fd) noexcept
{
    const int flags = real().fcntl(fd, F_GETFL);
    return flags >= 0 && (flags & O_NONBLOCK) != 0;
}

void setNonBlocking(int fd, bool on) noexcept
{
    const int flags = real().fcntl(fd, F_GETFL);
    if (flags >= 0)
        (void)real().fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

int errnoOf(std::error_code ec) noexcept
{
    const std::error_condition c = ec.default_error_condition();
    return c.category() == std::generic_category() && c.value() != 0 ? c.value() : EIO;
}

} // namespace smc::preload
