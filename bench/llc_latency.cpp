// SPDX-License-Identifier: MIT
// LLC flow latency between a server and a client link group in one process: ADD_LINK (with
// the ADD_LINK_CONT exchange), DELETE_LINK, CONFIRM_RKEY and DELETE_RKEY, in process or on RDMA.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/common/args.h"
#include "bench/common/die.h"
#include "bench/common/stats.h"
#include "bench/common/wakeup.h"
#include "tests/libtest/group_pair.h"

namespace
{

using namespace smc;
using namespace std::chrono_literals;
using bench::fail;
using Clock = std::chrono::steady_clock;

struct Options {
    std::string transport = "inproc";
    std::string device;
    unsigned iterations = 200;
    std::vector<unsigned> conns{0, 16, 64};
    std::vector<unsigned> llc{1, 2}; // the groups' LLC versions
};

// The target, in process: an ADD_LINK with this many connections, median.
constexpr unsigned kTargetConns = 64;
constexpr double kTargetUs = 1000;

Result<std::unique_ptr<test::GroupPair>> makePair(const Options& o, unsigned llcVersion)
{
    auto p = std::make_unique<test::GroupPair>(
        o.transport == "rdma" ? test::Transport::Rdma : test::Transport::Inproc, o.device);
    LinkGroupConfig config;
    config.maxLinks = 2;
    config.llcVersion = static_cast<std::uint8_t>(llcVersion);
    config.timeouts.testLink = 0ms;
    if (Result<void> r = p->create(config); !r)
        return r.error();
    if (Result<void> r = p->start(); !r)
        return r.error();
    return p;
}

struct Samples {
    std::vector<double> us;
    void add(Clock::time_point t0)
    {
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    double at(double q) const { return bench::percentile(us, q); }
};

void row(const char* flow, unsigned llc, unsigned conns, const Samples& s)
{
    std::printf("%-13s %3u %6u %6zu | %10.1f %10.1f %10.1f %10.1f\n", flow, llc, conns, s.us.size(),
                s.at(0.5), s.at(0.9), s.at(0.99), s.at(1.0));
}

// One group pair of LLC version `llc` with `conns` connections: its rows; the add-link median.
Result<double> measure(const Options& o, unsigned llc, unsigned conns)
{
    Result<std::unique_ptr<test::GroupPair>> made = makePair(o, llc);
    if (!made)
        return made.error();
    LinkGroup& server = *(*made)->server.group;
    LinkGroup& client = *(*made)->client.group;
    if (!waitForLinks(server, client, 2, 30s))
        return std::make_error_code(std::errc::timed_out); // the second link did not come up
    std::vector<ConnectionPair> open;
    for (unsigned i = 0; i < conns; ++i) {
        Result<ConnectionPair> c = connectLocalPair(server, client, 65536, 65536);
        if (!c)
            return c.error();
        open.push_back(*c);
    }
    Samples add, del, confirm, remove;
    for (unsigned i = 0; i < o.iterations; ++i) {
        const unsigned second = server.links().back().slot;
        auto t0 = Clock::now();
        Result<void> r = server.deleteLink(second);
        del.add(t0);
        if (!r || !waitForLinks(server, client, 1, 30s))
            return r ? std::make_error_code(std::errc::timed_out) : r.error();
        t0 = Clock::now();
        r = server.addLink();
        add.add(t0);
        if (!r || !waitForLinks(server, client, 2, 30s))
            return r ? std::make_error_code(std::errc::timed_out) : r.error();
        // One more connection: the server's CONFIRM_RKEY (our RMB on the
        // other link) and, when it closes, DELETE_RKEY.
        Result<LinkGroup::Handshake> hs = server.beginHandshake(65536, 65536);
        Result<LinkGroup::Handshake> hc =
            hs ? client.beginHandshake(65536, 65536, server.linkId(hs->connection()->link()))
               : Result<LinkGroup::Handshake>(hs.error());
        if (!hc)
            return hc.error();
        ConnectionPtr sc = hs->connection();
        ConnectionPtr cc = hc->connection();
        const RtokenTable::Rtoken serverRmb = hs->rtoken();
        t0 = Clock::now();
        r = hs->complete(hc->rtoken(), cc->rmb.size());
        confirm.add(t0);
        Result<void> done = r ? hc->complete(serverRmb, sc->rmb.size()) : r;
        t0 = Clock::now();
        Result<void> closed = done ? server.closeConnection(*sc) : done;
        remove.add(t0);
        if (!closed)
            return closed.error();
        if (Result<void> c = client.closeConnection(*cc); !c)
            return c.error();
    }
    row("add-link", llc, conns, add);
    row("delete-link", llc, conns, del);
    row("confirm-rkey", llc, conns, confirm);
    row("delete-rkey", llc, conns, remove);
    for (auto [s, c] : open) {
        (void)client.closeConnection(*c);
        (void)server.closeConnection(*s);
    }
    return add.at(0.5);
}

int run(const Options& o)
{
    std::printf("LLC flow latency, server side (request sent to answer in), transport %s\n"
                "add-link includes registering every buffer on the new link and sending every\n"
                "connection's rkey (LLC v1: ADD_LINK_CONT, two per message; v2: in the 8 KiB\n"
                "ADD_LINK); rkey flows run with two links up.\n\n",
                o.transport.c_str());
    std::printf("%-13s %3s %6s %6s | %10s %10s %10s %10s\n", "flow", "llc", "conns", "n",
                "median us", "p90 us", "p99 us", "max us");
    std::printf("--------------------------------+--------------------------------------------\n");
    std::vector<std::pair<unsigned, double>> targets; // (llc, add-link median)
    for (unsigned llc : o.llc)
        for (unsigned conns : o.conns) {
            Result<double> addLink = measure(o, llc, conns);
            if (!addLink)
                return fail("LLC v%u, %u connections: %s", llc, conns,
                            addLink.error().message().c_str());
            if (conns == kTargetConns && o.transport == "inproc") // the target is in process
                targets.emplace_back(llc, *addLink);
        }
    for (auto [llc, us] : targets)
        std::printf(
            "target add-link with %u connections, LLC v%u, median <= %.0f us: %s (%.0f us)\n",
            kTargetConns, llc, kTargetUs, us <= kTargetUs ? "met" : "MISSED", us);
    if (std::any_of(targets.begin(), targets.end(), [](auto t) { return t.first == 1; })) {
        // v1 sends two rkeys per ADD_LINK_CONT and the two sides take turns: a round trip per
        // two connections. What one costs when a thread sleeps until woken, for comparison.
        const unsigned trips = (kTargetConns + 1) / 2;
        std::printf(
            "LLC v1 here: %u ADD_LINK_CONT round trips for %u connections; a sleeping round "
            "trip between two threads takes",
            trips, kTargetConns);
        const char* sep = "";
        for (bench::Placement p : {bench::Placement::OneCpu, bench::Placement::TwoCpus}) {
            if (p == bench::Placement::TwoCpus && bench::allowedCpus().size() < 2)
                continue;
            const double us =
                bench::median(bench::sleepingRoundTrips(0.2, p, bench::Sides::Threads));
            std::printf("%s %.1f us on %s (%.0f us for all)", sep, us,
                        p == bench::Placement::OneCpu ? "one CPU" : "two", trips * us);
            sep = ",";
        }
        std::printf("\n");
    }
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    Options o;
    bench::Args("[--transport inproc|rdma] [--device NAME] [--iterations N] [--conns 0,16,64]\n"
                "[--llc 1,2]\n")
        .choice("--transport", o.transport, {"inproc", "rdma"})
        .text("--device", o.device)
        .whole("--iterations", o.iterations, 1, 1000000)
        .wholeList("--conns", o.conns, 0, 200) // at most 200 connections per group here
        .wholeList("--llc", o.llc, 1, 2)
        .parse(argc, argv);
    return run(o);
}
