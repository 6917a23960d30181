// SPDX-License-Identifier: MIT
// startLocalPair / connectLocalPair: the CLC steps, done in process.
#include "smc/local_pair.h"

#include <future>

namespace smc
{

Result<void> startLocalPair(LinkGroup& server, LinkGroup& client, LinkProvider& provider)
{
    Result<NewLink> first = provider.create();
    if (!first)
        return first.error();
    Result<NewLink> far = provider.join(first->local);
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

Result<std::pair<Connection*, Connection*>> connectLocalPair(LinkGroup& server, LinkGroup& client,
                                                             std::size_t rmbBytes,
                                                             std::size_t sndbufBytes)
{
    Result<Connection*> s = server.openConnection(rmbBytes, sndbufBytes);
    if (!s)
        return s.error();
    Connection& sc = **s;
    std::uint8_t linkId = 0;
    for (const LinkInfo& l : server.links())
        if (l.slot == sc.link)
            linkId = l.linkId;
    Result<Connection*> c = client.openConnection(rmbBytes, sndbufBytes, linkId);
    if (!c) {
        (void)server.closeConnection(sc);
        return c.error();
    }
    Connection& cc = **c;
    auto rtokenOf = [](const Connection& conn) {
        const LinkRegistration& r = conn.rmb->registration(conn.link);
        return RtokenTable::Rtoken{r.rkey, r.addr};
    };
    Result<void> r = server.peerRmbKnown(sc, sc.link, rtokenOf(cc));
    if (r)
        r = client.peerRmbKnown(cc, cc.link, rtokenOf(sc));
    if (r)
        r = server.announceRmb(sc);
    if (r)
        r = client.announceRmb(cc);
    if (!r) {
        (void)client.closeConnection(cc);
        (void)server.closeConnection(sc);
        return r.error();
    }
    return std::pair{&sc, &cc};
}

} // namespace smc
