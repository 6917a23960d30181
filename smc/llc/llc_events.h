// SPDX-License-Identifier: MIT
// LlcEvents: the group's queue of peer requests and lost links, each run holding the flow token.
#pragma once

#include <deque>
#include <optional>
#include <string>

#include "smc/llc/llc_core.h"

namespace smc
{

class LlcEvents
{
public:
    // What runs an event, holding the flow token (the engine).
    class Handler
    {
    public:
        virtual void handleRequest(unsigned slot, const llc::Message& m) = 0;
        // `slot` went down: its connections move to a survivor.
        virtual void linkLost(unsigned slot) = 0;

    protected:
        ~Handler() = default;
    };

    // Peer requests that wait for the flow token, at most (one more is parked
    // while a flow runs, as Linux's delayed event). A legitimate peer has one
    // flow at a time: a few dozen is plenty.
    static constexpr std::size_t kMaxPending = 32;

    // `core` and `handler` must outlive this.
    LlcEvents(LlcCore& core, Handler& handler);

    // Each takes the core's lock; none waits.
    // A peer request that starts a flow (ADD_LINK, REQ_ADD_LINK, DELETE_LINK).
    void request(unsigned slot, std::uint64_t epoch, llc::Message m);
    // A link to fail over; before any request.
    void lost(unsigned slot, std::uint64_t epoch);
    // A malformed message: the group terminates.
    void violation(std::string what);
    // The flow token is free: a parked request may run.
    void flowReleased();
    // Requests in line now, the parked one included.
    std::size_t pending() const;
    // Nothing runs after this returns.
    void close() { tasks_.close(); }

private:
    // What the queue runs: a request from the peer, or (no request) a
    // link down; `epoch` names the attach of `slot` it came from.
    struct Event {
        unsigned slot = 0;
        std::uint64_t epoch = 0;
        std::optional<llc::Message> request;
    };

    void schedule() SMC_REQUIRES(core_.mutex());
    void run();

    LlcCore& core_;
    Handler& handler_;
    std::deque<Event> queue_ SMC_GUARDED_BY(core_.mutex());      // peer requests, in order
    std::deque<Event> downs_ SMC_GUARDED_BY(core_.mutex());      // links to fail over, first
    std::optional<Event> delayed_ SMC_GUARDED_BY(core_.mutex()); // one parked while a flow runs
    std::optional<std::string> violation_ SMC_GUARDED_BY(core_.mutex()); // malformed: terminate
    bool posted_ SMC_GUARDED_BY(core_.mutex()) = false; // a run() task waits to run

    // Declared last: it goes first, before what its tasks use.
    SerialQueue tasks_;
};

} // namespace smc
