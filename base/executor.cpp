// SPDX-License-Identifier: MIT
// Executor: short-task threads with timers, an elastic blocking pool, an epoll thread.
#include "base/executor.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>

#include "base/quiet_thread.h"

namespace smc
{

struct Executor::Watch {
    std::function<void()> onReadable;
    int fd = -1;
    // Under watchMutex_.
    bool running = false;
    std::thread::id runner;
    bool removing = false; // an unwatch makes the DEL
    bool removed = false;  // it did, and the id is gone
};

Executor::Executor(Config config) : config_(config)
{
    threads_.reserve(config_.threads);
    for (unsigned i = 0; i < config_.threads; ++i)
        threads_.push_back(quietThread([this] { shortLoop(); }));
}

Executor::~Executor()
{
    {
        MutexLocker lock(mutex_);
        stop_ = true;
        tasks_.clear();
        timers_.clear();
        blocking_.clear();
    }
    wake_.notify_all();
    blockingWake_.notify_all();
    for (std::thread& t : threads_)
        t.join();
    {
        MutexLocker lock(mutex_);
        blockingGone_.wait(lock, [this]() SMC_REQUIRES(mutex_) { return blockingThreads_ == 0; });
    }
    if (epoll_.joinable()) {
        stopEpoll_.signal();
        epoll_.join();
    }
    if (epollFd_ >= 0)
        ::close(epollFd_);
}

Executor& Executor::shared()
{
    static Executor* executor = new Executor(Config{});
    return *executor;
}

void Executor::post(Task task)
{
    {
        MutexLocker lock(mutex_);
        if (stop_)
            return;
        tasks_.push_back(std::move(task));
    }
    wake_.notify_one();
}

Executor::TimerId Executor::postAfter(std::chrono::nanoseconds delay, Task task)
{
    TimerId id;
    bool first = false;
    {
        MutexLocker lock(mutex_);
        if (stop_)
            return {};
        id = {Clock::now() + delay, nextTimer_++};
        const auto at = timers_.emplace(std::pair(id.due, id.seq), std::move(task)).first;
        // begin() after the insertion. A thread that sleeps until this deadline or before
        // it runs it in time (a timer behind another, or a timeout posted after one that
        // was cancelled): nobody is woken.
        first = at == timers_.begin() && !(sleepsUntil_ && *sleepsUntil_ <= id.due);
    }
    // Every thread learns the deadline: one woken for a task meanwhile leaves it to the others.
    if (first)
        wake_.notify_all();
    return id;
}

bool Executor::cancel(TimerId id)
{
    Task dropped; // its captures go after the lock: they may post again
    MutexLocker lock(mutex_);
    auto it = timers_.find(std::pair(id.due, id.seq));
    if (it == timers_.end())
        return false;
    dropped = std::move(it->second);
    timers_.erase(it);
    lock.unlock();
    return true;
}

std::size_t Executor::pendingTimers() const
{
    MutexLocker lock(mutex_);
    return timers_.size();
}

void Executor::shortLoop()
{
    MutexLocker lock(mutex_);
    while (!stop_) {
        const Clock::time_point now = Clock::now();
        while (!timers_.empty() && timers_.begin()->first.first <= now) {
            tasks_.push_back(std::move(timers_.begin()->second));
            timers_.erase(timers_.begin());
        }
        if (!tasks_.empty()) {
            Task task = std::move(tasks_.front());
            tasks_.pop_front();
            lock.unlock();
            task();
            task = nullptr; // its captures go before the lock is taken again
            lock.lock();
        } else if (!timers_.empty()) {
            const Clock::time_point until = timers_.begin()->first.first;
            const bool recorded = !sleepsUntil_ || until < *sleepsUntil_;
            if (recorded)
                sleepsUntil_ = until;
            (void)wake_.waitUntil(lock, until);
            if (recorded && sleepsUntil_ == until)
                sleepsUntil_.reset();
        } else {
            wake_.wait(lock);
        }
    }
}

void Executor::postBlocking(Task task)
{
    MutexLocker lock(mutex_);
    if (stop_)
        return;
    blocking_.push_back(std::move(task));
    if (blockingIdle_ >= blocking_.size() || blockingThreads_ >= config_.maxBlocking) {
        blockingWake_.notify_one();
        return;
    }
    ++blockingThreads_;
    quietThread([this] { blockingLoop(); }).detach();
}

void Executor::blockingLoop()
{
    MutexLocker lock(mutex_);
    while (!stop_) {
        if (blocking_.empty()) {
            ++blockingIdle_;
            const bool timedOut =
                !blockingWake_.waitFor(lock, config_.blockingIdle, [this]() SMC_REQUIRES(mutex_) {
                    return stop_ || !blocking_.empty();
                });
            --blockingIdle_;
            if (timedOut)
                break;
            continue;
        }
        Task task = std::move(blocking_.front());
        blocking_.pop_front();
        lock.unlock();
        task();
        task = nullptr;
        lock.lock();
    }
    // The last touch of *this: the destructor may run as soon as we unlock.
    --blockingThreads_;
    blockingGone_.notify_all();
}

// The epoll_ctl calls are made outside watchMutex_, which the epoll thread takes for every
// event: a caller in a system call under it would make that thread sleep on it.
int Executor::watch(int fd, std::function<void()> onReadable)
{
    auto w = std::make_shared<Watch>();
    w->onReadable = std::move(onReadable);
    w->fd = fd;
    int id = -1;
    {
        MutexLocker lock(watchMutex_);
        if (!epoll_.joinable()) { // the first watch starts the epoll thread (a failed try, again)
            if (epollFd_ < 0)
                epollFd_ = ::epoll_create1(EPOLL_CLOEXEC);
            if (!stopEpoll_)
                if (Result<EventFd> e = EventFd::create())
                    stopEpoll_ = std::move(*e);
            if (epollFd_ < 0 || !stopEpoll_)
                return -1;
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.u64 = ~std::uint64_t{0};
            if (::epoll_ctl(epollFd_, EPOLL_CTL_ADD, stopEpoll_.fd(), &ev) != 0 && errno != EEXIST)
                return -1;
            epoll_ = quietThread([this] { epollLoop(); });
        }
        id = nextWatch_++;
        watches_.emplace(id, w); // before its first event can come
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<std::uint64_t>(id);
    if (::epoll_ctl(epollFd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        const int saved = errno;
        MutexLocker lock(watchMutex_);
        watches_.erase(id);
        errno = saved;
        return -1;
    }
    return id;
}

void Executor::unwatch(int id)
{
    MutexLocker lock(watchMutex_);
    auto it = watches_.find(id);
    if (it == watches_.end())
        return;
    std::shared_ptr<Watch> w = it->second;
    if (!w->removing) {
        // One caller makes the DEL; the id goes only after it, so that any unwatch of it
        // returns (and its caller may close the fd) only once no registration of the fd is
        // left: a DEL after that would end the registration of whatever took the number.
        w->removing = true;
        lock.unlock();
        (void)::epoll_ctl(epollFd_, EPOLL_CTL_DEL, w->fd, nullptr);
        lock.lock();
        watches_.erase(id);
        w->removed = true;
        watchDone_.notify_all();
    }
    const bool self = w->runner == std::this_thread::get_id();
    watchDone_.wait(
        lock, [&]() SMC_REQUIRES(watchMutex_) { return w->removed && (self || !w->running); });
}

void Executor::epollLoop()
{
    epoll_event events[16];
    for (;;) {
        const int n = ::epoll_wait(epollFd_, events, 16, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return;
        for (int i = 0; i < n; ++i) {
            if (events[i].data.u64 == ~std::uint64_t{0}) {
                MutexLocker lock(mutex_);
                if (stop_)
                    return;
                continue;
            }
            std::shared_ptr<Watch> w;
            {
                MutexLocker lock(watchMutex_);
                auto it = watches_.find(static_cast<int>(events[i].data.u64));
                if (it == watches_.end())
                    continue; // unwatched after epoll_wait returned
                w = it->second;
                w->running = true;
                w->runner = std::this_thread::get_id();
            }
            w->onReadable();
            {
                MutexLocker lock(watchMutex_);
                w->running = false;
                w->runner = {};
            }
            watchDone_.notify_all();
        }
    }
}

unsigned Executor::threadCount() const
{
    MutexLocker lock(mutex_);
    return static_cast<unsigned>(threads_.size()) + blockingThreads_ + (epoll_.joinable() ? 1 : 0);
}

// --- SerialQueue ---------------------------------------------------------------

struct SerialQueue::State {
    Executor& executor;
    Kind kind;
    Mutex mutex;
    ConditionVariable idle;
    std::deque<Task> tasks SMC_GUARDED_BY(mutex);
    bool scheduled SMC_GUARDED_BY(mutex) = false; // a drain is posted or running
    bool closed SMC_GUARDED_BY(mutex) = false;
    std::thread::id runner SMC_GUARDED_BY(mutex);
    // The executor timers of postAfter() not due yet, by a key of ours.
    std::map<std::uint64_t, Executor::TimerId> timers SMC_GUARDED_BY(mutex);
    std::uint64_t nextTimer SMC_GUARDED_BY(mutex) = 0;
    State(Executor& e, Kind k) : executor(e), kind(k) {}
};

SerialQueue::SerialQueue(Executor& executor, Kind kind)
    : state_(std::make_shared<State>(executor, kind))
{
}

SerialQueue::~SerialQueue()
{
    close();
}

void SerialQueue::post(Task task)
{
    enqueue(state_, std::move(task));
}

void SerialQueue::enqueue(const std::shared_ptr<State>& state, Task task)
{
    State& s = *state;
    {
        MutexLocker lock(s.mutex);
        if (s.closed)
            return;
        s.tasks.push_back(std::move(task));
        if (s.scheduled)
            return;
        s.scheduled = true;
    }
    auto run = [state] { drain(state); };
    if (s.kind == Kind::Blocking)
        s.executor.postBlocking(std::move(run));
    else
        s.executor.post(std::move(run));
}

void SerialQueue::postAfter(std::chrono::nanoseconds delay, Task task)
{
    State& s = *state_;
    // Held while the timer is made: one that fires at once finds its key.
    MutexLocker lock(s.mutex);
    if (s.closed)
        return;
    const std::uint64_t key = s.nextTimer++;
    // The queue's state, not the queue: close() may race with the timer.
    std::weak_ptr<State> weak = state_;
    const Executor::TimerId id =
        s.executor.postAfter(delay, [weak, key, task = std::move(task)]() mutable {
            std::shared_ptr<State> state = weak.lock();
            if (!state)
                return;
            {
                MutexLocker l(state->mutex);
                state->timers.erase(key);
            }
            enqueue(state, std::move(task));
        });
    s.timers.emplace(key, id);
}

void SerialQueue::drain(const std::shared_ptr<State>& state)
{
    State& s = *state;
    // A bounded batch, then the thread goes back to the executor: one busy
    // queue does not hold a short-task thread for ever.
    for (int batch = 0; batch < 64; ++batch) {
        Task task;
        {
            MutexLocker lock(s.mutex);
            if (s.closed || s.tasks.empty()) {
                s.scheduled = false;
                s.idle.notify_all();
                return;
            }
            task = std::move(s.tasks.front());
            s.tasks.pop_front();
            s.runner = std::this_thread::get_id();
        }
        task();
        task = nullptr;
        MutexLocker lock(s.mutex);
        s.runner = {};
    }
    auto run = [state] { drain(state); };
    if (s.kind == Kind::Blocking)
        s.executor.postBlocking(std::move(run));
    else
        s.executor.post(std::move(run));
}

void SerialQueue::close()
{
    if (!state_)
        return;
    State& s = *state_;
    std::deque<Task> dropped;
    std::map<std::uint64_t, Executor::TimerId> timers;
    MutexLocker lock(s.mutex);
    s.closed = true;
    dropped.swap(s.tasks);
    timers.swap(s.timers);
    if (s.runner != std::this_thread::get_id())
        s.idle.wait(lock, [&]() SMC_REQUIRES(s.mutex) { return !s.scheduled; });
    // `dropped` goes after the lock: a task's captures may post again. So
    // do the timers' tasks; one firing meanwhile finds the queue closed.
    lock.unlock();
    for (const auto& [key, id] : timers)
        (void)s.executor.cancel(id);
}

bool SerialQueue::inQueue() const
{
    MutexLocker lock(state_->mutex);
    return state_->runner == std::this_thread::get_id();
}

// --- PeriodicTimer ---------------------------------------------------------------

PeriodicTimer::PeriodicTimer(Executor& executor, std::chrono::milliseconds period, Task tick)
    : period_(period), queue_(executor), tick_(std::make_shared<Task>(std::move(tick)))
{
    arm();
}

PeriodicTimer::~PeriodicTimer()
{
    stop();
}

void PeriodicTimer::arm()
{
    queue_.postAfter(period_, [this] {
        (*tick_)();
        arm();
    });
}

void PeriodicTimer::stop()
{
    queue_.close();
}

} // namespace smc
