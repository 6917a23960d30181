// SPDX-License-Identifier: MIT
// A listener's handshakes: admission, the steps on the handshake pool, waits on epoll between.
#include <type_traits>
#include <utility>

#include "smc/net/clc_io.h"
#include "smc/net/tcp.h"
#include "smc/socket/internal/listener_impl.h"
#include "smc/stack/stack_smcr.h"

namespace smc
{

void ListenerImpl::admit(UniqueFd fd) noexcept
{
    if (options_.mode == Mode::Tcp) { // no CLC: nothing that waits
        if (Result<std::shared_ptr<SocketImpl>> impl =
                establish(stack_, std::move(fd), true, options_))
            push(std::move(*impl));
        return;
    }
    // One host may hold half the handshakes waiting for their peer, so a host that
    // stalls its connections leaves room for others.
    const std::size_t limit = limits_.sharedAcceptQueue ? 0 : limits_.handshakeLimit;
    if (limit > 0 && (pending_.load(std::memory_order_relaxed) >= limit ||
                      arrivals_->waitingFrom(Arrivals::sourceOf(fd.get())) >=
                          std::max<std::size_t>(limit / 2, 1))) {
        decline(std::move(fd));
        return;
    }
    pending_.fetch_add(1, std::memory_order_relaxed);
    if (limits_.sharedAcceptQueue) // the old design: the handshake waits on the pool
        handshake(std::move(fd), false);
    else
        awaitMessage(std::move(fd),
                     [this](UniqueFd f, bool late) { handshake(std::move(f), late); });
}

void ListenerImpl::awaitMessage(UniqueFd fd, Arrivals::Next next) noexcept
{
    if (!arrivals_->awaitMessage(std::move(fd), options_.clcTimeout, std::move(next)))
        pending_.fetch_sub(1, std::memory_order_relaxed);
}

void ListenerImpl::park(UniqueFd fd, net::SmcrParked parked) noexcept
{
    const FirstContacts::Key peer = parked.peer;
    const auto wait =
        std::max(std::chrono::duration_cast<std::chrono::milliseconds>(parked.until - Clock::now()),
                 std::chrono::milliseconds(0));
    auto state = std::make_shared<net::SmcrParked>(std::move(parked));
    Arrivals::Next next = [this, state](UniqueFd f, bool late) {
        run(std::move(f), false, [this, state, late](int sock, const SocketOptions& o) {
            return late ? net::lift(net::serverGiveUp(stack_, sock, *state, o))
                        : net::serverResume(stack_, sock, std::move(*state), o);
        });
    };
    if (!arrivals_->park(std::move(fd), wait, stack_.smcr()->firstContacts, peer, std::move(next)))
        pending_.fetch_sub(1, std::memory_order_relaxed);
}

bool ListenerImpl::stepsHere() const noexcept
{
    // Without SMC-R, the steps up to our ACCEPT and, with the client's DMB kept, after its
    // CONFIRM never wait once the message is all queued: a few handshakes run them on the
    // epoll thread that saw it, not after a hand-off to the pool (two wake-ups per
    // connection: a third of the rate with two clients). Many go to the pool, whose threads
    // spread them over the cores (on the one epoll thread they ran at 0.7x the rate with 8
    // and more clients). Never on the accepting thread, which only accepts (seed 003).
    return stack_.smcr() == nullptr && !limits_.sharedAcceptQueue && !tlsAccepting &&
           pending_.load(std::memory_order_relaxed) <= kStepsHereAtMost;
}

void ListenerImpl::handshake(UniqueFd fd, bool late) noexcept
{
    if (stepsHere()) {
        // No read deadline: the message is all queued, and a header whose length claims more
        // than comes (a stranger's) must not hold the epoll thread for a CLC timeout.
        Result<net::ServerStep> step = net::serverBegin(stack_, fd.get(), options(true));
        proceed(std::move(fd), std::move(step), options(late));
        return;
    }
    run(std::move(fd), late, [this](int f, const SocketOptions& o) {
        if (limits_.sharedAcceptQueue)
            return net::lift(net::serverHandshake(stack_, f, o));
        return net::serverBegin(stack_, f, o);
    });
}

void ListenerImpl::run(UniqueFd fd, bool late, Step step) noexcept
{
    auto child = std::make_shared<UniqueFd>(std::move(fd));
    std::weak_ptr<ListenerImpl> self = weak_from_this();
    stack_.handshakes().postBlocking([self, child, late, step = std::move(step)] {
        auto l = self.lock();
        if (!l)
            return; // `step` gives back what it holds (an RMB, a group)
        const SocketOptions options = l->options(late);
        Result<net::ServerStep> next = step(child->get(), options);
        l->proceed(std::move(*child), std::move(next), options);
    });
}

void ListenerImpl::proceed(UniqueFd fd, Result<net::ServerStep> step,
                           const SocketOptions& options) noexcept
{
    if (step) {
        if (auto* p = std::get_if<net::SmcdPending>(&*step)) {
            awaitConfirm(std::move(fd), std::move(*p));
            return;
        }
        if (auto* p = std::get_if<net::SmcrPending>(&*step)) {
            awaitConfirm(std::move(fd), std::move(*p));
            return;
        }
        if (auto* p = std::get_if<net::SmcrParked>(&*step)) {
            park(std::move(fd), std::move(*p));
            return;
        }
        if (auto* p = std::get_if<net::SmcdConfirmed>(&*step)) { // an attach: on the pool
            auto state = std::make_shared<net::SmcdConfirmed>(std::move(*p));
            run(std::move(fd), false, [this, state](int, const SocketOptions& o) {
                return net::lift(net::serverMap(stack_, std::move(*state), o));
            });
            return;
        }
    }
    Result<net::Outcome> outcome =
        step ? Result<net::Outcome>(std::move(std::get<net::Outcome>(*step)))
             : Result<net::Outcome>(step.error());
    queueOrDrop(connectionOf(stack_, std::move(fd), true, options, std::move(outcome)));
}

template <typename Pending> void ListenerImpl::awaitConfirm(UniqueFd fd, Pending pending) noexcept
{
    auto state = std::make_shared<Pending>(std::move(pending));
    awaitMessage(std::move(fd), [this, state](UniqueFd f, bool late) {
        if constexpr (std::is_same_v<Pending, net::SmcdPending>) {
            if (stepsHere()) {
                Result<net::ServerStep> step = // as handshake(): never a wait here
                    net::serverConfirm(stack_, f.get(), std::move(*state), options(true));
                proceed(std::move(f), std::move(step), options(late));
                return;
            }
        }
        run(std::move(f), late, [this, state](int sock, const SocketOptions& o) {
            return net::lift(net::serverFinish(stack_, sock, std::move(*state), o));
        });
    });
}

SocketOptions ListenerImpl::options(bool late) const
{
    SocketOptions o = options_;
    if (late)
        o.clcTimeout = std::chrono::milliseconds(0);
    return o;
}

void ListenerImpl::queueOrDrop(Result<std::shared_ptr<SocketImpl>> impl) noexcept
{
    if (impl) {
        push(std::move(*impl), true);
    } else {
        pending_.fetch_sub(1, std::memory_order_relaxed);
        roomMade();
    }
}

void ListenerImpl::decline(UniqueFd fd) noexcept
{
    const clc::DeclineCode reason = clc::DeclineCode::PeerNoSmc;
    (void)net::writeClc(fd.get(), clc::makeDecline(reason, clc::kVersion1, {}), net::Clock::now());
    stack_.countHandshakeLimited();
    stack_.countFallback(true, reason);
    auto impl = std::make_shared<SocketImpl>(stack_, std::move(fd), true, options_, reason, true);
    stack_.enroll(impl);
    push(std::move(impl));
}

} // namespace smc
