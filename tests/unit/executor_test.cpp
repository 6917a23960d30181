// SPDX-License-Identifier: MIT
// Executor, SerialQueue, PeriodicTimer, DelayedBatch: order, exclusion, close and stop, the
// blocking pool, fds.
#include "base/executor.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <latch>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/delayed_batch.h"
#include "base/unique_fd.h"
#include "tests/libtest/liveness.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;

using test::eventually;

TEST(SerialQueue, RunsTasksInOrderAndOneAtATime)
{
    Executor executor({4, 8, 1000ms});
    SerialQueue queue(executor);
    std::atomic<int> running{0}, maxRunning{0};
    std::vector<int> order; // only the queue's tasks touch it, one at a time
    std::atomic<int> done{0};
    constexpr int kPerThread = 500;
    std::vector<std::thread> posters;
    for (int t = 0; t < 4; ++t)
        posters.emplace_back([&, t] {
            for (int i = 0; i < kPerThread; ++i)
                queue.post([&, t, i] {
                    const int now = ++running;
                    int seen = maxRunning.load();
                    while (now > seen && !maxRunning.compare_exchange_weak(seen, now)) {
                    }
                    order.push_back(t * kPerThread + i);
                    --running;
                    ++done;
                });
        });
    for (std::thread& p : posters)
        p.join();
    ASSERT_TRUE(eventually([&] { return done == 4 * kPerThread; }));
    EXPECT_EQ(maxRunning.load(), 1);
    // Each poster's tasks keep the order it posted them in.
    std::vector<int> last(4, -1);
    for (int v : order) {
        EXPECT_GT(v % kPerThread, last[v / kPerThread]);
        last[v / kPerThread] = v % kPerThread;
    }
}

TEST(SerialQueue, CloseWaitsForTheRunningTaskAndDropsTheRest)
{
    Executor executor({2, 8, 1000ms});
    SerialQueue queue(executor);
    std::promise<void> started;
    std::atomic<bool> finished{false}, secondRan{false};
    queue.post([&] {
        started.set_value();
        std::this_thread::sleep_for(50ms);
        finished = true;
    });
    queue.post([&] { secondRan = true; });
    started.get_future().wait();
    queue.close();
    EXPECT_TRUE(finished) << "close() returned while a task ran";
    queue.post([&] { secondRan = true; });
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(secondRan) << "a task ran after close()";
}

TEST(SerialQueue, CloseFromItsOwnTaskDoesNotWaitForItself)
{
    Executor executor({1, 8, 1000ms});
    auto queue = std::make_unique<SerialQueue>(executor);
    std::promise<bool> inside;
    queue->post([&] {
        const bool in = queue->inQueue();
        queue->close();
        inside.set_value(in);
    });
    auto f = inside.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "close() from its own task hung";
    EXPECT_TRUE(f.get());
    EXPECT_FALSE(queue->inQueue());
}

TEST(SerialQueue, PostAfterRunsNoSoonerThanAskedAndNotAfterClose)
{
    Executor executor({2, 8, 1000ms});
    SerialQueue queue(executor);
    const auto posted = Clock::now();
    std::promise<Clock::time_point> ran;
    queue.postAfter(30ms, [&] { ran.set_value(Clock::now()); });
    auto f = ran.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_GE(f.get() - posted, 30ms);

    std::atomic<bool> late{false};
    {
        SerialQueue gone(executor);
        gone.postAfter(20ms, [&] { late = true; });
    } // the timer outlives the queue: it must find it gone
    std::this_thread::sleep_for(60ms);
    EXPECT_FALSE(late);
}

// A queue's timers go with the queue, not when they are due: the executor
// holds neither their tasks nor what those captured.
TEST(SerialQueue, CloseCancelsItsTimers)
{
    Executor executor({2, 8, 1000ms});
    const std::size_t before = executor.pendingTimers();
    auto captured = std::make_shared<int>(0);
    std::weak_ptr<int> watch = captured;
    {
        SerialQueue queue(executor);
        queue.postAfter(1h, [captured] { ++*captured; });
        queue.postAfter(1h, [captured] { ++*captured; });
        captured.reset();
        EXPECT_EQ(executor.pendingTimers(), before + 2);
        EXPECT_FALSE(watch.expired());
    }
    EXPECT_EQ(executor.pendingTimers(), before) << "timers of a closed queue linger";
    EXPECT_TRUE(watch.expired()) << "a closed queue's timer task is still held";

    // One that fired is no longer the queue's to cancel; posting after close
    // makes none.
    SerialQueue queue(executor);
    std::promise<void> ran;
    queue.postAfter(1ms, [&] { ran.set_value(); });
    ASSERT_EQ(ran.get_future().wait_for(5s), std::future_status::ready);
    queue.close();
    queue.postAfter(1h, [] {});
    EXPECT_EQ(executor.pendingTimers(), before);
}

TEST(Executor, CancelDropsATimerOnce)
{
    Executor executor({1, 8, 1000ms});
    std::atomic<int> ran{0};
    const Executor::TimerId id = executor.postAfter(1h, [&] { ++ran; });
    EXPECT_EQ(executor.pendingTimers(), 1u);
    EXPECT_TRUE(executor.cancel(id));
    EXPECT_FALSE(executor.cancel(id)) << "cancelled twice";
    EXPECT_FALSE(executor.cancel(Executor::TimerId{})) << "names no timer";
    EXPECT_EQ(executor.pendingTimers(), 0u);
    std::promise<void> fired;
    const Executor::TimerId soon = executor.postAfter(1ms, [&] { fired.set_value(); });
    ASSERT_EQ(fired.get_future().wait_for(5s), std::future_status::ready);
    EXPECT_FALSE(executor.cancel(soon)) << "it ran";
    EXPECT_EQ(ran.load(), 0);
}

// postAfter wakes the threads only for a timer due before every other one: each case below
// is a timer that threads asleep (for nothing, or until a later timer) must wake for.
TEST(Executor, ATimerRunsWhateverItsThreadsSleepFor)
{
    Executor executor({2, 8, 1000ms});
    auto runs = [&](std::chrono::milliseconds delay) {
        std::this_thread::sleep_for(20ms); // both threads asleep by now
        std::promise<void> fired;
        executor.postAfter(delay, [&] { fired.set_value(); });
        return fired.get_future().wait_for(5s) == std::future_status::ready;
    };
    EXPECT_TRUE(runs(1ms)) << "threads that had nothing to wait for";
    const Executor::TimerId far = executor.postAfter(1h, [] {});
    EXPECT_TRUE(runs(1ms)) << "threads asleep until a later timer";
    std::promise<void> behind;
    executor.postAfter(60ms, [&] { behind.set_value(); });
    EXPECT_TRUE(runs(10ms)) << "threads asleep until a later timer again";
    EXPECT_EQ(behind.get_future().wait_for(5s), std::future_status::ready)
        << "a timer posted behind an earlier one";
    EXPECT_TRUE(executor.cancel(far));
}

// A timeout posted after a cancelled one (one per connection) wakes no thread: the thread
// asleep until the cancelled deadline runs it. It still runs, and not early; and one posted
// before that deadline still wakes a thread.
TEST(Executor, ATimerAfterACancelledOneRunsOnTime)
{
    Executor executor({2, 8, 1000ms});
    auto firesAfter = [&](std::chrono::milliseconds delay) {
        auto fired = std::make_shared<std::promise<void>>(); // the timer's, should it be late
        const auto posted = std::chrono::steady_clock::now();
        executor.postAfter(delay, [fired] { fired->set_value(); });
        if (fired->get_future().wait_for(5s) != std::future_status::ready)
            return false;
        return std::chrono::steady_clock::now() - posted >= delay;
    };
    std::this_thread::sleep_for(20ms); // both threads asleep, for good
    EXPECT_TRUE(executor.cancel(executor.postAfter(50ms, [] {})));
    EXPECT_TRUE(firesAfter(80ms)) << "behind the cancelled deadline";
    EXPECT_TRUE(executor.cancel(executor.postAfter(1h, [] {})));
    EXPECT_TRUE(firesAfter(10ms)) << "before the cancelled deadline";
}

TEST(PeriodicTimer, TicksUntilStopped)
{
    Executor executor({2, 8, 1000ms});
    std::atomic<int> ticks{0};
    PeriodicTimer timer(executor, 2ms, [&] { ++ticks; });
    ASSERT_TRUE(eventually([&] { return ticks >= 5; }));
    timer.stop();
    const int stopped = ticks;
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(ticks.load(), stopped) << "a tick after stop()";
}

// Each task waits at least the delay (a task posted just before a tick waits for the next),
// and an idle batch keeps no timer.
TEST(DelayedBatch, RunsEachTaskAfterTheDelayTogetherWithItsNeighbours)
{
    Executor executor({2, 8, 1000ms});
    DelayedBatch batch(executor, 20ms);
    constexpr int kTasks = 1000;
    std::vector<Clock::time_point> posted(kTasks), ran(kTasks);
    std::atomic<int> done{0};
    for (int i = 0; i < kTasks; ++i) {
        posted[i] = Clock::now();
        batch.post([&, i] {
            ran[i] = Clock::now();
            ++done;
        });
        if (i % 100 == 99)
            std::this_thread::sleep_for(3ms); // posts across several ticks
    }
    ASSERT_TRUE(eventually([&] { return done == kTasks; }));
    for (int i = 0; i < kTasks; ++i)
        ASSERT_GE(ran[i] - posted[i], 20ms) << "task " << i << " ran early";
    EXPECT_EQ(executor.pendingTimers(), 0u) << "an idle batch keeps a timer";
}

TEST(DelayedBatch, CloseDropsWhatWaitsAndLaterPosts)
{
    Executor executor({2, 8, 1000ms});
    std::atomic<int> ran{0};
    {
        DelayedBatch batch(executor, 10ms);
        batch.post([&] { ++ran; });
        batch.close();
        batch.post([&] { ++ran; });
        std::this_thread::sleep_for(40ms);
    }
    EXPECT_EQ(ran.load(), 0);
    EXPECT_EQ(executor.pendingTimers(), 0u) << "close() left its timer";
}

// Two blocking tasks that wait for each other finish only if the pool gives
// each its own thread: a link group's two ends in one process do that.
TEST(Executor, BlockingTasksThatWaitForEachOtherBothRunAndThreadsRetire)
{
    Executor executor({1, 8, 50ms});
    const unsigned fixed = executor.threadCount();
    std::latch both(2);
    std::atomic<int> done{0};
    for (int i = 0; i < 2; ++i)
        executor.postBlocking([&] {
            both.arrive_and_wait();
            ++done;
        });
    ASSERT_TRUE(eventually([&] { return done == 2; })) << "blocking tasks deadlocked";
    EXPECT_TRUE(eventually([&] { return executor.threadCount() == fixed; }))
        << "idle blocking threads did not end: " << executor.threadCount();
}

TEST(Executor, PendingTasksAreDroppedAtDestruction)
{
    std::atomic<int> ran{0};
    {
        Executor executor({1, 8, 1000ms});
        std::promise<void> release;
        std::shared_future<void> gate = release.get_future().share();
        executor.post([gate] { gate.wait(); });
        for (int i = 0; i < 10; ++i)
            executor.post([&] { ++ran; });
        executor.postAfter(1h, [&] { ++ran; });
        release.set_value(); // the destructor races the queued tasks: some may run
    }
    EXPECT_LE(ran.load(), 10) << "the timer an hour away ran";
}

TEST(Executor, WatchCallsBackWhileReadableAndNeverAfterUnwatch)
{
    Executor executor({1, 8, 1000ms});
    UniqueFd fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    ASSERT_TRUE(fd);
    std::atomic<int> calls{0};
    const int id = executor.watch(fd.get(), [&] {
        std::uint64_t v;
        (void)!::read(fd.get(), &v, sizeof v); // consume: level-triggered
        ++calls;
    });
    ASSERT_GE(id, 0);
    const std::uint64_t one = 1;
    ASSERT_EQ(::write(fd.get(), &one, sizeof one), 8);
    ASSERT_TRUE(eventually([&] { return calls == 1; }));
    executor.unwatch(id);
    ASSERT_EQ(::write(fd.get(), &one, sizeof one), 8);
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(calls.load(), 1);
    EXPECT_EQ(executor.watch(-1, [] {}), -1) << "epoll takes no bad fd";
}

// Two unwatches of one id at once (a callback ending its own watch while its owner ends it too)
// both return, and the owner's caller may close the fd at once and give the number to a new
// watch: the removal is over by then, so it does not end the new registration. (The window it
// guards is a few instructions wide: this runs the paths, for TSan too, more than it hits it.)
TEST(Executor, TwoUnwatchesOfOneIdBothReturnAndItsNumberWatchesAgain)
{
    Executor executor({1, 8, 1000ms});
    for (int round = 0; round < 200; ++round) {
        UniqueFd fd(::eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC)); // readable throughout
        ASSERT_TRUE(fd);
        std::atomic<bool> go{false};
        std::atomic<int> id{-1};
        id = executor.watch(fd.get(), [&] {
            if (go)
                executor.unwatch(id.load());
        });
        ASSERT_GE(id.load(), 0);
        std::atomic<int> calls{0};
        int next = -1;
        UniqueFd reused;
        std::thread owner([&] {
            while (!go) {
            }
            executor.unwatch(id.load());
            fd.reset();
            reused = UniqueFd(::eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC)); // likely the number
            next = executor.watch(reused.get(), [&] {
                std::uint64_t v;
                (void)!::read(reused.get(), &v, sizeof v);
                ++calls;
            });
        });
        go = true;
        owner.join();
        ASSERT_GE(next, 0);
        ASSERT_TRUE(eventually([&] { return calls > 0; })) << "round " << round;
        executor.unwatch(next);
    }
}

} // namespace
} // namespace smc

namespace
{
std::atomic<pthread_t> signalTaker{};
std::atomic<bool> signalTaken{false};
void onSignal(int)
{
    signalTaker = ::pthread_self();
    signalTaken = true;
}
} // namespace

// A process-directed signal goes to a thread that does not block it. While the test's own
// thread blocks SIGUSR1, the signal must stay pending (none of the executor's threads takes
// it), and it arrives on the test's thread once that unblocks it.
TEST(Executor, ItsThreadsLeaveTheProcessSignalsToTheApplication)
{
    struct sigaction action {
    }, previous{};
    action.sa_handler = onSignal;
    ASSERT_EQ(::sigaction(SIGUSR1, &action, &previous), 0);
    {
        smc::Executor executor(smc::Executor::Config{});
        std::promise<void> ran;
        executor.post([&] { ran.set_value(); }); // a short-task thread
        executor.postBlocking([] {});            // a blocking thread
        smc::UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
        const int watch = executor.watch(fd.get(), [] {}); // the epoll thread
        ASSERT_GE(watch, 0);
        ran.get_future().wait();

        sigset_t usr1, old;
        ::sigemptyset(&usr1);
        ::sigaddset(&usr1, SIGUSR1);
        ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &usr1, &old), 0);
        ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        EXPECT_FALSE(signalTaken.load()) << "a library thread took the process's signal";
        ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &old, nullptr), 0); // delivered here, now
        EXPECT_TRUE(signalTaken.load());
        EXPECT_TRUE(::pthread_equal(signalTaker.load(), ::pthread_self()));
        executor.unwatch(watch);
    }
    ::sigaction(SIGUSR1, &previous, nullptr);
}
