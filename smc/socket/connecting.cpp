// SPDX-License-Identifier: MIT
// Socket::connectAsync: the connect and handshake on the stack's handshake threads.
#include "smc/socket/internal/connecting.h"

#include <sys/socket.h>
#include <unistd.h>

#include <utility>

namespace smc
{

Result<std::shared_ptr<Connecting>> Connecting::start(StackCore& stack, net::SocketAddress to,
                                                      const SocketOptions& options)
{
    Result<EventFd> done = EventFd::create();
    if (!done)
        return done.error();
    std::shared_ptr<Connecting> c(new Connecting(std::move(*done)));
    // The connect's time counts from the call, not from when a handshake thread took it.
    const net::Deadline deadline = net::deadlineAfter(options.connectTimeout);
    stack.handshakes().postBlocking([c, &stack, to, options, deadline] {
        if (c->closed()) { // before it began: nothing to do
            c->finish(std::make_error_code(std::errc::not_connected));
            return;
        }
        Result<UniqueFd> tcp = clientTcp(stack, to, deadline, options);
        if (!tcp) {
            c->finish(tcp.error());
            return;
        }
        if (!c->follow(tcp->get())) {
            c->finish(std::make_error_code(std::errc::not_connected));
            return;
        }
        c->finish(establish(stack, std::move(*tcp), false, options));
    });
    return c;
}

bool Connecting::closed() noexcept
{
    MutexLocker lock(mutex_);
    return abandoned_;
}

bool Connecting::follow(int tcp) noexcept
{
    MutexLocker lock(mutex_);
    if (abandoned_)
        return false;
    // A descriptor of our own for the socket (the handshake may close its own at any time):
    // abandon() shuts the socket down through it, which ends a handshake's wait at once.
    following_ = UniqueFd(::dup(tcp)); // none if dup fails: the handshake ends in its time
    return true;
}

void Connecting::finish(Result<std::shared_ptr<SocketImpl>> result) noexcept
{
    std::shared_ptr<SocketImpl> orphan;
    {
        MutexLocker lock(mutex_);
        following_.reset();
        if (result) {
            (*result)->setNonBlocking(nonBlocking_.load());
            if (abandoned_)
                orphan = *result;
            made_.store(result->get(), std::memory_order_release);
        }
        result_ = std::move(result);
    }
    if (orphan)
        orphan->close();
    done_.signal();
    changed_.notify_all();
}

Result<std::shared_ptr<SocketImpl>> Connecting::await(bool nonBlocking)
{
    MutexLocker lock(mutex_);
    if (!result_ && nonBlocking && !abandoned_)
        return std::make_error_code(std::errc::resource_unavailable_try_again);
    changed_.wait(lock, [this]() SMC_REQUIRES(mutex_) { return result_ || abandoned_; });
    if (abandoned_)
        return std::make_error_code(std::errc::not_connected);
    return *result_;
}

void Connecting::setNonBlocking(bool on) noexcept
{
    MutexLocker lock(mutex_);
    nonBlocking_ = on;
    if (result_ && *result_)
        (**result_)->setNonBlocking(on);
}

void Connecting::abandon() noexcept
{
    std::shared_ptr<SocketImpl> made;
    {
        MutexLocker lock(mutex_);
        abandoned_ = true;
        if (following_)
            (void)::shutdown(following_.get(), SHUT_RDWR); // the handshake gives up now
        if (result_ && *result_)
            made = **result_;
    }
    changed_.notify_all();
    if (made)
        made->close();
}

} // namespace smc
