// SPDX-License-Identifier: MIT
// smc-lgr-demo --sockets: N connections between two in-process stacks, smcss table or JSON.
#include "smc/tools/demo_sockets.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "smc/socket/internal/make_stack.h"
#include "smc/socket/smcss.h"
#include "smc/socket/socket.h"
#include "smc/testing/inproc_fabric.h"

namespace smc::demo
{
namespace
{

using namespace std::chrono_literals;

// What SMC-R in process needs beneath the two stacks (declared first: it outlives them).
struct InprocDevices {
    InprocRegistrar serverReg, clientReg;
    InprocFabric fabric{serverReg, clientReg, 2, 2};
};

Result<std::unique_ptr<SmcStack>> makeStack(const SocketDemo& demo, InprocFabric* fabric,
                                            std::uint8_t id)
{
    StackConfig config;
    StackHooks hooks;
    if (demo.device == "inproc") {
        SmcrConfig r;
        r.gid = InprocFabric::clientGid();
        r.mac = {2, 0, 0, 0, 0, id};
        config.smcr = r;
        hooks.provider = fabric;
    } else if (demo.device != "loopback-ism") {
        config.smcr = SmcrConfig{};
        config.smcr->device = demo.device;
    }
    return makeStack(config, hooks);
}

bool exchange(Socket& from, Socket& to, std::size_t bytes)
{
    std::vector<std::byte> out(bytes, std::byte{0x5a}), in(bytes);
    for (std::size_t sent = 0; sent < bytes;) {
        Result<std::size_t> n = from.send(std::span(out).subspan(sent));
        if (!n)
            return false;
        sent += *n;
    }
    for (std::size_t got = 0; got < bytes;) {
        Result<std::size_t> n = to.recv(std::span(in).subspan(got));
        if (!n || *n == 0)
            return false;
        got += *n;
    }
    return in == out;
}

} // namespace

int runSockets(const SocketDemo& demo)
{
    InprocDevices devices;
    Result<std::unique_ptr<SmcStack>> server = makeStack(demo, &devices.fabric, 1);
    Result<std::unique_ptr<SmcStack>> client = makeStack(demo, &devices.fabric, 2);
    if (!server || !client) {
        std::fprintf(stderr, "smc-lgr-demo: stack: %s\n",
                     (server ? client.error() : server.error()).message().c_str());
        return 1;
    }
    SocketOptions options;
    options.mode = demo.device == "loopback-ism" ? Mode::SmcD : Mode::SmcR;
    const Transport want = demo.device == "loopback-ism" ? Transport::SmcD : Transport::SmcR;
    Result<Listener> listener = Listener::listen(**server, demo.host, 0, options);
    if (!listener) {
        std::fprintf(stderr, "smc-lgr-demo: listen: %s\n", listener.error().message().c_str());
        return 1;
    }
    std::vector<Socket> clients, servers;
    unsigned bad = 0;
    for (unsigned i = 0; i < demo.conns; ++i) {
        options.rmbBytes = std::size_t{16384} << (i % 4); // the table shows four classes
        Result<Socket> c = Socket::connect(**client, demo.host, listener->port(), options);
        Result<Socket> a = c ? listener->accept(10s) : Result<Socket>(c.error());
        if (!c || !a) {
            std::fprintf(stderr, "smc-lgr-demo: connection %u: %s\n", i,
                         (c ? a.error() : c.error()).message().c_str());
            return 1;
        }
        // Different amounts each way, so the cursors differ per connection and direction.
        bad += c->transport() != want || !exchange(*c, *a, 4096 * (i + 1)) ||
               !exchange(*a, *c, 1024 * (i + 1));
        clients.push_back(std::move(*c));
        servers.push_back(std::move(*a));
    }
    for (auto [name, stack] : {std::pair{"server", server->get()}, {"client", client->get()}}) {
        if (demo.json) {
            std::string json = smcssJson(stack->connections(), stack->stats());
            if (!json.empty() && json.back() == '\n')
                json.pop_back();
            std::printf("{\"side\": \"%s\", \"smcss\": %s}\n", name, json.c_str());
        } else {
            std::printf("== %s: smcss ==\n%s\n", name, smcssTable(stack->connections()).c_str());
        }
    }
    if (!demo.json)
        std::printf("%u connections, %u with a wrong transport or lost bytes\n", demo.conns, bad);
    for (Socket& c : clients)
        c.close();
    for (Socket& a : servers)
        a.close();
    listener->close();
    return bad == 0 ? 0 : 1;
}

} // namespace smc::demo
