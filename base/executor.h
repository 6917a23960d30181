// SPDX-License-Identifier: MIT
// Executor: the few threads every link group, channel and link of a process shares.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/event_fd.h"
#include "base/mutex.h"

namespace smc
{

using Task = std::function<void()>;
using Clock = std::chrono::steady_clock;

// Two kinds of threads, so that work that waits can never starve work that
// it waits for:
//  - a fixed set of short-task threads (deliveries, timers, completions):
//    their tasks never wait for a peer;
//  - blocking threads for LLC flows, which wait for a peer's answer for up
//    to seconds. They start when work arrives and none is idle, up to a cap,
//    and end after a while without work (a workqueue, as Linux runs LLC
//    flows on one): in one process both ends of a link group may be
//    waiting for each other, and a fixed set would deadlock until timeouts.
// An epoll thread starts with the first watched fd (RDMA completion
// channels): one thread for every link of the process.
class Executor
{
public:
    struct Config {
        unsigned threads = 2;                         // short-task threads
        unsigned maxBlocking = 256;                   // blocking threads at most
        std::chrono::milliseconds blockingIdle{1000}; // an idle blocking thread ends
    };

    explicit Executor(Config config);
    // Waits for running tasks; tasks not started are dropped.
    ~Executor();
    Executor(const Executor&) = delete;
    Executor& operator=(const Executor&) = delete;

    // The process's executor, made on first use with the default Config and
    // never destroyed (objects anywhere may still use it at exit).
    static Executor& shared();

    // Never blocks; the task runs on a short-task thread.
    void post(Task task);
    // A timer postAfter() made, for cancel(); a default one names none.
    struct TimerId {
        Clock::time_point due;
        std::uint64_t seq = 0;
    };
    // Never blocks; runs the task on a short-task thread once `delay` passed.
    TimerId postAfter(std::chrono::nanoseconds delay, Task task);
    // Drops the timer's task (and its captures, not under a lock of ours):
    // false if it ran, runs already or was cancelled before. Never blocks.
    bool cancel(TimerId id);
    // Timers neither run nor cancelled (observability: a destroyed object's
    // timers must not linger here until they are due).
    std::size_t pendingTimers() const;
    // Never blocks; the task runs on a blocking thread and may wait.
    void postBlocking(Task task);

    // Call `onReadable` on the epoll thread whenever `fd` is readable
    // (level-triggered). It must not block. Returns a watch id, or -1 with
    // errno set when epoll refused the fd.
    int watch(int fd, std::function<void()> onReadable);
    // After this returns the callback does not run any more (it waits for a
    // running one, unless called from it).
    void unwatch(int id);

    unsigned threadCount() const;

private:
    struct Watch;
    void shortLoop();
    void blockingLoop();
    void epollLoop();

    const Config config_;
    mutable Mutex mutex_;
    ConditionVariable wake_;
    bool stop_ SMC_GUARDED_BY(mutex_) = false;
    std::deque<Task> tasks_ SMC_GUARDED_BY(mutex_);
    // By due time, then in posting order.
    std::map<std::pair<Clock::time_point, std::uint64_t>, Task> timers_ SMC_GUARDED_BY(mutex_);
    // The deadline a short-task thread sleeps until, if one does (the earliest recorded): a
    // timer due after it needs nobody woken. A cancelled timer's deadline may stay: that
    // thread then wakes once for nothing, instead of every new timeout waking one.
    std::optional<Clock::time_point> sleepsUntil_ SMC_GUARDED_BY(mutex_);
    std::uint64_t nextTimer_ SMC_GUARDED_BY(mutex_) = 1; // 0: TimerId{} names none
    std::vector<std::thread> threads_;

    ConditionVariable blockingWake_;
    std::deque<Task> blocking_ SMC_GUARDED_BY(mutex_);
    unsigned blockingThreads_ SMC_GUARDED_BY(mutex_) = 0;
    unsigned blockingIdle_ SMC_GUARDED_BY(mutex_) = 0;
    ConditionVariable blockingGone_;

    Mutex watchMutex_;
    ConditionVariable watchDone_;
    int epollFd_ = -1;
    EventFd stopEpoll_; // ends the epoll thread
    std::thread epoll_;
    std::unordered_map<int, std::shared_ptr<Watch>> watches_ SMC_GUARDED_BY(watchMutex_);
    int nextWatch_ SMC_GUARDED_BY(watchMutex_) = 0;
};

// Tasks posted here run one at a time and in order, on the executor's
// short-task or blocking threads: a channel's deliveries, a link group's LLC
// events. Cheap: no thread of its own.
class SerialQueue
{
public:
    enum class Kind : std::uint8_t { Short, Blocking };
    explicit SerialQueue(Executor& executor, Kind kind = Kind::Short);
    // close().
    ~SerialQueue();
    SerialQueue(const SerialQueue&) = delete;
    SerialQueue& operator=(const SerialQueue&) = delete;

    // Never blocks. After close() a task is dropped.
    void post(Task task);
    // The task joins the queue once `delay` passed; the executor's timer
    // goes when the queue closes (it does not wait there until it is due).
    void postAfter(std::chrono::nanoseconds delay, Task task);
    // No task runs after this returns: pending ones are dropped (timers
    // included: cancelled) and a running one is waited for, unless close()
    // is called from it.
    void close();
    // True on a thread that runs one of this queue's tasks right now.
    bool inQueue() const;

private:
    struct State;
    static void enqueue(const std::shared_ptr<State>& state, Task task);
    static void drain(const std::shared_ptr<State>& state);
    std::shared_ptr<State> state_;
};

// A periodic callback on the executor's short-task threads; it must not block.
class PeriodicTimer
{
public:
    PeriodicTimer(Executor& executor, std::chrono::milliseconds period, Task tick);
    // stop().
    ~PeriodicTimer();
    PeriodicTimer(const PeriodicTimer&) = delete;
    PeriodicTimer& operator=(const PeriodicTimer&) = delete;
    // No tick runs after this returns (a running one is waited for, unless
    // stop() is called from it).
    void stop();

private:
    void arm();
    std::chrono::milliseconds period_;
    SerialQueue queue_;
    std::shared_ptr<Task> tick_;
};

} // namespace smc
