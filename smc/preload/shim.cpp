// SPDX-License-Identifier: MIT
// Shim: settings from the environment, the process's stack, the table of SMC descriptors, fork.
#include "smc/preload/shim.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "smc/preload/real.h"
#include "smc/socket/internal/make_stack.h"

namespace smc::preload
{

namespace
{
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

Settings settingsFromEnvironment() noexcept
{
    Settings s;
    const char* debug = std::getenv("SMC_RUN_DEBUG");
    s.debug = debug && *debug && std::string_view(debug) != "0";
    s.options.mode = Mode::SmcD; // SMC-D is what a host's own peers use
    // An application expects its reads to sleep, as the kernel's do by default
    // (net.core.busy_poll = 0); SMC_RUN_BUSY_POLL (µs) spins first.
    s.options.busyPoll = std::chrono::microseconds(0);
    if (const char* spin = std::getenv("SMC_RUN_BUSY_POLL"))
        s.options.busyPoll = std::chrono::microseconds(std::strtoul(spin, nullptr, 10));
    if (std::size_t rcv = sizeFrom("SMC_RUN_RCVBUF"))
        s.options.rmbBytes = rcv;
    if (const char* policy = std::getenv("SMC_RUN_POLICY")) {
        const std::string_view p(policy);
        s.stack.poolPolicy = p == "global"   ? LockPolicy::Global
                             : p == "bucket" ? LockPolicy::Bucket
                                             : LockPolicy::Default;
    }
    s.stack.smcTcpOption = false; // SMC-D between our own processes: the registry says it
    return s;
}
} // namespace

Shim& Shim::instance() noexcept
{
    static Shim* shim = new Shim(); // never destroyed: the application may call us from atexit
    return *shim;
}

Shim::Shim()
    : settings_(settingsFromEnvironment()), marked_(new std::atomic<bool>[kMaxFd]()),
      conns_(kMaxFd), announcements_(kMaxFd)
{
    ::pthread_atfork(beforeFork, afterForkParent, afterForkChild);
    // Our descriptors (a connection has several: its buffers, doorbells, ready socket) go to
    // the upper half of what the process may open, the program's keep the lower half.
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur >= 256)
        UniqueFd::placementFloor() = static_cast<int>(std::min<rlim_t>(limit.rlim_cur, kMaxFd) / 2);
}

StackCore* Shim::stack()
{
    MutexLocker lock(stackMutex_);
    if (!stack_ && !stackFailed_) {
        executor_ = std::make_unique<Executor>(Executor::Config{});
        Result<std::unique_ptr<SmcStack>> made =
            makeStack(settings_.stack, StackHooks{executor_.get(), nullptr});
        if (made) {
            stack_ = std::move(*made);
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

std::shared_ptr<Conn> Shim::find(int fd) const
{
    if (!marked(fd))
        return nullptr;
    MutexLocker lock(stripe(fd));
    return conns_[fd];
}

void Shim::add(int fd, std::shared_ptr<Conn> conn)
{
    MutexLocker lock(stripe(fd));
    conns_[fd] = std::move(conn);
    marked_[fd].store(true, std::memory_order_relaxed);
}

std::shared_ptr<Conn> Shim::remove(int fd)
{
    if (!marked(fd))
        return nullptr;
    MutexLocker lock(stripe(fd));
    marked_[fd].store(announcements_[fd].valid(), std::memory_order_relaxed);
    return std::move(conns_[fd]);
}

void Shim::forget(int fd)
{
    if (announced(fd))
        dropAnnouncement(fd);
    if (std::shared_ptr<Conn> conn = remove(fd)) {
        if (conn->generation != generation()) {
            // The parent's connection: its stack has no threads here. Dropping the number is
            // all a child may do (the parent's connection goes on).
            (void)new std::shared_ptr<Conn>(std::move(conn)); // never destroyed here
        } else if (conn->numbers.fetch_sub(1) == 1) {
            conn->impl->close();
        }
    }
}

void Shim::holdAnnouncement(int fd, UniqueFd announcement)
{
    MutexLocker lock(stripe(fd));
    announcements_[fd] = std::move(announcement);
    marked_[fd].store(true, std::memory_order_relaxed);
}

bool Shim::announced(int fd) const
{
    if (!marked(fd))
        return false;
    MutexLocker lock(stripe(fd));
    return announcements_[fd].valid();
}

void Shim::dropAnnouncement(int fd)
{
    UniqueFd gone;
    {
        MutexLocker lock(stripe(fd));
        gone = std::move(announcements_[fd]);
        marked_[fd].store(conns_[fd] != nullptr, std::memory_order_relaxed);
    }
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

void Shim::beforeFork() noexcept SMC_TSA(no_thread_safety_analysis)
{
    Shim& s = instance();
    s.stackMutex_.lock();
    for (Mutex& m : s.stripes_)
        m.lock();
}

void Shim::afterForkParent() noexcept SMC_TSA(no_thread_safety_analysis)
{
    Shim& s = instance();
    for (Mutex& m : s.stripes_)
        m.unlock();
    s.stackMutex_.unlock();
}

void Shim::afterForkChild() noexcept SMC_TSA(no_thread_safety_analysis)
{
    Shim& s = instance();
    // The parent's stack has no threads here: never used or destroyed in this process.
    (void)s.publisher_.release();
    (void)s.stack_.release();
    (void)s.executor_.release();
    s.stackFailed_ = false;
    s.generation_.fetch_add(1);
    for (Mutex& m : s.stripes_)
        m.unlock();
    s.stackMutex_.unlock();
}

int errnoOf(std::error_code ec) noexcept
{
    const std::error_condition c = ec.default_error_condition();
    return c.category() == std::generic_category() && c.value() != 0 ? c.value() : EIO;
}

} // namespace smc::preload
