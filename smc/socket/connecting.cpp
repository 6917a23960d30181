// SPDX-License-Identifier: MIT
// Socket::connectAsync: the connect and handshake on the stack's handshake threads.
#include "smc/socket/internal/connecting.h"

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
    stack.handshakes().postBlocking([c, &stack, to, options] {
        // Plain TCP must not invite a Linux peer to CLC.
        Result<UniqueFd> tcp =
            net::connectTcp(to, net::deadlineAfter(options.connectTimeout),
                            options.mode == Mode::Tcp ? nullptr : stack.tcpOption());
        if (!tcp) {
            c->finish(tcp.error());
            return;
        }
        c->finish(establish(stack, std::move(*tcp), false, options));
    });
    return c;
}

void Connecting::finish(Result<std::shared_ptr<SocketImpl>> result) noexcept
{
    std::shared_ptr<SocketImpl> orphan;
    {
        MutexLocker lock(mutex_);
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
    if (!result_ && nonBlocking)
        return std::make_error_code(std::errc::resource_unavailable_try_again);
    changed_.wait(lock, [this]() SMC_REQUIRES(mutex_) { return result_.has_value(); });
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
        if (result_ && *result_)
            made = **result_;
    }
    if (made)
        made->close();
}

} // namespace smc
