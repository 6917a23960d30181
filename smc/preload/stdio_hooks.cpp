// SPDX-License-Identifier: MIT
// stdio on a socket the shim answers for: fdopen(3) gives a stream whose reads, writes and close
// are the shim's (glibc's own streams call the kernel below our hooks).
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <new>
#include <unordered_map>

#include "base/mutex.h"
#include "smc/preload/real.h"
#include "smc/preload/shim.h"

using smc::preload::real;
using smc::preload::Shim;

namespace
{

// The numbers of the streams made here, for fileno(3): a cookie stream has none of its own.
class Streams
{
public:
    static Streams& instance() noexcept
    {
        static Streams* streams = new Streams(); // never destroyed: streams may outlive exit
        return *streams;
    }

    // Out of memory, the stream is not remembered: its fileno() then fails (EBADF), as
    // glibc's does for any cookie stream; nothing throws into the program.
    void add(FILE* f, int fd) noexcept
    {
        smc::MutexLocker lock(mutex_);
        try {
            numbers_[f] = fd;
            any_.store(true, std::memory_order_relaxed);
        } catch (const std::bad_alloc&) {
        }
    }
    // fclose(3): the stream's entry goes before its FILE may be handed out again.
    void drop(int fd)
    {
        smc::MutexLocker lock(mutex_);
        std::erase_if(numbers_, [fd](const auto& entry) { return entry.second == fd; });
    }
    // The number of a stream made here, or -1.
    int numberOf(FILE* f)
    {
        if (!any_.load(std::memory_order_relaxed)) // the common case: one load
            return -1;
        smc::MutexLocker lock(mutex_);
        auto it = numbers_.find(f);
        return it == numbers_.end() ? -1 : it->second;
    }

private:
    Streams() { ::pthread_atfork(lockForFork, unlockAfterFork, unlockAfterFork); }
    // A fork while another thread holds the lock must not leave it held in the child.
    static void lockForFork() noexcept SMC_TSA(no_thread_safety_analysis)
    {
        instance().mutex_.lock();
    }
    static void unlockAfterFork() noexcept SMC_TSA(no_thread_safety_analysis)
    {
        instance().mutex_.unlock();
    }

    smc::Mutex mutex_;
    std::unordered_map<FILE*, int> numbers_ SMC_GUARDED_BY(mutex_);
    std::atomic<bool> any_{false};
};

int numberOf(void* cookie) noexcept
{
    return static_cast<int>(reinterpret_cast<std::intptr_t>(cookie));
}

ssize_t streamRead(void* cookie, char* buf, size_t size)
{
    return ::read(numberOf(cookie), buf, size); // ours (exported), not libc's
}

// stdio counts a short write as an error: everything goes, as a blocking socket's send takes it.
ssize_t streamWrite(void* cookie, const char* buf, size_t size)
{
    size_t done = 0;
    while (done < size) {
        const ssize_t n = ::write(numberOf(cookie), buf + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(done);
}

int streamClose(void* cookie)
{
    Streams::instance().drop(numberOf(cookie));
    return ::close(numberOf(cookie));
}

} // namespace

extern "C" {

FILE* fdopen(int fd, const char* mode)
{
    if (!Shim::instance().mayRedirect(fd))
        return real().fdopen(fd, mode);
    if (real().fcntl(fd, F_GETFL) < 0)
        return nullptr; // EBADF, as glibc's fdopen says
    const cookie_io_functions_t io{streamRead, streamWrite, nullptr, streamClose};
    FILE* f = ::fopencookie(reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)), mode, io);
    if (f != nullptr)
        Streams::instance().add(f, fd);
    return f;
}

int fileno(FILE* f)
{
    const int fd = Streams::instance().numberOf(f);
    return fd >= 0 ? fd : real().fileno(f);
}

int fileno_unlocked(FILE* f)
{
    return fileno(f);
}

} // extern "C"
