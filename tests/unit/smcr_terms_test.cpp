// SPDX-License-Identifier: MIT
// SMC-Rv2's first-contact terms without sockets: the server's offer, the client's checks, the echo.
#include "smc/handshake/smcr_terms.h"

#include <gtest/gtest.h>

namespace smc::net
{
namespace
{

const OurTerms kOurs{255, 2, clc::makeHostname("us")};

clc::Proposal proposal(std::uint8_t maxConns, std::uint8_t maxLinks, std::uint16_t features)
{
    clc::Proposal p;
    p.v2.maxConns = maxConns;
    p.v2.maxLinks = maxLinks;
    p.v2.featureMask = features;
    return p;
}

clc::Accept accept(clc::FirstContactExt fce)
{
    clc::Accept a;
    a.firstContact = true;
    clc::SmcrAcceptConfirm r;
    r.eid[0] = 'E';
    a.path = r;
    a.fce = fce;
    return a;
}

clc::FirstContactExt release1(std::uint8_t maxConns, std::uint8_t maxLinks)
{
    clc::FirstContactExt f;
    f.v2Direct = true;
    f.release = clc::kRelease1;
    f.maxConns = maxConns;
    f.maxLinks = maxLinks;
    return f;
}

TEST(SmcrTerms, TheServerOffersTheSmallerLimitsAndTheCommonFeatures)
{
    clc::Choice choice;
    choice.release = clc::kRelease1;
    const V2Terms t = serverTerms(proposal(16, 3, 0xffff), choice, kOurs);
    EXPECT_TRUE(t.fce.v2Direct);
    EXPECT_EQ(t.fce.maxConns, 16);
    EXPECT_EQ(t.fce.maxLinks, 2);
    EXPECT_EQ(t.fce.featureMask, clc::kFeatureEmulatedIsm);
    EXPECT_EQ(t.fce.hostname, kOurs.hostname);

    choice.release = clc::kRelease0; // no limits before release 1
    const V2Terms r0 = serverTerms(proposal(16, 3, 0xffff), choice, kOurs);
    EXPECT_EQ(r0.fce.maxConns, 0);
    EXPECT_EQ(r0.fce.maxLinks, 0);
    EXPECT_EQ(r0.fce.featureMask, 0);
}

TEST(SmcrTerms, TheClientDeclinesWhatLinuxDeclines)
{
    auto reason = [](clc::FirstContactExt f) {
        auto t = clientTerms(accept(f), kOurs);
        return std::holds_alternative<clc::DeclineCode>(t) ? std::get<clc::DeclineCode>(t)
                                                           : clc::DeclineCode{};
    };
    clc::FirstContactExt indirect = release1(255, 2);
    indirect.v2Direct = false;
    EXPECT_EQ(reason(indirect), clc::DeclineCode::NoIndirect);
    clc::FirstContactExt later = release1(255, 2);
    later.release = 2;
    EXPECT_EQ(reason(later), clc::DeclineCode::VersMismat);
    EXPECT_EQ(reason(release1(15, 2)), clc::DeclineCode::MaxConnErr);
    EXPECT_EQ(reason(release1(255, 0)), clc::DeclineCode::MaxLinkErr);
    EXPECT_EQ(reason(release1(255, 3)), clc::DeclineCode::MaxLinkErr); // more than ours
}

TEST(SmcrTerms, TheClientEchoesWhatItAcceptsAndTheServerChecksTheEcho)
{
    clc::FirstContactExt offered = release1(64, 1);
    offered.featureMask = 0xffff;
    offered.vendorOptions = 7;
    const auto t = clientTerms(accept(offered), kOurs);
    ASSERT_TRUE(std::holds_alternative<V2Terms>(t));
    const V2Terms& echo = std::get<V2Terms>(t);
    EXPECT_EQ(echo.eid[0], 'E');
    EXPECT_EQ(echo.fce.maxConns, 64);
    EXPECT_EQ(echo.fce.maxLinks, 1);
    EXPECT_EQ(echo.fce.featureMask, clc::kFeatureEmulatedIsm);
    EXPECT_EQ(echo.fce.vendorOptions, 0u);
    EXPECT_EQ(echo.fce.hostname, kOurs.hostname);
    EXPECT_EQ(echoMismatch(offered, echo.fce), std::nullopt);

    clc::FirstContactExt changed = echo.fce;
    changed.maxConns = 65;
    EXPECT_EQ(echoMismatch(offered, changed), clc::DeclineCode::MaxConnErr);
    changed = echo.fce;
    changed.maxLinks = 2;
    EXPECT_EQ(echoMismatch(offered, changed), clc::DeclineCode::MaxLinkErr);
    changed = echo.fce;
    changed.release = clc::kRelease0;
    EXPECT_EQ(echoMismatch(offered, changed), clc::DeclineCode::ReleaseErr);
}

TEST(SmcrTerms, TheGroupTakesRelease1sLimitsElseItsDefaults)
{
    EXPECT_EQ(groupTerms(std::nullopt).llcVersion, 1);
    V2Terms r0;
    r0.fce.release = clc::kRelease0;
    const GroupTerms g0 = groupTerms(r0);
    EXPECT_EQ(g0.llcVersion, 2);
    EXPECT_EQ(g0.maxConns, 0u);
    V2Terms r1;
    r1.fce = release1(32, 1);
    const GroupTerms g1 = groupTerms(r1);
    EXPECT_EQ(g1.llcVersion, 2);
    EXPECT_EQ(g1.maxConns, 32u);
    EXPECT_EQ(g1.maxLinks, 1u);
}

} // namespace
} // namespace smc::net
