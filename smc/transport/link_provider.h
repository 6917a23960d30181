// SPDX-License-Identifier: MIT
// LinkProvider: what makes a link group's links (RC queue pairs, or in-process pairs).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>

#include "base/mutex.h"
#include "base/result.h"
#include "pool/registrar.h"
#include "smc/transport/link_channel.h"

namespace smc
{

// A link as the device side hands it over: its channel, the address the
// peer needs (for RDMA: QP number, PSN, GID) and how buffers are registered
// on it (for RDMA: memory regions on the link's own PD).
struct NewLink {
    std::unique_ptr<LinkChannel> channel;
    LinkAddress local;
    std::shared_ptr<Registrar> registrar;
};

// The LLC flows call it while they add a link: it lives here, below them,
// rather than with the link group that owns it.
class LinkProvider
{
public:
    virtual ~LinkProvider() = default;
    // Server: a new link; it is connected (LinkChannel::connect) once the
    // client's address comes back. `avoid`: local GIDs the group already
    // uses there: take a device with none of them if there is one (Linux's
    // alternate device), else another GID of a device in use (asymmetric),
    // else one of those. `maxMessage`: the longest message
    // the link carries either way (kShortMessages, or kLongMessages in an
    // SMC-Rv2 group). Errors: the provider's own (device, QP or PD creation);
    // it may block while it sets the link up.
    Result<NewLink> create(std::span<const Gid> avoid, std::size_t maxMessage = kShortMessages)
    {
        return makeLink(avoid, maxMessage);
    }
    // Client: the far end of the server's new link at `peer`, connected.
    Result<NewLink> join(const LinkAddress& peer, std::span<const Gid> avoid,
                         std::size_t maxMessage = kShortMessages)
    {
        return joinLink(peer, avoid, maxMessage);
    }

    // `handler` runs whenever a path comes up (an RDMA port turns active again): a group
    // short of links may add one now (Linux smcr_port_add). It runs on the provider's
    // thread and must not block. Returns an id for unwatchPaths(); never blocks.
    int watchPaths(std::function<void()> handler);
    // After this returns the handler does not run any more (it waits for a running one).
    void unwatchPaths(int id);

protected:
    virtual Result<NewLink> makeLink(std::span<const Gid> avoid, std::size_t maxMessage) = 0;
    virtual Result<NewLink> joinLink(const LinkAddress& peer, std::span<const Gid> avoid,
                                     std::size_t maxMessage) = 0;
    // Calls every handler, one after the other.
    void pathUp();

private:
    Mutex watchersMutex_;
    std::map<int, std::function<void()>> watchers_ SMC_GUARDED_BY(watchersMutex_);
    int nextWatcher_ SMC_GUARDED_BY(watchersMutex_) = 0;
};

} // namespace smc
