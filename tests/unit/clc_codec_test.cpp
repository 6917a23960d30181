// SPDX-License-Identifier: MIT
// The CLC codec against hand-built Linux byte layouts; round trips; malformed input.
#include "smc/clc/clc_messages.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "tests/libtest/clc_golden.h"

namespace smc::clc
{
namespace
{

using smc::testing::clcGoldens;
using smc::testing::Golden;
using Bytes = std::vector<std::byte>;

std::error_code decodeError(const Bytes& b)
{
    Result<Message> m = decode(b);
    return m ? std::error_code{} : m.error();
}

void setBe16(Bytes& b, std::size_t o, std::size_t v)
{
    b[o] = std::byte(v >> 8 & 0xff);
    b[o + 1] = std::byte(v & 0xff);
}

class GoldenTest : public ::testing::TestWithParam<Golden>
{
};

TEST_P(GoldenTest, EncodeWritesExactlyTheBytes)
{
    const Golden& g = GetParam();
    Result<Bytes> wire = encode(g.message);
    ASSERT_TRUE(wire) << wire.error().message();
    EXPECT_EQ(*wire, g.bytes);
}

TEST_P(GoldenTest, DecodeGivesBackEveryField)
{
    const Golden& g = GetParam();
    Result<Message> m = decode(g.bytes);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(*m, g.message); // every field: the structs compare member by member
    Result<std::size_t> size = messageSize(g.bytes);
    ASSERT_TRUE(size);
    EXPECT_EQ(*size, g.bytes.size());
}

TEST_P(GoldenTest, EveryTruncationIsRejected)
{
    const Golden& g = GetParam();
    for (std::size_t n = 0; n < g.bytes.size(); ++n) {
        const Bytes cut(g.bytes.begin(), g.bytes.begin() + static_cast<std::ptrdiff_t>(n));
        EXPECT_EQ(decodeError(cut), ClcErrc::Truncated) << n;
        // The same bytes with a length field that agrees: still not a message.
        if (n >= kHeaderSize) {
            Bytes consistent = cut;
            setBe16(consistent, 5, n);
            EXPECT_FALSE(decode(consistent)) << n;
        }
    }
}

TEST_P(GoldenTest, TrailingBytesAreRejected)
{
    Bytes b = GetParam().bytes;
    b.push_back(std::byte{0});
    EXPECT_EQ(decodeError(b), ClcErrc::TrailingBytes);
}

TEST_P(GoldenTest, WrongEyecatcherOrVersionOrType)
{
    const Golden& g = GetParam();
    Bytes b = g.bytes;
    b[3] = std::byte{0xd8}; // neither R nor D
    EXPECT_EQ(decodeError(b), ClcErrc::BadEyecatcher);
    EXPECT_EQ(messageSize(b).error(), ClcErrc::BadEyecatcher);
    b = g.bytes;
    b[7] &= std::byte{0x0f}; // version 0
    EXPECT_EQ(decodeError(b), ClcErrc::BadVersion);
    for (std::uint8_t type : {0, 5, 0xff}) {
        b = g.bytes;
        b[4] = std::byte{type};
        EXPECT_EQ(decodeError(b), ClcErrc::UnknownType);
    }
}

TEST_P(GoldenTest, TrailerIsCheckedExceptInDecline)
{
    const Golden& g = GetParam();
    Bytes b = g.bytes;
    b.back() = std::byte{0x40};
    if (typeOf(g.message) == Type::Decline)
        EXPECT_TRUE(decode(b)); // as Linux
    else
        EXPECT_EQ(decodeError(b), ClcErrc::BadTrailer);
    // Either eyecatcher is accepted at either end, as Linux does.
    b = g.bytes;
    b[3] = b[3] == std::byte{0xd9} ? std::byte{0xc4} : std::byte{0xd9};
    b[b.size() - 1] = b[3];
    Result<Message> m = decode(b);
    ASSERT_TRUE(m);
    EXPECT_EQ(*m, g.message);
}

TEST_P(GoldenTest, LaterVersionsReadAsV2)
{
    const Golden& g = GetParam();
    Result<Message> m = decode(g.bytes);
    ASSERT_TRUE(m);
    if (std::visit([](const auto& x) { return x.version; }, *m) < kVersion2)
        return;
    Bytes b = g.bytes;
    b[7] = std::byte((std::to_integer<int>(b[7]) & 0x0f) | 0x30); // version 3
    Result<Message> v3 = decode(b);
    ASSERT_TRUE(v3) << v3.error().message();
    EXPECT_EQ(std::visit([](const auto& x) { return x.version; }, *v3), 3);
    Result<Bytes> again = encode(*v3);
    ASSERT_TRUE(again);
    EXPECT_EQ(*again, b);
}

std::string goldenName(const ::testing::TestParamInfo<Golden>& param)
{
    std::string n = param.param.name;
    std::replace(n.begin(), n.end(), '-', '_');
    return n;
}

INSTANTIATE_TEST_SUITE_P(Clc, GoldenTest, ::testing::ValuesIn(clcGoldens()), goldenName);

Bytes goldenBytes(const char* name)
{
    for (const Golden& g : clcGoldens())
        if (g.name == name)
            return g.bytes;
    ADD_FAILURE() << name;
    return {};
}

TEST(ClcCodec, LengthRulesOfAcceptConfirmAndDecline)
{
    Bytes b = goldenBytes("accept-smcr-v1");
    b.insert(b.end() - 4, std::byte{0}); // v1 has one size only
    setBe16(b, 5, b.size());
    EXPECT_EQ(decodeError(b), ClcErrc::BadLength);

    b = goldenBytes("decline-v1");
    b[7] = std::byte{0x20}; // a 28-byte decline calling itself v2 (Linux 5.10-5.15)
    EXPECT_EQ(decodeError(b), ClcErrc::BadLength);

    b = goldenBytes("accept-smcd-v2");
    b.resize(kSmcdAcceptConfirmSizeV2); // first contact, but no room for the extension
    setBe16(b, 5, b.size());
    EXPECT_EQ(decodeError(b), ClcErrc::BadLength);
    b.resize(kSmcdAcceptConfirmSizeV2 - 1);
    setBe16(b, 5, b.size());
    EXPECT_EQ(decodeError(b), ClcErrc::BadLength);

    b = goldenBytes("confirm-smcr-v2");
    b[156] = std::byte{3}; // a third GID that is not there
    EXPECT_EQ(decodeError(b), ClcErrc::BadLength);
}

TEST(ClcCodec, V2AcceptConfirmMayCarryMoreBeforeTheTrailer)
{
    // Linux reads v2 ACCEPT/CONFIRM as "at least": a later release may add fields.
    Bytes b = goldenBytes("accept-smcd-v2");
    b.insert(b.end() - 4, 12, std::byte{0x5a});
    setBe16(b, 5, b.size());
    Result<Message> m = decode(b);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(*m, decode(goldenBytes("accept-smcd-v2")).value());
}

TEST(ClcCodec, AcceptNeedsAnSmcrOrSmcdPath)
{
    Bytes b = goldenBytes("accept-smcr-v1");
    b[7] = std::byte{0x1a}; // typev1 N
    EXPECT_EQ(decodeError(b), ClcErrc::BadSmcType);
    EXPECT_EQ(messageSize(b).error(), ClcErrc::BadSmcType);
}

TEST(ClcCodec, ReservedFieldsAreIgnored)
{
    Bytes b = goldenBytes("proposal-v2-linux");
    for (std::size_t o : {52, 60, 79, 85, 90, 92, 116, 192}) // OUI, reserved, ext reserved
        b[o] = std::byte{0xee};
    Result<Message> m = decode(b);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(*m, decode(goldenBytes("proposal-v2-linux")).value());
}

TEST(ClcCodec, ProposalOffsetsAndCounts)
{
    const Bytes linux = goldenBytes("proposal-v2-linux");
    Bytes b = linux;
    setBe16(b, 38, 41); // IP area beyond the SMC-D area
    EXPECT_EQ(decodeError(b), ClcErrc::BadOffset);
    b = linux;
    setBe16(b, 38, 0); // v1 offered, but the prefix would alias the SMC-D area
    EXPECT_EQ(decodeError(b), ClcErrc::BadOffset);
    b = linux;
    setBe16(b, 50, 0); // SMC-D v2 offered without a v2 extension
    EXPECT_EQ(decodeError(b), ClcErrc::BadOffset);
    b = linux;
    setBe16(b, 94, 0); // no SMC-Dv2 extension
    EXPECT_EQ(decodeError(b), ClcErrc::BadOffset);
    b = linux;
    b[87] = std::byte{9}; // IPv6 prefixes
    EXPECT_EQ(decodeError(b), ClcErrc::BadCount);
    b = linux;
    b[88] = std::byte{9}; // EIDs
    EXPECT_EQ(decodeError(b), ClcErrc::BadCount);
    b = linux;
    b[89] = std::byte{9}; // ISM entries
    EXPECT_EQ(decodeError(b), ClcErrc::BadCount);
    b = linux;
    b[89] = std::byte{3}; // one entry more than the length holds
    EXPECT_EQ(decodeError(b), ClcErrc::BadLength);

    b = goldenBytes("proposal-v1-ipv4");
    b[7] = std::byte{0x12}; // v1 offering nothing
    EXPECT_EQ(decodeError(b), ClcErrc::BadSmcType);
    b[7] = std::byte{0x11}; // v1 SMC-D needs the SMC-D area (iparea_offset 40)
    EXPECT_EQ(decodeError(b), ClcErrc::BadOffset);
    b = goldenBytes("proposal-v1-ipv6");
    b[47] = std::byte{1}; // one prefix less than the length says
    EXPECT_EQ(decodeError(b), ClcErrc::BadLength);
}

TEST(ClcCodec, V1ProposalWithSmcdArea)
{
    // Linux 4.19-5.9 offered SMC-Dv1 with the SMC-D area between base and prefixes.
    Proposal p;
    p.version = 1;
    p.typeV1 = SmcType::Both;
    p.gid = testing::golden::kGid;
    p.ismV1 = {0x0102030405060708, 0x0123};
    p.prefixes.ipv4Subnet = {10, 0, 0, 0};
    p.prefixes.ipv4PrefixLength = 8;
    Result<Bytes> b = encode(p);
    ASSERT_TRUE(b);
    ASSERT_EQ(b->size(), 92u);
    EXPECT_EQ(std::to_integer<int>((*b)[39]), 40);   // iparea_offset
    EXPECT_EQ(std::to_integer<int>((*b)[49]), 0x23); // CHID low byte
    EXPECT_EQ(std::to_integer<int>((*b)[80]), 10);   // prefix after the SMC-D area
    EXPECT_EQ(decode(*b).value(), Message{p});
}

// The PROPOSAL Linux 6.12 sent us (clc_golden.h): decoded, then encoded again to the same
// bytes.
TEST(ClcCodec, TheProposalOfLinux612AsCaptured)
{
    const Bytes wire = smc::testing::linux612Proposal();
    ASSERT_EQ(wire.size(), 156u);
    Result<Message> m = decode(wire);
    ASSERT_TRUE(m) << m.error().message();
    const auto* p = std::get_if<Proposal>(&*m);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->version, kVersion2);
    EXPECT_EQ(p->typeV1, SmcType::None);
    EXPECT_EQ(p->typeV2, SmcType::SmcR);
    EXPECT_EQ(p->systemId, SystemId{}); // the kernel leaves the v1 fields zero
    EXPECT_EQ(p->mac, Mac{});
    const Gid gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
    EXPECT_EQ(p->v2.roceV2Gid, gid);
    ASSERT_EQ(p->v2.userEids.size(), 1u);
    EXPECT_EQ(p->v2.userEids[0], *makeEid("SMC-CORE-LOOPBACK"));
    EXPECT_EQ(p->v2.release, kRelease1);
    EXPECT_EQ(p->v2.maxConns, 255);
    EXPECT_EQ(p->v2.maxLinks, 2);
    EXPECT_EQ(p->v2.featureMask, 1);
    Result<std::vector<std::byte>> again = encode(*m);
    ASSERT_TRUE(again);
    EXPECT_EQ(*again, wire);
}

TEST(ClcCodec, MessageSizeFromTheFirstBytes)
{
    const Bytes b = goldenBytes("proposal-v2-linux");
    for (std::size_t n = 0; n < kHeaderSize; ++n)
        EXPECT_EQ(messageSize(std::span(b).first(n)).value(), kHeaderSize) << n;
    EXPECT_EQ(messageSize(std::span(b).first(kHeaderSize)).value(), 232u);
    // Not CLC: rejected at the first byte that shows it.
    const std::string http = "GET / HTTP/1.1";
    const auto* h = reinterpret_cast<const std::byte*>(http.data());
    EXPECT_EQ(messageSize(std::span(h, 1)).error(), ClcErrc::BadEyecatcher);
    Bytes smcx = {std::byte{0xe2}, std::byte{0xd4}, std::byte{0xc3}, std::byte{0xc5}};
    EXPECT_EQ(messageSize(smcx).error(), ClcErrc::BadEyecatcher);
    smcx[3] = std::byte{0xc4};
    smcx.push_back(std::byte{9});
    EXPECT_EQ(messageSize(smcx).error(), ClcErrc::UnknownType);
    Bytes decl = goldenBytes("decline-v2-syncerr");
    setBe16(decl, 5, 28); // v2 DECLINE with the v1 size: known from the header alone
    EXPECT_EQ(messageSize(decl).error(), ClcErrc::BadLength);
    Bytes big = b;
    setBe16(big, 5, kMaxProposalSize + 1); // more than every area full
    EXPECT_EQ(messageSize(big).error(), ClcErrc::BadLength);
}

TEST(ClcCodec, EncodeRefusesWhatCannotBeOnTheWire)
{
    Proposal p = std::get<Proposal>(testing::golden::proposalV1Ipv4().message);
    p.typeV2 = SmcType::SmcD; // v2 offers need a v2 header
    EXPECT_EQ(encode(p).error(), ClcErrc::BadSmcType);
    p.typeV2 = SmcType::None;
    p.typeV1 = SmcType::None;
    EXPECT_EQ(encode(p).error(), ClcErrc::BadSmcType);
    p.typeV1 = SmcType::SmcR;
    p.prefixes.ipv6.resize(kMaxIpv6Prefixes + 1);
    EXPECT_EQ(encode(p).error(), ClcErrc::BadCount);
    p.prefixes.ipv6.clear();
    p.version = 0;
    EXPECT_EQ(encode(p).error(), ClcErrc::BadVersion);
    p.version = 16;
    EXPECT_EQ(encode(p).error(), ClcErrc::BadVersion);

    Proposal lo = std::get<Proposal>(testing::golden::proposalV2LoopbackOnly().message);
    lo.smcdV2.entries.resize(kMaxIsmV2Entries + 1);
    EXPECT_EQ(encode(lo).error(), ClcErrc::BadCount);

    Accept a = std::get<Accept>(testing::golden::acceptSmcrV1().message);
    std::get<SmcrAcceptConfirm>(a.path).qpn = 0x1000000;
    EXPECT_EQ(encode(a).error(), ClcErrc::FieldRange);
    EXPECT_EQ(encode(a).error(), std::errc::invalid_argument);
    std::get<SmcrAcceptConfirm>(a.path).qpn = 1;
    std::get<SmcrAcceptConfirm>(a.path).rmbeSize = 16;
    EXPECT_EQ(encode(a).error(), ClcErrc::FieldRange);

    Decline d = makeDecline(DeclineCode::Mem, 2, {});
    d.osType = 16;
    EXPECT_EQ(encode(d).error(), ClcErrc::FieldRange);
}

TEST(ClcCodec, RoundTripsBeyondTheGoldens)
{
    Proposal both = std::get<Proposal>(testing::golden::proposalV2Linux().message);
    both.typeV1 = SmcType::Both;
    both.typeV2 = SmcType::Both;
    both.ismV1 = {0xabcdef, 0x0042};
    both.prefixes.ipv6.assign(kMaxIpv6Prefixes, Ipv6Prefix{{0x20, 0x01}, 32});
    both.v2.userEids.assign(kMaxUeids, testing::golden::kUeid);
    both.v2.seid = true;
    both.v2.roceV2Gid[15] = 7;
    both.v2.maxConns = 255;
    both.v2.maxLinks = 3;
    both.smcdV2.systemEid = *makeEid("IBM-SYSZ-ISMSEID00000000");
    both.smcdV2.entries.assign(kMaxIsmV2Entries, IsmGidChid{5, 0x0101});
    Result<Bytes> b = encode(both);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->size(), kMaxProposalSize);
    EXPECT_EQ(decode(*b).value(), Message{both});

    Decline d = makeDecline(DeclineCode{0x12345678}, 3, testing::golden::kSystemId);
    d.moreDiagnosis = {1, 2, 3, 4};
    b = encode(d);
    ASSERT_TRUE(b);
    EXPECT_EQ(decode(*b).value(), Message{d}); // an unknown code survives
    EXPECT_STREQ(toString(d.diagnosis), "?");
}

TEST(ClcCodec, Helpers)
{
    EXPECT_TRUE(makeEid("SMC-BPFTEST-UEID"));
    EXPECT_TRUE(makeEid("A.1-B"));
    EXPECT_FALSE(makeEid(""));
    EXPECT_FALSE(makeEid("-LEADING"));
    EXPECT_FALSE(makeEid("lower"));
    EXPECT_FALSE(makeEid("HAS SPACE"));
    EXPECT_FALSE(makeEid(std::string(33, 'A')));
    EXPECT_EQ(makeEid("X").value()[1], ' ');
    EXPECT_EQ(makeHostname(std::string(40, 'h'))[31], 'h');
    EXPECT_TRUE(isEmulatedChid(kLoopbackChid));
    EXPECT_TRUE(isEmulatedChid(0xff00));
    EXPECT_FALSE(isEmulatedChid(0xfeff));
    EXPECT_STREQ(toString(DeclineCode::NoSmcdDev), "NOSMCDDEV");
    EXPECT_STREQ(toString(Type::Confirm), "CONFIRM");
    const Decline d = makeDecline(DeclineCode::SyncErr, 1, {});
    EXPECT_TRUE(d.outOfSync);
    EXPECT_EQ(d.osType, 0);
}

TEST(ClcCodec, ErrorCategory)
{
    const std::error_code e = ClcErrc::BadOffset;
    EXPECT_STREQ(e.category().name(), "smc.clc");
    EXPECT_EQ(e, std::errc::protocol_error); // Linux: -EPROTO, a hard error
    EXPECT_NE(e, ClcErrc::BadCount);
    for (int v = 1; v <= static_cast<int>(ClcErrc::FieldRange); ++v)
        EXPECT_EQ(std::error_code(v, clcCategory()).message().find("unknown CLC error"),
                  std::string::npos);
    EXPECT_NE(std::error_code(99, clcCategory()).message().find("unknown CLC error"),
              std::string::npos);
    EXPECT_NE(std::error_code(99, clcCategory()), std::errc::protocol_error);
}

} // namespace
} // namespace smc::clc
