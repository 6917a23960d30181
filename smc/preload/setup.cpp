// SPDX-License-Identifier: MIT
// Setup: the stand-in a number refers to while its handshake runs, and the handshake's task.
#include "smc/preload/setup.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <exception>

#include "smc/net/clc_io.h"
#include "smc/net/tcp.h"
#include "smc/preload/real.h"
#include "smc/preload/registry.h"
#include "smc/preload/shim.h"
#include "smc/socket/internal/arrivals.h"
#include "smc/socket/internal/socket_impl.h"

namespace smc::preload
{

namespace
{

// Whether the TCP connect of `tcp` succeeded within `timeout`. Not SO_ERROR: a failed connect
// keeps its error for the program, which reads it from the socket.
bool tcpConnected(int tcp, std::chrono::milliseconds timeout) noexcept
{
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    return net::waitFor(tcp, POLLOUT, net::deadlineAfter(timeout)) &&
           real().getpeername(tcp, reinterpret_cast<sockaddr*>(&peer), &len) == 0;
}

// The connection of an SMC outcome on TCP socket `tcp` (kept: the connection takes a
// descriptor of its own), for number `fd`; null (logged) if it cannot be made.
std::shared_ptr<Conn> connection(int fd, int tcp, bool server, std::uint64_t generation,
                                 StackCore& stack, Result<net::Outcome> outcome,
                                 UniqueFd own = UniqueFd())
{
    Shim& shim = Shim::instance();
    if (!own)
        own = UniqueFd(real().fcntl(tcp, F_DUPFD_CLOEXEC, UniqueFd::placementFloor().load()));
    if (!own) {
        shim.log("fd %d: no descriptor for the TCP socket: %s", fd, std::strerror(errno));
        return nullptr;
    }
    Result<std::shared_ptr<SocketImpl>> impl =
        connectionOf(stack, std::move(own), server, shim.settings().options, std::move(outcome));
    if (!impl) {
        shim.log("fd %d: no connection: %s", fd, impl.error().message().c_str());
        return nullptr;
    }
    auto conn = std::make_shared<Conn>();
    conn->impl = std::move(*impl);
    conn->generation = generation;
    return conn;
}

// The handshake's end on number `fd`: it becomes the connection, or the TCP socket again.
// `own`: a copy of the TCP socket for the connection to keep, if the caller has one.
void finish(int fd, const std::shared_ptr<Setup>& setup, StackCore& stack,
            Result<net::Outcome> outcome, UniqueFd own = UniqueFd());

void run(int fd, const std::shared_ptr<Setup>& setup, StackCore& stack, UniqueFd announcement,
         const Handshake& handshake)
{
    Shim& shim = Shim::instance();
    const int tcp = setup->tcp.get();
    if (!setup->server && !tcpConnected(tcp, setup->options.connectTimeout)) {
        // Refused, unreachable, or still trying: the socket itself says so, as it would have.
        shim.log("fd %d: TCP connect not done: TCP", fd);
        (void)shim.settle(fd, *setup, tcp, nullptr);
        return;
    }
    if (!setup->server && !localPeer(tcp)) { // a remote server behind a wildcard name: no CLC
        (void)shim.settle(fd, *setup, tcp, nullptr);
        return;
    }
    Result<net::Outcome> outcome = handshake(tcp);
    announcement.reset();
    finish(fd, setup, stack, std::move(outcome));
}

void finish(int fd, const std::shared_ptr<Setup>& setup, StackCore& stack,
            Result<net::Outcome> outcome, UniqueFd own)
{
    Shim& shim = Shim::instance();
    const char* role = setup->server ? "server" : "client";
    const int tcp = setup->tcp.get();
    if (!outcome) {
        stack.countHandshakeError();
        shim.log("fd %d: handshake failed: %s", fd, outcome.error().message().c_str());
        (void)::shutdown(tcp, SHUT_RDWR);
        (void)shim.settle(fd, *setup, tcp, nullptr);
        return;
    }
    if (auto* fallback = std::get_if<net::Fallback>(&*outcome)) {
        stack.countFallback(setup->server, fallback->reason);
        shim.log("fd %d: %s TCP (fallback %s)", fd, role, clc::toString(fallback->reason));
        (void)shim.settle(fd, *setup, tcp, nullptr);
        return;
    }
    // The setup keeps its own descriptor until it is gone: a call that routed to it may still
    // use it. What the program set meanwhile comes with Shim::settle.
    std::shared_ptr<Conn> conn = connection(fd, tcp, setup->server, setup->generation, stack,
                                            std::move(outcome), std::move(own));
    Result<int> ready = conn ? conn->impl->pollFd(setup->standIn)
                             : Result<int>(std::make_error_code(std::errc::not_enough_memory));
    // Said before the number moves: the program may be done and gone right after.
    if (ready)
        shim.log("fd %d: %s %s", fd, role, toString(conn->impl->transport()));
    if (ready && shim.settle(fd, *setup, *ready, conn))
        return;
    // No connection, or the number went meanwhile: nothing went over it yet, so it ends as a
    // handshake that failed.
    if (conn)
        conn->impl->close();
    (void)::shutdown(tcp, SHUT_RDWR);
    (void)shim.settle(fd, *setup, tcp, nullptr);
}

// The server's answer to client `setup`'s `offer` is there (or, `late`, not in time).
// `announcement` goes when the handshake is over; `watched`, the copy of the TCP socket that
// was watched for the answer, is the connection's.
void takeAnswer(int fd, const std::shared_ptr<Setup>& setup, StackCore& stack,
                const std::shared_ptr<UniqueFd>& announcement, const clc::Proposal& offer,
                UniqueFd watched, bool late)
{
    const int tcp = setup->tcp.get();
    // Late but there after all (the timer and the answer at once): taken. A late end has put
    // SO_RCVLOWAT back already (Arrivals).
    bool raised = false;
    Result<net::ClientStep> step =
        late && !net::firstMessageQueued(tcp, raised)
            ? Result<net::ClientStep>(std::make_error_code(std::errc::timed_out))
            : net::clientAnswer(stack, tcp, offer, setup->options);
    auto* accepted = step ? std::get_if<net::ClientAccepted>(&*step) : nullptr;
    if (accepted == nullptr) {
        announcement->reset();
        finish(fd, setup, stack,
               step ? Result<net::Outcome>(std::move(std::get<net::Outcome>(*step)))
                    : Result<net::Outcome>(step.error()),
               std::move(watched));
        return;
    }
    auto mapping = std::make_shared<net::ClientAccepted>(std::move(*accepted));
    auto own = std::make_shared<UniqueFd>(std::move(watched));
    try {
        stack.handshakes().postBlocking([fd, setup, &stack, announcement, mapping, own] {
            Result<net::Outcome> outcome =
                net::clientMap(stack, setup->tcp.get(), std::move(*mapping), setup->options);
            announcement->reset();
            finish(fd, setup, stack, std::move(outcome), std::move(*own));
        });
    } catch (const std::exception&) {
        announcement->reset();
        finish(fd, setup, stack, std::make_error_code(std::errc::not_enough_memory));
    }
}

// The client handshake's steps without a thread of their own: the PROPOSAL now, the ACCEPT
// when it is all queued (on the executor's epoll thread, Arrivals), an attach (which waits for
// the server's device) on a handshake thread. False, nothing begun, when it cannot start.
bool answerLater(int fd, const std::shared_ptr<Setup>& setup, StackCore& stack,
                 UniqueFd& announcement)
{
    Shim& shim = Shim::instance();
    const SocketOptions& options = setup->options;
    const int tcp = setup->tcp.get();
    std::shared_ptr<Arrivals> arrivals = shim.arrivals();
    // localPeer's getpeername also says the TCP connect is over (ENOTCONN while it is not).
    if (options.mode != Mode::SmcD || !arrivals || !localPeer(tcp))
        return false;
    UniqueFd watched(real().fcntl(tcp, F_DUPFD_CLOEXEC, UniqueFd::placementFloor().load()));
    if (!watched || !shim.addSetup(fd, setup))
        return false;
    Result<clc::Proposal> offer = net::clientPropose(stack, tcp, options);
    if (!offer) {
        announcement.reset();
        finish(fd, setup, stack, offer.error());
        return true;
    }
    auto held = std::make_shared<UniqueFd>(std::move(announcement));
    auto answered = [fd, setup, &stack, held, offer = std::move(*offer)](UniqueFd tcpCopy,
                                                                         bool late) {
        takeAnswer(fd, setup, stack, held, offer, std::move(tcpCopy), late);
    };
    if (!arrivals->awaitMessage(std::move(watched), options.clcTimeout, std::move(answered))) {
        held->reset();
        finish(fd, setup, stack, std::make_error_code(std::errc::operation_canceled));
    }
    return true;
}

} // namespace

Transport redirect(int fd, StackCore& stack, bool server, Result<net::Outcome> outcome,
                   std::optional<bool> known)
{
    Shim& shim = Shim::instance();
    const bool nonBlock = known ? *known : nonBlocking(fd);
    std::shared_ptr<Conn> conn =
        connection(fd, fd, server, shim.generation(), stack, std::move(outcome));
    if (!conn)
        return Transport::None;
    Result<int> ready = conn->impl->pollFd();
    if (!ready || !shim.moveTo(fd, *ready)) {
        shim.log("fd %d: no ready descriptor: %s", fd,
                 ready ? std::strerror(errno) : ready.error().message().c_str());
        conn->impl->close();
        return Transport::None;
    }
    // The number's file is now the ready socket: its O_NONBLOCK is what F_GETFL shows, so it
    // must be the socket's (a program may save the flags and set them again). It is made
    // non-blocking.
    if (!nonBlock)
        setNonBlocking(fd, false);
    conn->impl->setNonBlocking(nonBlock);
    conn->nonBlocking = nonBlock;
    const Transport transport = conn->impl->transport();
    shim.add(fd, std::move(conn));
    return transport;
}

namespace
{

// The end of server handshake `outcome` on number `fd`, run in the program's call.
void endAccepted(int fd, StackCore& stack, Result<net::Outcome> outcome,
                 std::optional<bool> nonBlock = std::nullopt)
{
    Shim& shim = Shim::instance();
    if (!outcome) {
        stack.countHandshakeError();
        shim.log("fd %d: handshake failed: %s", fd, outcome.error().message().c_str());
        shim.untrack(fd);
        (void)::shutdown(fd, SHUT_RDWR); // nothing of the program's went over it: it ends
        return;
    }
    if (auto* fallback = std::get_if<net::Fallback>(&*outcome)) {
        stack.countFallback(true, fallback->reason);
        shim.log("fd %d: server TCP (fallback %s)", fd, clc::toString(fallback->reason));
        shim.untrack(fd);
        return;
    }
    const Transport transport = redirect(fd, stack, true, std::move(outcome), nonBlock);
    shim.untrack(fd); // its registrations moved along with it
    if (transport == Transport::None) {
        (void)::shutdown(fd, SHUT_RDWR);
        return;
    }
    shim.log("fd %d: server %s", fd, toString(transport));
}

// The server handshake's rest on a handshake thread while the number refers to a stand-in; in
// the call if there is no stand-in or thread for it.
void handOff(int fd, StackCore& stack, const Handshake& handshake)
{
    std::shared_ptr<Setup> setup = prepareSetup(fd, true);
    if (setup && beginSetup(fd, std::move(setup), stack, UniqueFd(), handshake))
        return;
    endAccepted(fd, stack, handshake(fd));
}

// The handshake from `step` on.
Handshake restFrom(StackCore& stack, Result<net::ServerStep> step)
{
    auto held = std::make_shared<Result<net::ServerStep>>(std::move(step));
    return [&stack, held](int tcp) {
        return net::serverRest(stack, tcp, std::move(*held), Shim::instance().settings().options);
    };
}

} // namespace

bool beginAccepted(int fd, bool nonBlock)
{
    Shim& shim = Shim::instance();
    StackCore* stack = shim.stack();
    if (!stack)
        return false; // TCP: the client then waits for CLC until its timeout, and falls back
    const SocketOptions options = shim.optionsFor(fd);
    if (!nonBlock) {
        endAccepted(fd, *stack, net::serverHandshake(*stack, fd, options));
        return false;
    }
    // SMC-R's steps may wait for its link group: not in the program's call.
    bool raised = false; // SO_RCVLOWAT: an accepted connection's is the default
    net::ClcHead seen;
    if (options.mode != Mode::SmcD || !net::firstMessageQueued(fd, raised, &seen)) {
        if (raised)
            net::lowerLowWater(fd); // for the program's reads, after a fallback
        handOff(fd, *stack,
                [stack, options](int tcp) { return net::serverHandshake(*stack, tcp, options); });
        return false;
    }
    Result<net::ServerStep> step = net::serverBegin(*stack, fd, options, &seen);
    auto* pending = step ? std::get_if<net::SmcdPending>(&*step) : nullptr;
    if (pending == nullptr) {
        endAccepted(fd, *stack, net::serverRest(*stack, fd, std::move(step), options),
                    true); // an end already
        return false;
    }
    shim.addAnswered(fd, std::make_shared<Answered>(std::move(*pending), shim.generation()));
    return net::onlyOneMessage(seen);
}

bool continueAnswered(int fd, const std::shared_ptr<Answered>& answered, bool later, bool nonBlock)
{
    Shim& shim = Shim::instance();
    MutexLocker lock(answered->mutex);
    if (!answered->pending)
        return true; // another call took it on
    // The table holds the number until its next state is there (a connection, a setup, or
    // TCP): another thread's call waits for this one (the mutex) instead of reaching the TCP
    // socket under way. The library's own calls on it reach the kernel.
    const Shim::Bypass bypass;
    net::ClcHead seen;
    const bool queued = net::firstMessageQueued(fd, answered->lowWaterRaised, &seen);
    if (!queued && later)
        return false;
    net::SmcdPending pending = std::move(*answered->pending);
    answered->pending.reset();
    if (!shim.holdsAnswered(fd, *answered))
        return true; // closed meanwhile (the number may be another socket's now): it ends here
    StackCore& stack = *shim.stack(); // there: it answered
    // A number the program made blocking meanwhile waits in the call, as a blocking one would
    // have from the start; a non-blocking one leaves a wait to a handshake thread.
    const bool blocking = !nonBlock;
    if (!queued) {
        if (answered->lowWaterRaised)
            net::lowerLowWater(fd);
        Handshake rest = restFrom(stack, net::ServerStep(std::move(pending)));
        if (blocking)
            endAccepted(fd, stack, rest(fd), false);
        else
            handOff(fd, stack, rest);
    } else {
        Result<net::ServerStep> step =
            net::serverConfirm(stack, fd, std::move(pending), shim.settings().options, &seen);
        if (step && std::holds_alternative<net::SmcdConfirmed>(*step) && !blocking)
            handOff(fd, stack, restFrom(stack, std::move(step))); // an attach waits for the client
        else
            endAccepted(fd, stack,
                        net::serverRest(stack, fd, std::move(step), shim.settings().options),
                        nonBlock);
    }
    shim.dropAnswered(fd, *answered);
    return true;
}

Answered::Answered(net::SmcdPending pending_, std::uint64_t generation_)
    : pending(std::move(pending_)), generation(generation_)
{
}

Setup::Setup(net::ReadyFd standIn_, UniqueFd tcp_, bool server_, std::uint64_t generation_,
             const SocketOptions& options_)
    : standIn(std::make_shared<net::ReadyFd>(std::move(standIn_))), tcp(std::move(tcp_)),
      server(server_), generation(generation_), options(options_)
{
}

std::shared_ptr<Setup> prepareSetup(int fd, bool server)
{
    Result<net::ReadyFd> standIn = net::ReadyFd::create();
    UniqueFd tcp(real().fcntl(fd, F_DUPFD_CLOEXEC, UniqueFd::placementFloor().load()));
    if (!standIn || !tcp)
        return nullptr;
    standIn->set(false, false);
    standIn->hold(); // until the connection it may become is in the table (Shim::settle)
    return std::make_shared<Setup>(std::move(*standIn), std::move(tcp), server,
                                   Shim::instance().generation(), Shim::instance().optionsFor(fd));
}

bool beginConnecting(int fd, std::shared_ptr<Setup> setup, StackCore& stack,
                     UniqueFd&& announcement)
{
    if (answerLater(fd, setup, stack, announcement))
        return true;
    const SocketOptions options = setup->options;
    return beginSetup(
        fd, std::move(setup), stack, std::move(announcement),
        [&stack, options](int tcp) { return net::clientHandshake(stack, tcp, options); });
}

bool beginSetup(int fd, std::shared_ptr<Setup> setup, StackCore& stack, UniqueFd&& announcement,
                Handshake handshake)
{
    if (!Shim::instance().addSetup(fd, setup))
        return false;
    // Shared: the executor's task type is copyable.
    auto held = std::make_shared<UniqueFd>(std::move(announcement));
    Executor& pool = setup->server ? Shim::instance().serverHandshakes() : stack.handshakes();
    try {
        pool.postBlocking([fd, setup, &stack, held, handshake = std::move(handshake)] {
            run(fd, setup, stack, std::move(*held), handshake);
        });
    } catch (const std::exception&) {
        // No thread for it (nothing may leave a libc call as an exception): the number goes
        // back to its TCP socket, shut down, as after a handshake that failed.
        (void)::shutdown(setup->tcp.get(), SHUT_RDWR);
        (void)Shim::instance().settle(fd, *setup, setup->tcp.get(), nullptr);
    }
    return true;
}

} // namespace smc::preload
