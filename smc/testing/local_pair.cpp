// SPDX-License-Identifier: MIT
// startLocalPair / connectLocalPair: the CLC steps, done in process.
#include "smc/testing/local_pair.h"

#include <future>
#include <thread>

namespace smc
{

Result<void> startLocalPair(LinkGroup& server, LinkGroup& client, LinkProvider& provider)
{
    // A v2 group's links carry its long ADD_LINKs.
    const std::size_t maxMessage = maxLinkMessage(server.llcVersion());
    Result<NewLink> first = provider.create({}, maxMessage);
    if (!first)
        return first.error();
    Result<NewLink> far = provider.join(first->local, {}, maxMessage);
    if (!far)
        return far.error();
    if (Result<void> r = first->channel->connect(far->local); !r)
        return r;
    auto clientStarted =
        std::async(std::launch::async, [&] { return client.start(std::move(*far)); });
    Result<void> s = server.start(std::move(*first));
    Result<void> c = clientStarted.get();
    return s ? c : s;
}

Result<ConnectionPair> connectLocalPair(LinkGroup& server, LinkGroup& client, std::size_t rmbBytes,
                                        std::size_t sndbufBytes)
{
    Result<LinkGroup::Handshake> s = server.beginHandshake(rmbBytes, sndbufBytes);
    if (!s)
        return s.error();
    // CLC ACCEPT and CONFIRM carry each side's RMB on the link both ride.
    const RtokenTable::Rtoken serverRmb = s->rtoken();
    Result<LinkGroup::Handshake> c =
        client.beginHandshake(rmbBytes, sndbufBytes, server.linkId(s->connection()->link()));
    if (!c)
        return c.error();
    const RtokenTable::Rtoken clientRmb = c->rtoken();
    ConnectionPtr sc = s->connection();
    ConnectionPtr cc = c->connection();
    if (Result<void> r = s->complete(clientRmb, cc->rmb.size()); !r)
        return r.error();
    if (Result<void> r = c->complete(serverRmb, sc->rmb.size()); !r) {
        (void)server.closeConnection(*sc);
        return r.error();
    }
    return std::pair{sc, cc};
}

bool waitForLinks(const LinkGroup& server, const LinkGroup& client, unsigned n,
                  std::chrono::milliseconds limit)
{
    const auto end = std::chrono::steady_clock::now() + limit;
    for (;;) {
        if (server.activeLinks() == n && client.activeLinks() == n && server.links().size() == n &&
            client.links().size() == n)
            return true;
        if (std::chrono::steady_clock::now() > end)
            return false;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

} // namespace smc
