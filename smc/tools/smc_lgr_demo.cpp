// SPDX-License-Identifier: MIT
// smc-lgr-demo: a server and a client side in one process open N connections, kill a link,
// and print link groups, links and buffer statistics like `smcr linkgroup` / `smcr stats`;
// or (--sockets) SMC connections between two stacks, shown like `smcss`.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "smc/core/link_group_manager.h"
#include "smc/ism/ism_registrar.h"
#include "smc/ism/loopback_ism.h"
#include "smc/testing/inproc_fabric.h"
#include "smc/testing/local_pair.h"
#include "smc/tools/demo_sockets.h"
#include "smc/transport/rc_channel.h"

namespace
{

using namespace smc;
using namespace std::chrono_literals;

struct Options {
    std::string device = "loopback-ism";
    unsigned conns = 8;
    bool json = false;
    bool kill = true;
    unsigned serverDevices = 2, clientDevices = 2; // inproc only
    bool sockets = false;
    std::string host = "127.0.0.1"; // --sockets
};

// Connections get 16 KiB to 128 KiB buffers, so the statistics show classes.
std::size_t bufferBytes(unsigned i)
{
    return std::size_t{16384} << (i % 4);
}

std::string gidText(const llc::Gid& g)
{
    static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char buf[48];
    if (std::memcmp(g.data(), kMapped, 12) == 0) { // RoCE v2 IPv4
        std::snprintf(buf, sizeof buf, "::ffff:%u.%u.%u.%u", g[12], g[13], g[14], g[15]);
        return buf;
    }
    std::string s;
    for (std::size_t i = 0; i < g.size(); i += 2) {
        std::snprintf(buf, sizeof buf, "%s%02x%02x", i ? ":" : "", g[i], g[i + 1]);
        s += buf;
    }
    return s;
}

// One line per histogram class: leases of 16K, 32K, ... buffers.
std::string histogram(const KindStats& k)
{
    std::string s;
    char buf[32];
    for (unsigned c = 0; c < 8 && c < k.classHistogram.size(); ++c) {
        std::snprintf(buf, sizeof buf, "%8" PRIu64, k.classHistogram[c]);
        s += buf;
    }
    return s;
}

void printStats(const char* title, const char* tool, const PoolStats& st)
{
    std::printf("%s buffers (%s stats)\n", title, tool);
    std::printf("  %-7s %7s %7s %9s %11s %11s |%8s%8s%8s%8s%8s%8s%8s%8s\n", "kind", "allocs",
                "reuses", "dgrades", "in use B", "pooled B", "16K", "32K", "64K", "128K", "256K",
                "512K", "1M", "2M");
    for (auto [name, k] : {std::pair{"RMB", &st.rmb}, std::pair{"sndbuf", &st.sndbuf}})
        std::printf("  %-7s %7" PRIu64 " %7" PRIu64 " %9" PRIu64 " %11" PRId64 " %11" PRIu64
                    " |%s\n",
                    name, k->allocs, k->reuses, k->downgrades, k->inUseBytes, k->pooledBytes,
                    histogram(*k).c_str());
}

// ---- SMC-R: two LinkGroupManagers over in-process links or an RDMA device ----

struct Side {
    const char* name;
    Role role;
    std::unique_ptr<LinkGroupManager> manager;
};

void showSmcr(const Side& side, const char* phase, bool json, unsigned writesOk,
              unsigned writesFailed)
{
    const std::vector<std::shared_ptr<LinkGroup>> groups = side.manager->groups();
    if (json) {
        std::printf("{\"phase\":\"%s\",\"side\":\"%s\",\"writes\":{\"ok\":%u,\"failed\":%u},"
                    "\"linkgroups\":[",
                    phase, side.name, writesOk, writesFailed);
        for (std::size_t i = 0; i < groups.size(); ++i) {
            const LinkGroup& g = *groups[i];
            std::printf("%s{\"id\":%zu,\"role\":\"%s\",\"type\":\"%s\",\"conns\":%u,\"links\":[",
                        i ? "," : "", i + 1, side.role == Role::Server ? "SERV" : "CLNT",
                        toString(g.type()), g.connectionCount());
            const std::vector<LinkInfo> links = g.links();
            for (std::size_t j = 0; j < links.size(); ++j) {
                const LinkInfo& l = links[j];
                std::printf("%s{\"id\":%u,\"state\":\"%s\",\"conns\":%u,\"qpn\":%u,"
                            "\"gid\":\"%s\",\"peer_qpn\":%u,\"peer_gid\":\"%s\"}",
                            j ? "," : "", l.linkId, toString(l.state), l.connections, l.local.qpn,
                            gidText(l.local.gid).c_str(), l.peer.qpn, gidText(l.peer.gid).c_str());
            }
            std::printf("],\"pool\":%s}", groups[i]->pool().stats().toJson().c_str());
        }
        std::printf("]}\n");
        return;
    }
    std::printf("== %s, %s: %u writes landed, %u failed ==\n", side.name, phase, writesOk,
                writesFailed);
    std::printf("LG-ID    LG-Role  LG-Type     #Conns\n");
    for (std::size_t i = 0; i < groups.size(); ++i) {
        const LinkGroup& g = *groups[i];
        std::printf("%08zx %-8s %-10s %7u\n", i + 1, side.role == Role::Server ? "SERV" : "CLNT",
                    toString(g.type()), g.connectionCount());
        std::printf("   LNK-ID  State       #Conns  QPN      %-39s  Peer-QPN Peer-GID\n", "GID");
        for (const LinkInfo& l : g.links())
            std::printf("   %6u  %-10s %7u  %-8u %-39s  %-8u %s\n", l.linkId, toString(l.state),
                        l.connections, l.local.qpn, gidText(l.local.gid).c_str(), l.peer.qpn,
                        gidText(l.peer.gid).c_str());
    }
    for (std::size_t i = 0; i < groups.size(); ++i) {
        char title[64];
        std::snprintf(title, sizeof title, "%s group %08zx", side.name, i + 1);
        printStats(title, "smcr", groups[i]->pool().stats());
    }
    std::printf("\n");
}

int runSmcr(const Options& o)
{
    InprocRegistrar serverKeys, clientKeys;
    std::unique_ptr<LinkProvider> provider;
    if (o.device == "inproc") {
        provider = std::make_unique<InprocFabric>(serverKeys, clientKeys, o.serverDevices,
                                                  o.clientDevices);
    } else {
        Result<rdma::Context> context = rdma::Context::open(o.device);
        if (!context) {
            std::fprintf(stderr, "smc-lgr-demo: RDMA device '%s': %s%s\n", o.device.c_str(),
                         context.error().message().c_str(),
                         context.error() == std::errc::function_not_supported
                             ? " (no RDMA device here: try --device loopback-ism or inproc)"
                             : "");
            return 1;
        }
        provider = std::make_unique<RdmaLinkProvider>(std::move(*context));
    }
    LinkGroupConfig defaults;
    defaults.maxLinks = 2;
    Side server{"server", Role::Server, std::make_unique<LinkGroupManager>(defaults, *provider)};
    Side client{"client", Role::Client, std::make_unique<LinkGroupManager>(defaults, *provider)};
    const SystemId serverId{0x02, 0, 0, 0, 0, 0, 0, 1}, clientId{0x02, 0, 0, 0, 0, 0, 0, 2};

    // Before the provider goes (declared after it): the groups live while held here.
    std::vector<std::pair<std::shared_ptr<LinkGroup>, std::shared_ptr<LinkGroup>>> groupOf;
    std::vector<ConnectionPair> conns;
    for (unsigned i = 0; i < o.conns; ++i) {
        std::shared_ptr<LinkGroup> s = server.manager->find(Role::Server, clientId);
        std::shared_ptr<LinkGroup> c = client.manager->find(Role::Client, serverId);
        if (s == nullptr || c == nullptr) {
            Result<std::shared_ptr<LinkGroup>> ns = server.manager->create(Role::Server, clientId);
            Result<std::shared_ptr<LinkGroup>> nc = client.manager->create(Role::Client, serverId);
            if (!ns || !nc) {
                std::fprintf(stderr, "smc-lgr-demo: new link group: %s\n",
                             (ns ? nc.error() : ns.error()).message().c_str());
                return 1;
            }
            s = std::move(*ns);
            c = std::move(*nc);
            // The server's start() tried its second link already: the client
            // catches up to whatever it got (one link without a second device).
            Result<void> r = startLocalPair(*s, *c, *provider);
            if (!r || !waitForLinks(*s, *c, s->activeLinks(), 30s)) {
                std::fprintf(stderr, "smc-lgr-demo: first link: %s\n",
                             r ? "the sides do not agree on their links"
                               : r.error().message().c_str());
                return 1;
            }
        }
        Result<ConnectionPair> pair = connectLocalPair(*s, *c, bufferBytes(i), bufferBytes(i));
        if (!pair) {
            std::fprintf(stderr, "smc-lgr-demo: connection %u: %s\n", i,
                         pair.error().message().c_str());
            return 1;
        }
        conns.push_back(*pair);
        groupOf.emplace_back(s, c);
    }

    // Every connection writes 64 bytes into its peer's RMB, both ways.
    auto writeAll = [&](std::uint8_t value, unsigned& ok, unsigned& failed) {
        ok = failed = 0;
        std::byte data[64];
        std::memset(data, value, sizeof data);
        for (std::size_t i = 0; i < conns.size(); ++i) {
            auto [sc, cc] = conns[i];
            auto [s, c] = groupOf[i];
            const bool a = s->write(*sc, 0, data) && std::memcmp(cc->rmb->data(), data, 64) == 0;
            const bool b = c->write(*cc, 0, data) && std::memcmp(sc->rmb->data(), data, 64) == 0;
            ok += a + b;
            failed += !a + !b;
        }
    };
    unsigned ok = 0, failed = 0;
    writeAll(1, ok, failed);
    showSmcr(server, "connections open", o.json, ok, failed);
    showSmcr(client, "connections open", o.json, ok, failed);

    if (o.kill && !conns.empty()) {
        auto [s, c] = groupOf.front();
        const std::vector<LinkInfo> links = s->links();
        if (links.size() < 2) {
            std::fprintf(stderr, "smc-lgr-demo: one link only: nothing to fail over to\n");
        } else {
            if (!o.json)
                std::printf("-- link %u of the first group breaks (LinkGroup::breakLink) --\n\n",
                            links.back().linkId);
            (void)s->breakLink(links.back().slot);
            if (!waitForLinks(*s, *c, 1, 30s)) {
                std::fprintf(stderr, "smc-lgr-demo: failover did not settle\n");
                return 1;
            }
            writeAll(2, ok, failed);
            showSmcr(server, "after failover", o.json, ok, failed);
            showSmcr(client, "after failover", o.json, ok, failed);
        }
    }
    for (std::size_t i = 0; i < conns.size(); ++i) {
        (void)groupOf[i].second->closeConnection(*conns[i].second);
        (void)groupOf[i].first->closeConnection(*conns[i].first);
    }
    for (const std::shared_ptr<LinkGroup>& g : server.manager->groups())
        g->terminate("demo done");
    // Managers (and their groups) go before the provider and the registrars.
    client.manager.reset();
    server.manager.reset();
    return failed == 0 ? 0 : 1;
}

// ---- SMC-D: two pools on the loopback-ism device ----

int runSmcd(const Options& o)
{
    LoopbackIsm device;
    IsmRegistrar registrar(device);
    PoolConfig config;
    config.tech = Tech::SmcD;
    std::unique_ptr<BufferPool> pools[2];
    for (auto& p : pools) {
        Result<std::unique_ptr<BufferPool>> made = BufferPool::create(config, registrar);
        if (!made) {
            std::fprintf(stderr, "smc-lgr-demo: pool: %s\n", made.error().message().c_str());
            return 1;
        }
        p = std::move(*made);
    }
    struct Conn {
        BufferRef rmb[2], sndbuf[2];
    };
    std::vector<Conn> conns;
    unsigned ok = 0, failed = 0;
    for (unsigned i = 0; i < o.conns; ++i) {
        Conn c;
        for (int side = 0; side < 2; ++side) {
            Result<BufferRef> r = pools[side]->acquire(BufferKind::Rmb, bufferBytes(i));
            Result<BufferRef> s = pools[side]->acquire(BufferKind::Sndbuf, bufferBytes(i));
            if (!r || !s) {
                std::fprintf(stderr, "smc-lgr-demo: buffers: %s\n",
                             (r ? s.error() : r.error()).message().c_str());
                return 1;
            }
            c.rmb[side] = *r;
            c.sndbuf[side] = *s;
        }
        // Each side writes into the other's DMB (move_data), then reads its own.
        for (int side = 0; side < 2; ++side) {
            std::byte data[64];
            std::memset(data, 0x30 + side, sizeof data);
            const BufferRef& peer = c.rmb[1 - side];
            const bool landed = device.moveData(peer->dmbToken(), 0, data, true) &&
                                std::memcmp(peer->data(), data, sizeof data) == 0;
            ok += landed;
            failed += !landed;
        }
        conns.push_back(c);
    }
    const IsmGid gid = device.localGid();
    if (o.json) {
        for (int side = 0; side < 2; ++side)
            std::printf(
                "{\"phase\":\"connections open\",\"side\":\"%s\",\"device\":\"loopback-ism\","
                "\"linkgroups\":[{\"id\":1,\"vlan\":0,\"conns\":%zu,\"peer_gid\":"
                "\"%016" PRIx64 "\",\"chid\":%u}],\"writes\":{\"ok\":%u,\"failed\":%u},"
                "\"pool\":%s}\n",
                side ? "client" : "server", conns.size(), gid.gid, device.chid(), ok, failed,
                pools[side]->stats().toJson().c_str());
    } else {
        std::printf("SMC-D over loopback-ism: %zu connections, %u move_data writes landed, %u "
                    "failed\n(SMC-D link groups have no links and no LLC: nothing to kill)\n\n",
                    conns.size(), ok, failed);
        for (int side = 0; side < 2; ++side) {
            std::printf("== %s: smcd linkgroup show ==\n", side ? "client" : "server");
            std::printf("LG-ID    VLAN  #Conns  PNET-ID  Peer-GID          CHID\n");
            std::printf("%08x %4u %7zu  %-7s  %016" PRIx64 "  %04x\n", 1u, 0u, conns.size(), "-",
                        gid.gid, device.chid());
            printStats(side ? "client" : "server", "smcd", pools[side]->stats());
            std::printf("\n");
        }
    }
    for (Conn& c : conns)
        for (int side = 0; side < 2; ++side) {
            (void)pools[side]->release(c.rmb[side]);
            (void)pools[side]->release(c.sndbuf[side]);
        }
    return failed == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv)
{
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--device" && i + 1 < argc)
            o.device = argv[++i];
        else if (a == "--conns" && i + 1 < argc)
            o.conns = static_cast<unsigned>(std::max(0, std::atoi(argv[++i])));
        else if (a == "--json")
            o.json = true;
        else if (a == "--no-kill")
            o.kill = false;
        else if (a == "--sockets")
            o.sockets = true;
        else if (a == "--host" && i + 1 < argc)
            o.host = argv[++i];
        else if (a == "--devices" && i + 1 < argc &&
                 std::sscanf(argv[++i], "%u,%u", &o.serverDevices, &o.clientDevices) == 2 &&
                 o.serverDevices >= 1 && o.clientDevices >= 1 && o.serverDevices <= 8 &&
                 o.clientDevices <= 8)
            continue;
        else {
            std::fprintf(
                stderr,
                "usage: %s [--device loopback-ism|inproc|RDMA-DEVICE] [--conns N] "
                "[--json] [--no-kill] [--devices S,C] [--sockets [--host ADDR]]\n"
                "  loopback-ism  SMC-D: DMBs on the software ISM device (default)\n"
                "  inproc        SMC-R link groups over in-process links\n"
                "  rxe0, mlx5_0  SMC-R link groups over RC queue pairs on that device\n"
                "  --devices S,C inproc: RoCE devices of the server and the client (2,2);\n"
                "                one of them with 1 gives asymmetric links, both 1 none\n"
                "  --sockets     instead: N SMC sockets between two stacks of this process\n"
                "                (CLC over TCP on ADDR, default 127.0.0.1), shown smcss-style\n",
                argv[0]);
            return 2;
        }
    }
    if (o.conns > 1000) {
        std::fprintf(stderr, "smc-lgr-demo: at most 1000 connections\n");
        return 2;
    }
    if (o.sockets)
        return demo::runSockets({o.device, o.host, o.conns, o.json});
    return o.device == "loopback-ism" ? runSmcd(o) : runSmcr(o);
}
