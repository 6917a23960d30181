// SPDX-License-Identifier: MIT
// Mutex, SharedMutex, their lockers, ConditionVariable: std primitives with clang thread-safety
// annotations.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

// clang's -Wthread-safety checks these; other compilers ignore them.
#if defined(__clang__)
#define SMC_TSA(x) __attribute__((x))
#else
#define SMC_TSA(x)
#endif
#define SMC_CAPABILITY(name) SMC_TSA(capability(name))
#define SMC_SCOPED_CAPABILITY SMC_TSA(scoped_lockable)
#define SMC_GUARDED_BY(m) SMC_TSA(guarded_by(m))
#define SMC_REQUIRES(...) SMC_TSA(requires_capability(__VA_ARGS__))
#define SMC_ACQUIRE(...) SMC_TSA(acquire_capability(__VA_ARGS__))
#define SMC_RELEASE(...) SMC_TSA(release_capability(__VA_ARGS__))
#define SMC_ACQUIRE_SHARED(...) SMC_TSA(acquire_shared_capability(__VA_ARGS__))
#define SMC_RELEASE_SHARED(...) SMC_TSA(release_shared_capability(__VA_ARGS__))
#define SMC_REQUIRES_SHARED(...) SMC_TSA(requires_shared_capability(__VA_ARGS__))
// An accessor that returns the mutex `m`: locking what it returns is locking `m`.
#define SMC_RETURN_CAPABILITY(m) SMC_TSA(lock_returned(m))

namespace smc
{

class SMC_CAPABILITY("mutex") Mutex
{
public:
    void lock() SMC_ACQUIRE() { mutex_.lock(); }
    void unlock() SMC_RELEASE() { mutex_.unlock(); }
    bool tryLock() SMC_TSA(try_acquire_capability(true)) { return mutex_.try_lock(); }

private:
    friend class MutexLocker;
    std::mutex mutex_;
};

// A scoped lock that can be released and taken again (for waits and for
// calls that must not run under the lock).
class SMC_SCOPED_CAPABILITY MutexLocker
{
public:
    explicit MutexLocker(Mutex& mutex) SMC_ACQUIRE(mutex) : lock_(mutex.mutex_) {}
    ~MutexLocker() SMC_RELEASE() = default;
    MutexLocker(const MutexLocker&) = delete;
    MutexLocker& operator=(const MutexLocker&) = delete;

    void lock() SMC_ACQUIRE() { lock_.lock(); }
    void unlock() SMC_RELEASE() { lock_.unlock(); }

private:
    friend class ConditionVariable;
    std::unique_lock<std::mutex> lock_;
};

// A reader/writer lock: many shared holders or one exclusive one.
class SMC_CAPABILITY("mutex") SharedMutex
{
public:
    void lock() SMC_ACQUIRE() { mutex_.lock(); }
    void unlock() SMC_RELEASE() { mutex_.unlock(); }
    void lockShared() SMC_ACQUIRE_SHARED() { mutex_.lock_shared(); }
    void unlockShared() SMC_RELEASE_SHARED() { mutex_.unlock_shared(); }

private:
    std::shared_mutex mutex_;
};

class SMC_SCOPED_CAPABILITY WriteLocker
{
public:
    explicit WriteLocker(SharedMutex& mutex) SMC_ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
    ~WriteLocker() SMC_RELEASE() { mutex_.unlock(); }
    WriteLocker(const WriteLocker&) = delete;
    WriteLocker& operator=(const WriteLocker&) = delete;

private:
    SharedMutex& mutex_;
};

class SMC_SCOPED_CAPABILITY ReadLocker
{
public:
    explicit ReadLocker(SharedMutex& mutex) SMC_ACQUIRE_SHARED(mutex) : mutex_(mutex)
    {
        mutex_.lockShared();
    }
    ~ReadLocker() SMC_RELEASE() { mutex_.unlockShared(); }
    ReadLocker(const ReadLocker&) = delete;
    ReadLocker& operator=(const ReadLocker&) = delete;

private:
    SharedMutex& mutex_;
};

class ConditionVariable
{
public:
    void notify_one() noexcept { cv_.notify_one(); }
    void notify_all() noexcept { cv_.notify_all(); }

    void wait(MutexLocker& locker) { cv_.wait(locker.lock_); }
    template <typename Predicate> void wait(MutexLocker& locker, Predicate pred)
    {
        cv_.wait(locker.lock_, std::move(pred));
    }
    template <typename Rep, typename Period>
    std::cv_status waitFor(MutexLocker& locker, std::chrono::duration<Rep, Period> d)
    {
        return cv_.wait_for(locker.lock_, d);
    }
    // False: timed out with `pred` still false.
    template <typename Rep, typename Period, typename Predicate>
    bool waitFor(MutexLocker& locker, std::chrono::duration<Rep, Period> d, Predicate pred)
    {
        return cv_.wait_for(locker.lock_, d, std::move(pred));
    }
    template <typename Clock, typename Duration>
    std::cv_status waitUntil(MutexLocker& locker, std::chrono::time_point<Clock, Duration> t)
    {
        return cv_.wait_until(locker.lock_, t);
    }

private:
    std::condition_variable cv_;
};

} // namespace smc
