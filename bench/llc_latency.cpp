// SPDX-License-Identifier: MIT
// LLC flow latency between a server and a client link group in one process: ADD_LINK (with
// the ADD_LINK_CONT exchange), DELETE_LINK, CONFIRM_RKEY and DELETE_RKEY, in process or on RDMA.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "smc/testing/inproc_fabric.h"
#include "smc/testing/local_pair.h"
#include "smc/transport/rc_channel.h"

namespace
{

using namespace smc;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Options {
    std::string transport = "inproc";
    std::string device;
    unsigned iterations = 200;
    std::vector<unsigned> conns{0, 16, 64};
};

struct Pair {
    std::unique_ptr<InprocRegistrar> serverKeys, clientKeys;
    std::unique_ptr<LinkProvider> provider;
    std::unique_ptr<LinkGroup> server, client;
};

Result<std::unique_ptr<Pair>> makePair(const Options& o)
{
    auto p = std::make_unique<Pair>();
    if (o.transport == "rdma") {
        Result<rdma::Context> context = rdma::Context::open(o.device);
        if (!context)
            return context.error();
        p->provider = std::make_unique<RdmaLinkProvider>(std::move(*context));
    } else {
        p->serverKeys = std::make_unique<InprocRegistrar>();
        p->clientKeys = std::make_unique<InprocRegistrar>();
        p->provider = std::make_unique<InprocFabric>(*p->serverKeys, *p->clientKeys);
    }
    LinkGroupConfig config;
    config.maxLinks = 2;
    config.timeouts.testLink = 0ms;
    config.role = Role::Server;
    Result<std::unique_ptr<LinkGroup>> s = LinkGroup::create(config, *p->provider);
    config.role = Role::Client;
    Result<std::unique_ptr<LinkGroup>> c = LinkGroup::create(config, *p->provider);
    if (!s || !c)
        return s ? c.error() : s.error();
    p->server = std::move(*s);
    p->client = std::move(*c);
    if (Result<void> r = startLocalPair(*p->server, *p->client, *p->provider); !r)
        return r.error();
    return p;
}

struct Samples {
    std::vector<double> us;
    void add(Clock::time_point t0)
    {
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    double at(double q)
    {
        std::sort(us.begin(), us.end());
        return us.empty() ? 0 : us[std::min(us.size() - 1, std::size_t(q * us.size()))];
    }
};

void row(const char* flow, unsigned conns, Samples s)
{
    std::printf("%-13s %6u %6zu | %10.1f %10.1f %10.1f %10.1f\n", flow, conns, s.us.size(),
                s.at(0.5), s.at(0.9), s.at(0.99), s.at(1.0));
}

int run(const Options& o)
{
    std::printf("LLC flow latency, server side (request sent to answer in), transport %s\n"
                "add-link includes registering every buffer on the new link and ADD_LINK_CONT\n"
                "for every connection's RMB; rkey flows run with two links up.\n\n",
                o.transport.c_str());
    std::printf("%-13s %6s %6s | %10s %10s %10s %10s\n", "flow", "conns", "n", "median us",
                "p90 us", "p99 us", "max us");
    std::printf("----------------------------+--------------------------------------------\n");
    for (unsigned conns : o.conns) {
        Result<std::unique_ptr<Pair>> made = makePair(o);
        if (!made) {
            std::fprintf(stderr, "llc_latency: %s\n", made.error().message().c_str());
            return 1;
        }
        Pair& p = **made;
        if (!waitForLinks(*p.server, *p.client, 2, 30s)) {
            std::fprintf(stderr, "llc_latency: the second link did not come up\n");
            return 1;
        }
        std::vector<std::pair<Connection*, Connection*>> open;
        for (unsigned i = 0; i < conns; ++i) {
            Result<std::pair<Connection*, Connection*>> c =
                connectLocalPair(*p.server, *p.client, 65536, 65536);
            if (!c) {
                std::fprintf(stderr, "llc_latency: connection %u: %s\n", i,
                             c.error().message().c_str());
                return 1;
            }
            open.push_back(*c);
        }
        Samples add, del, confirm, remove;
        for (unsigned i = 0; i < o.iterations; ++i) {
            const unsigned second = p.server->links().back().slot;
            auto t0 = Clock::now();
            Result<void> r = p.server->deleteLink(second);
            del.add(t0);
            if (!r || !waitForLinks(*p.server, *p.client, 1, 30s)) {
                std::fprintf(stderr, "llc_latency: delete-link failed\n");
                return 1;
            }
            t0 = Clock::now();
            r = p.server->addLink();
            add.add(t0);
            if (!r || !waitForLinks(*p.server, *p.client, 2, 30s)) {
                std::fprintf(stderr, "llc_latency: add-link: %s\n",
                             r ? "did not settle" : r.error().message().c_str());
                return 1;
            }
            // One more connection: the server's CONFIRM_RKEY (our RMB on the
            // other link) and, when it closes, DELETE_RKEY.
            Result<LinkGroup::Handshake> hs = p.server->beginHandshake(65536, 65536);
            Result<LinkGroup::Handshake> hc =
                hs ? p.client->beginHandshake(65536, 65536,
                                              p.server->linkId(hs->connection()->link()))
                   : Result<LinkGroup::Handshake>(hs.error());
            if (!hc) {
                std::fprintf(stderr, "llc_latency: handshake: %s\n", hc.error().message().c_str());
                return 1;
            }
            Connection* sc = hs->connection();
            Connection* cc = hc->connection();
            const RtokenTable::Rtoken serverRmb = hs->rtoken();
            t0 = Clock::now();
            r = hs->complete(hc->rtoken());
            confirm.add(t0);
            Result<void> done = r ? hc->complete(serverRmb) : r;
            t0 = Clock::now();
            Result<void> closed = done ? p.server->closeConnection(*sc) : done;
            remove.add(t0);
            if (!closed || !p.client->closeConnection(*cc)) {
                std::fprintf(stderr, "llc_latency: rkey flows failed\n");
                return 1;
            }
        }
        row("add-link", conns, add);
        row("delete-link", conns, del);
        row("confirm-rkey", conns, confirm);
        row("delete-rkey", conns, remove);
        for (auto [s, c] : open) {
            (void)p.client->closeConnection(*c);
            (void)p.server->closeConnection(*s);
        }
    }
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--transport" && i + 1 < argc)
            o.transport = argv[++i];
        else if (a == "--device" && i + 1 < argc)
            o.device = argv[++i];
        else if (a == "--iterations" && i + 1 < argc)
            o.iterations = static_cast<unsigned>(std::max(1, std::atoi(argv[++i])));
        else if (a == "--conns" && i + 1 < argc) {
            o.conns.clear();
            for (std::string list = argv[++i]; !list.empty();) {
                const std::size_t comma = list.find(',');
                o.conns.push_back(static_cast<unsigned>(std::atoi(list.substr(0, comma).c_str())));
                list = comma == std::string::npos ? "" : list.substr(comma + 1);
            }
        } else {
            std::fprintf(stderr,
                         "usage: %s [--transport inproc|rdma] [--device NAME] [--iterations N] "
                         "[--conns 0,16,64]\n",
                         argv[0]);
            return 2;
        }
    }
    if (o.transport != "inproc" && o.transport != "rdma") {
        std::fprintf(stderr, "llc_latency: unknown transport '%s' (inproc or rdma)\n",
                     o.transport.c_str());
        return 2;
    }
    for (unsigned c : o.conns) {
        if (c > 200) {
            std::fprintf(stderr, "llc_latency: at most 200 connections per group here\n");
            return 2;
        }
    }
    return run(o);
}
