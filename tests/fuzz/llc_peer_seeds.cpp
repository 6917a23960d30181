// SPDX-License-Identifier: MIT
// The LLC peer fuzzer's seeds: ADD_LINK both ways, CONFIRM_RKEY, DELETE_LINK, TEST_LINK, failover.
#include "tests/fuzz/llc_peer_seeds.h"

#include "tests/fuzz/peer_input.h"

namespace smc::fuzz
{

std::vector<std::pair<std::string, std::vector<std::uint8_t>>> peerSeeds()
{
    std::vector<std::pair<std::string, std::vector<std::uint8_t>>> seeds;
    auto add = [&](std::string name, const InputWriter& w) {
        seeds.emplace_back(std::move(name), w.build());
    };

    // Server group, two links (its own ADD_LINK at start), a handshake that
    // sends CONFIRM_RKEY, a write, an orderly DELETE_LINK, then ADD_LINK
    // again with two RMBs to exchange in ADD_LINK_CONT.
    add("server-add-link", InputWriter(0)
                               .step(Op::BeginHandshake, {0x00, 0})
                               .step(Op::Complete, {0, 0})
                               .step(Op::Open, {0x32, 0})
                               .step(Op::Write, {0, 0, 63})
                               .step(Op::DeleteLinkApi, {1})
                               .step(Op::AddLinkApi)
                               .step(Op::Wait, {10}));

    // Client group: the serving peer confirms link 1, the group gets an RMB,
    // then the peer offers link 2 (ADD_LINK, ADD_LINK_CONT both ways,
    // CONFIRM_LINK on the new link) and tells the RMB's rkey on both links.
    add("client-add-link", InputWriter(kCfgClientGroup)
                               .step(Op::BeginHandshake, {0x00, 0})
                               .step(Op::Complete, {0, 1})
                               .step(Op::AddLink, {0, 0x00})
                               .step(Op::ConfirmRkey, {0, 1, 0x30})
                               .step(Op::Write, {0, 1, 15}));

    // One link: CONFIRM_RKEY of a second peer RMB, its DELETE_RKEY, and the
    // group's own DELETE_RKEY when a connection closes.
    add("confirm-rkey", InputWriter(kCfgOneLink)
                            .step(Op::BeginHandshake, {0x00, 0})
                            .step(Op::Complete, {0, 0})
                            .step(Op::ConfirmRkey, {0, 2, 0x00})
                            .step(Op::DeleteRkey, {0, 0x00, 0, 2})
                            .step(Op::Close, {0}));

    // Client group with two links: the peer deletes the second (orderly,
    // failover to the first), then the whole group.
    add("delete-link", InputWriter(kCfgClientGroup)
                           .step(Op::BeginHandshake, {0x00, 0})
                           .step(Op::Complete, {0, 0})
                           .step(Op::AddLink, {0, 0x00})
                           .step(Op::DeleteLink, {0, 0x02, 1, 1})
                           .step(Op::Write, {0, 2, 31})
                           .step(Op::DeleteLink, {0, 0x01, 0, 3}));

    // TEST_LINK both ways: the peer probes, the group's timer probes (and the
    // peer answers), an unsolicited response.
    add("test-link", InputWriter(kCfgTestLink)
                         .step(Op::TestLink, {0, 0x00})
                         .step(Op::Wait, {50})
                         .step(Op::TestLink, {1, 0x01})
                         .step(Op::Wait, {40}));

    // Client group at one link asks for another (REQ_ADD_LINK); the peer
    // serves it with its ADD_LINK flow.
    add("req-add-link", InputWriter(kCfgClientGroup, 2, 255, 7)
                            .step(Op::Open, {0x00, 0})
                            .step(Op::RequestAddLink)
                            .step(Op::Wait, {20}));

    // Server group with two links: a connection, the peer's end of the
    // second link dies, the group fails over and writes on.
    add("failover-write", InputWriter(0)
                              .step(Op::BeginHandshake, {0x00, 0})
                              .step(Op::Complete, {0, 3})
                              .step(Op::Write, {0, 0, 63})
                              .step(Op::LinkFault, {1})
                              .step(Op::Wait, {20})
                              .step(Op::Write, {0, 4, 63}));

    // The peer does not answer the group's first ADD_LINK (it times out),
    // answers the next one.
    add("add-link-timeout", InputWriter(0)
                                .step(Op::Open, {0x00, 0})
                                .step(Op::AddLinkApi)
                                .step(Op::Wait, {10})
                                .answers({Answer::Proper, Answer::Drop}));
    // Two API threads: writes on the second lane beside a close on the
    // first, then a write through the closed handle (it must say Closed).
    add("close-beside-writes", InputWriter(0)
                                   .step(Op::BeginHandshake, {0x00, 0})
                                   .step(Op::Complete, {0, 2})
                                   .step(Op::Write, {0, 0, 255}, kHold)
                                   .step(Op::Close, {0})
                                   .step(Op::Write, {0x80, 1, 63}, kHold));
    return seeds;
}

} // namespace smc::fuzz
