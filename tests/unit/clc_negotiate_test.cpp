// SPDX-License-Identifier: MIT
// The server's choice for decoded PROPOSALs: loopback-ism, SMC-Rv1 from a v2 header, reasons.
#include "smc/clc/clc_negotiate.h"

#include <gtest/gtest.h>

#include "tests/libtest/clc_golden.h"

namespace smc::clc
{
namespace
{

using namespace smc::testing::golden;

Proposal decoded(const smc::testing::Golden& g)
{
    return std::get<Proposal>(decode(g.bytes).value());
}

Capabilities loopbackHost()
{
    Capabilities c;
    c.ismV2 = {{kLoGid, kLoGidExt, kLoopbackChid}};
    c.ueids = {kUeid};
    return c;
}

DeclineCode declined(const Negotiation& n)
{
    EXPECT_TRUE(std::holds_alternative<DeclineCode>(n));
    return std::holds_alternative<DeclineCode>(n) ? std::get<DeclineCode>(n) : DeclineCode{};
}

// Linux 6.12's SMC-Rv2 PROPOSAL (clc_golden.h) at a server with an SMC-Rv2 device on its
// 192.0.2.0/24 interface: SMC-Rv2, with the EID and the release.
Capabilities smcrV2Host()
{
    Capabilities c;
    c.smcrV2 = true;
    c.ueids = {*makeEid("SMC-CORE-LOOPBACK")};
    c.ipv4 = {{{192, 0, 2, 1}, 24}};
    return c;
}

Proposal linux612()
{
    return std::get<Proposal>(decode(smc::testing::linux612Proposal()).value());
}

TEST(ClcNegotiate, SmcrV2ForLinux612)
{
    const Negotiation n = negotiate(smcrV2Host(), linux612());
    ASSERT_TRUE(std::holds_alternative<Choice>(n)) << static_cast<int>(declined(n));
    const Choice& c = std::get<Choice>(n);
    EXPECT_EQ(c.type, SmcType::SmcR);
    EXPECT_EQ(c.version, kVersion2);
    EXPECT_EQ(c.eid, *makeEid("SMC-CORE-LOOPBACK"));
    EXPECT_EQ(c.release, kRelease1);
}

TEST(ClcNegotiate, SmcrV2Declines)
{
    Capabilities ours = smcrV2Host();
    ours.smcrV2 = false; // no RoCE v2 device: what smc-core's stack says today
    EXPECT_EQ(declined(negotiate(ours, linux612())), DeclineCode::NoSmcrDev);
    ours = smcrV2Host();
    ours.ueids = {*makeEid("OTHER")};
    EXPECT_EQ(declined(negotiate(ours, linux612())), DeclineCode::NoUeid);
    ours = smcrV2Host();
    ours.ipv4 = {{{198, 51, 100, 1}, 24}}; // the peer's GID is behind a gateway
    EXPECT_EQ(declined(negotiate(ours, linux612())), DeclineCode::NoRoute);
    Proposal p = linux612();
    p.v2.maxConns = 15;
    EXPECT_EQ(declined(negotiate(smcrV2Host(), p)), DeclineCode::MaxConnErr);
    p = linux612();
    p.v2.maxLinks = 0;
    EXPECT_EQ(declined(negotiate(smcrV2Host(), p)), DeclineCode::MaxLinkErr);
    p.v2.release = kRelease0; // release 0 has no limits to check
    EXPECT_TRUE(std::holds_alternative<Choice>(negotiate(smcrV2Host(), p)));
}

TEST(ClcNegotiate, LoopbackIsmV2)
{
    const Negotiation n = negotiate(loopbackHost(), decoded(proposalV2LoopbackOnly()));
    ASSERT_TRUE(std::holds_alternative<Choice>(n)) << toString(std::get<DeclineCode>(n));
    const Choice& c = std::get<Choice>(n);
    EXPECT_EQ(c.version, kVersion2);
    EXPECT_EQ(c.type, SmcType::SmcD);
    EXPECT_EQ(c.device, 0u);
    EXPECT_EQ(c.peerGid, kLoGid);
    EXPECT_EQ(c.peerGidExt, kLoGidExt);
    EXPECT_EQ(c.chid, kLoopbackChid);
    EXPECT_EQ(c.eid, kUeid);
    EXPECT_EQ(c.release, kRelease1);
}

TEST(ClcNegotiate, ReleaseIsTheSmallerOne)
{
    Capabilities ours = loopbackHost();
    ours.release = kRelease0;
    EXPECT_EQ(std::get<Choice>(negotiate(ours, decoded(proposalV2LoopbackOnly()))).release,
              kRelease0);
}

TEST(ClcNegotiate, LoopbackReachesOnlyItself)
{
    Capabilities other = loopbackHost();
    other.ismV2[0].gidExt ^= 1; // another process's loopback-ism
    EXPECT_EQ(declined(negotiate(other, decoded(proposalV2LoopbackOnly()))),
              DeclineCode::NoSmcd2Dev);
}

TEST(ClcNegotiate, HostWideLoopbackReachesTheHostsOtherProcesses)
{
    Capabilities other = loopbackHost();
    other.ismV2[0].gidExt ^= 1; // this process; the proposal's comes from another
    other.ismV2[0].hostWide = true;
    const Negotiation n = negotiate(other, decoded(proposalV2LoopbackOnly()));
    ASSERT_TRUE(std::holds_alternative<Choice>(n));
    EXPECT_EQ(std::get<Choice>(n).peerGidExt, kLoGidExt);
    other.ismV2[0].gid ^= 1; // another host
    EXPECT_EQ(declined(negotiate(other, decoded(proposalV2LoopbackOnly()))),
              DeclineCode::NoSmcd2Dev);
}

TEST(ClcNegotiate, EidMustMatch)
{
    Capabilities ours = loopbackHost();
    ours.ueids = {*makeEid("OTHER")};
    EXPECT_EQ(declined(negotiate(ours, decoded(proposalV2LoopbackOnly()))), DeclineCode::NoUeid);

    Proposal noEids = decoded(proposalV2LoopbackOnly());
    noEids.v2.userEids.clear();
    EXPECT_EQ(declined(negotiate(loopbackHost(), noEids)), DeclineCode::NoUeid);

    // The system EID, where both sides enabled it.
    Proposal seid = noEids;
    seid.v2.seid = true;
    seid.smcdV2.systemEid = *makeEid("IBM-SYSZ-ISMSEID00000000");
    ours.seid = seid.smcdV2.systemEid;
    const Negotiation n = negotiate(ours, seid);
    ASSERT_TRUE(std::holds_alternative<Choice>(n));
    EXPECT_EQ(std::get<Choice>(n).eid, *ours.seid);
}

TEST(ClcNegotiate, NoIsmV2Device)
{
    Capabilities ours = loopbackHost();
    ours.ismV2.clear();
    EXPECT_EQ(declined(negotiate(ours, decoded(proposalV2LoopbackOnly()))),
              DeclineCode::NoIsm2Supp);
}

TEST(ClcNegotiate, LinuxV2HeaderOfferingV1SmcR)
{
    // The v2 proposal Linux 6.x sends also offers SMC-Rv1; a host without ISM answers v1.
    Capabilities ours;
    ours.smcrV1 = true;
    ours.ipv4 = {{{192, 168, 1, 17}, 24}};
    const Negotiation n = negotiate(ours, decoded(proposalV2Linux()));
    ASSERT_TRUE(std::holds_alternative<Choice>(n)) << toString(std::get<DeclineCode>(n));
    EXPECT_EQ(std::get<Choice>(n).version, kVersion1);
    EXPECT_EQ(std::get<Choice>(n).type, SmcType::SmcR);

    // With loopback-ism too, SMC-Dv2 comes first.
    Capabilities both = loopbackHost();
    both.smcrV1 = true;
    both.ipv4 = ours.ipv4;
    EXPECT_EQ(std::get<Choice>(negotiate(both, decoded(proposalV2Linux()))).type, SmcType::SmcD);

    // Another subnet: v1 is out, and that is the reason.
    ours.ipv4 = {{{192, 168, 2, 17}, 24}};
    EXPECT_EQ(declined(negotiate(ours, decoded(proposalV2Linux()))), DeclineCode::DiffPrefix);
    ours.ipv4 = {{{192, 168, 1, 17}, 16}}; // same address, other prefix length
    EXPECT_EQ(declined(negotiate(ours, decoded(proposalV2Linux()))), DeclineCode::DiffPrefix);
}

TEST(ClcNegotiate, FirstReasonWins)
{
    // SMC-Dv2 fails first (no matching device), then SMC-Rv1 has no device.
    Capabilities ours = loopbackHost();
    ours.ismV2[0].gid ^= 1;
    ours.ipv4 = {{{192, 168, 1, 1}, 24}};
    EXPECT_EQ(declined(negotiate(ours, decoded(proposalV2Linux()))), DeclineCode::NoSmcd2Dev);
    ours.ismV2.clear(); // now the version check drops SMC-Dv2 without a reason of its own
    EXPECT_EQ(declined(negotiate(ours, decoded(proposalV2Linux()))), DeclineCode::NoSmcDev);
}

TEST(ClcNegotiate, SmcrV1FromAnOldPeer)
{
    Capabilities ours;
    ours.smcrV1 = true;
    ours.ipv6 = {{{0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x05}, 48}};
    const Negotiation n = negotiate(ours, decoded(proposalV1Ipv6()));
    ASSERT_TRUE(std::holds_alternative<Choice>(n));
    EXPECT_EQ(std::get<Choice>(n).version, kVersion1);
    ours.ipv6[0].length = 64;
    EXPECT_EQ(declined(negotiate(ours, decoded(proposalV1Ipv6()))), DeclineCode::DiffPrefix);
}

TEST(ClcNegotiate, SmcdV1)
{
    Proposal p = decoded(proposalV1Ipv4());
    p.typeV1 = SmcType::SmcD;
    p.ismV1 = {0x42, 0x0007};
    Capabilities ours;
    ours.ipv4 = {{{192, 168, 1, 9}, 24}};
    EXPECT_EQ(declined(negotiate(ours, p)), DeclineCode::NoSmcdDev);
    ours.ismV1 = LocalIsm{0x43, 0, 0x0007};
    const Negotiation n = negotiate(ours, p);
    ASSERT_TRUE(std::holds_alternative<Choice>(n));
    EXPECT_EQ(std::get<Choice>(n).type, SmcType::SmcD);
    EXPECT_EQ(std::get<Choice>(n).version, kVersion1);
    EXPECT_EQ(std::get<Choice>(n).peerGid, 0x42u);
}

TEST(ClcNegotiate, NothingOffered)
{
    Proposal p;
    EXPECT_EQ(declined(negotiate(loopbackHost(), p)), DeclineCode::PeerNoSmc);
    p.typeV2 = SmcType::SmcR; // SMC-Rv2 only: not done here
    p.v2.userEids = {kUeid};
    EXPECT_EQ(declined(negotiate(loopbackHost(), p)), DeclineCode::NoSmcrDev);
    p.v2.userEids.clear();
    EXPECT_EQ(declined(negotiate(loopbackHost(), p)), DeclineCode::NoUeid);
}

TEST(ClcNegotiate, IsmOffersJoinEmulatedPairs)
{
    Proposal p;
    p.ismV1 = {0x10, 0x0001}; // native
    p.smcdV2.entries = {{0x20, 0x0002},
                        {0x30, kLoopbackChid}, // unpaired: skipped
                        {0x40, 0xff01},
                        {0x41, 0xff01},
                        {0x50, kLoopbackChid}}; // last, unpaired
    const std::vector<IsmOffer> want = {{0x10, 0, 0x0001}, {0x20, 0, 0x0002}, {0x40, 0x41, 0xff01}};
    EXPECT_EQ(ismV2Offers(p), want);
}

TEST(ClcNegotiate, PrefixMatching)
{
    Capabilities ours;
    ours.ipv4 = {{{10, 1, 2, 3}, 8}};
    PrefixInfo p;
    p.ipv4Subnet = {10, 0, 0, 0};
    p.ipv4PrefixLength = 8;
    EXPECT_TRUE(prefixMatches(p, ours));
    p.ipv4Subnet = {11, 0, 0, 0};
    EXPECT_FALSE(prefixMatches(p, ours));
    p.ipv4PrefixLength = 0;
    ours.ipv4[0].prefixLength = 0;
    EXPECT_TRUE(prefixMatches(p, ours));
    p.ipv4PrefixLength = 33;
    ours.ipv4[0].prefixLength = 33;
    EXPECT_FALSE(prefixMatches(p, ours));
    ours.ipv6 = {{{0xfd, 0x00, 0x12}, 20}};
    p.ipv6 = {{{0xfd, 0x00, 0x1f}, 20}}; // differs only after bit 20
    EXPECT_TRUE(prefixMatches(p, ours));
    p.ipv6 = {{{0xfd, 0x00, 0x2f}, 20}};
    EXPECT_FALSE(prefixMatches(p, ours));
}

} // namespace
} // namespace smc::clc
