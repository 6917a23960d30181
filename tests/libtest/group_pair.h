// SPDX-License-Identifier: MIT
// GroupPair: a server and a client LinkGroup on in-process links or an RDMA device, started as
// CLC would; for tests and benchmarks alike, so no gtest here (see link_groups.h for that).
#pragma once

#include <atomic>
#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "smc/core/link_group.h"
#include "smc/testing/inproc_fabric.h"
#include "smc/testing/local_pair.h"
#include "smc/transport/rc_channel.h"

namespace smc::test
{

// Where a pair's links run.
enum class Transport { Inproc, Rdma };

// One side of a pair: its group and what its termination handler saw.
struct GroupSide {
    // Declared before the group: its threads write them until it is gone.
    std::atomic<int> terminations{0};
    std::string reason;
    std::shared_ptr<LinkGroup> group; // shared: an SmcrConnection holds its group too
};

// Usage: create() the groups, adjust the fabric if need be, start().
//
// Example:
//     GroupPair p(Transport::Rdma, "rxe0");
//     if (Result<void> r = p.create(LinkGroupConfig{}); !r)
//         return r.error();
//     if (Result<void> r = p.start(); !r)
//         return r.error();
//     p.server.group->addLink();
class GroupPair
{
public:
    // Inproc: an InprocFabric between two InprocRegistrars, one per side.
    // Rdma: an RdmaLinkProvider on `device` ("" for the first), opened by create().
    explicit GroupPair(Transport transport = Transport::Inproc, std::string device = {})
        : transport_(transport), device_(std::move(device))
    {
        if (transport_ == Transport::Inproc)
            fabric_.emplace(serverKeys_, clientKeys_);
    }
    GroupPair(const GroupPair&) = delete;
    GroupPair& operator=(const GroupPair&) = delete;

    // Both groups with these configurations (the roles are set here), each
    // counting its terminations and keeping the last reason. Not started.
    Result<void> create(LinkGroupConfig serverConfig, LinkGroupConfig clientConfig)
    {
        if (transport_ == Transport::Rdma && !rdma_) {
            Result<rdma::Context> context = rdma::Context::open(device_);
            if (!context)
                return context.error();
            rdma_ = std::make_unique<RdmaLinkProvider>(std::move(*context));
        }
        serverConfig.role = Role::Server;
        clientConfig.role = Role::Client;
        Result<std::unique_ptr<LinkGroup>> s = LinkGroup::create(serverConfig, provider());
        if (!s)
            return s.error();
        Result<std::unique_ptr<LinkGroup>> c = LinkGroup::create(clientConfig, provider());
        if (!c)
            return c.error();
        server.group = std::move(*s);
        client.group = std::move(*c);
        for (GroupSide* side : {&server, &client})
            side->group->onTerminated([side](std::string why) {
                side->reason = std::move(why);
                ++side->terminations;
            });
        return {};
    }
    Result<void> create(const LinkGroupConfig& both) { return create(both, both); }

    // The first link and CONFIRM_LINK (startLocalPair); the server then adds
    // its second link on its own (see waitForLinks).
    Result<void> start()
    {
        if (!server.group || !client.group)
            return std::make_error_code(std::errc::invalid_argument); // create() failed or not run
        return startLocalPair(*server.group, *client.group, provider());
    }

    LinkProvider& provider()
    {
        if (fabric_)
            return *fabric_;
        assert(rdma_ && "create() opens the device");
        return *rdma_;
    }

    // Inproc pairs only: devices per side, refused creates, each link's channels.
    InprocFabric& fabric()
    {
        assert(fabric_ && "an in-process pair");
        return *fabric_;
    }

private:
    Transport transport_;
    std::string device_;
    // Links borrow the registrars and the groups use the provider: all of
    // them are declared before the sides, so the groups go first.
    InprocRegistrar serverKeys_, clientKeys_;
    std::optional<InprocFabric> fabric_;
    std::unique_ptr<RdmaLinkProvider> rdma_;

public:
    GroupSide server, client;
};

} // namespace smc::test
