// SPDX-License-Identifier: MIT
// The LLC codec against Linux's byte layouts, round trips, and malformed input.
#include "smc/llc/llc_messages.h"

#include <cstring>

#include <gtest/gtest.h>

namespace smc::llc
{
namespace
{

std::vector<std::byte> bytes(std::initializer_list<std::pair<std::size_t, std::uint8_t>> set,
                             std::size_t size = kMessageSize)
{
    std::vector<std::byte> b(size);
    for (auto [offset, value] : set)
        b[offset] = std::byte{value};
    return b;
}

Message roundTrip(const Message& m)
{
    const std::vector<std::byte> wire = encode(m);
    Result<Message> back = decode(wire);
    EXPECT_TRUE(back) << toString(m.type()) << ": " << back.error().message();
    return back ? *back : Message{};
}

TEST(LlcCodec, ConfirmLinkMatchesLinuxLayout)
{
    Message m{1, false, ConfirmLink{{1, 2, 3, 4, 5, 6}, {}, 0x123456, 7, {9, 8, 7, 6}, 2, 255}};
    std::get<ConfirmLink>(m.body).gid[15] = 0xaa;
    const std::vector<std::byte> wire = encode(m);
    const std::vector<std::byte> golden =
        bytes({{0, 0x01}, {1, 44}, {3, 0x03},  {4, 1},     {5, 2},     {6, 3},     {7, 4},
               {8, 5},    {9, 6},  {25, 0xaa}, {26, 0x12}, {27, 0x34}, {28, 0x56}, {29, 7},
               {30, 9},   {31, 8}, {32, 7},    {33, 6},    {34, 2},    {35, 255}});
    EXPECT_EQ(wire, golden);
    EXPECT_EQ(roundTrip(m), m);
}

TEST(LlcCodec, DeleteLinkReasonIsBigEndianAtAnOddOffset)
{
    Message m{1, true, DeleteLink{true, true, 0, DeleteReason::ProgramTerminated}};
    const std::vector<std::byte> wire = encode(m);
    EXPECT_EQ(wire, bytes({{0, 0x04}, {1, 44}, {3, 0x80 | 0x40 | 0x20}, {5, 0x00}, {6, 0x03}}));
    EXPECT_EQ(roundTrip(m), m);
}

TEST(LlcCodec, ConfirmRkeyPacksThirteenByteEntries)
{
    ConfirmRkey c{false,
                  false,
                  0x11223344,
                  0x0102030405060708ull,
                  {{2, 0xaabbccdd, 0x1000}, {3, 0x55667788, 0x2000}}};
    Message m{1, false, c};
    const std::vector<std::byte> wire = encode(m);
    EXPECT_EQ(std::to_integer<int>(wire[4]), 2);
    EXPECT_EQ(std::to_integer<int>(wire[5]), 0x11);
    EXPECT_EQ(std::to_integer<int>(wire[16]), 0x08);
    EXPECT_EQ(std::to_integer<int>(wire[17]), 2);    // link id of entry 1
    EXPECT_EQ(std::to_integer<int>(wire[18]), 0xaa); // its rkey, big-endian
    EXPECT_EQ(std::to_integer<int>(wire[30]), 3);    // link id of entry 2
    EXPECT_EQ(std::to_integer<int>(wire[42]), 0x00); // ..its vaddr ends at 42
    EXPECT_EQ(std::to_integer<int>(wire[41]), 0x20);
    EXPECT_EQ(roundTrip(m), m);
}

TEST(LlcCodec, AddLinkV2ExtensionWithHostOrderLengthAndCount)
{
    AddLink a;
    a.mac = {0xa, 0xb, 0xc, 0xd, 0xe, 0xf};
    a.gid[0] = 0xfe;
    a.qpn = 0xabcdef;
    a.linkId = 2;
    a.mtu = 3;
    a.psn = 0x010203;
    a.ext = AddLinkV2Ext{true, {}, {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}};
    Message m{2, false, a};
    const std::vector<std::byte> wire = encode(m);
    ASSERT_EQ(wire.size(), 44u + 28 + 3 * 16);
    EXPECT_EQ(std::to_integer<int>(wire[0]), 0x22);
    std::uint16_t length;
    std::memcpy(&length, wire.data() + 1, 2);
    EXPECT_EQ(length, wire.size()) << "length_v2 in host order, as Linux writes it";
    EXPECT_EQ(std::to_integer<int>(wire[32]), 3);
    EXPECT_EQ(std::to_integer<int>(wire[44]), 0x80) << "v2_direct";
    std::uint16_t count;
    std::memcpy(&count, wire.data() + 44 + 26, 2);
    EXPECT_EQ(count, 3);
    EXPECT_EQ(roundTrip(m), m);
}

TEST(LlcCodec, EveryTypeRoundTrips)
{
    const std::vector<Message> all = {
        {1, true, ConfirmLink{{}, {}, 1, 1, {}, 2, 0}},
        {2, false, ConfirmLink{{}, {}, 5, 3, {1, 2, 3, 4}, 2, 16}},
        {1, false, AddLink{false, 0, {}, {}, 77, 2, 5, 99, std::nullopt}},
        {1, true, AddLink{true, 1, {}, {}, 0, 2, 0, 0, std::nullopt}},
        {1, false, AddLinkCont{2, 3, {{1, 2, 3}, {4, 5, 6}}}},
        {1, true, AddLinkCont{2, 1, {{7, 8, 9}}}},
        {1, false, DeleteLink{false, true, 2, DeleteReason::LostPath}},
        {2, true, DeleteLink{false, false, 9, DeleteReason::UnknownLink}},
        {2, false, ReqAddLink{{Gid{1}, Gid{2}}}},
        {1, false, ConfirmRkey{false, false, 5, 6, {}}},
        {2, true, ConfirmRkey{true, true, 5, 6, {{1, 2, 3}}}},
        {1, false, ConfirmRkeyCont{}},
        {1, false, TestLink{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}},
        {2, true, TestLink{}},
        {1, false, DeleteRkey{false, 0, 0, {1, 2, 3, 4, 5, 6, 7, 8}}},
        {1, true, DeleteRkey{true, 0x40, 0, {9}}},
        {2, false, DeleteRkey{false, 0, 0, std::vector<std::uint32_t>(30, 7)}},
        {2, true, DeleteRkey{true, 0, 4, {}}},
        {2, true, DeleteRkey{true, 0, 40, {}, 40}}, // byte 4: the request's count
    };
    for (const Message& m : all)
        EXPECT_EQ(roundTrip(m), m) << toString(m.type()) << " v" << int(m.version);
}

struct Bad {
    const char* what;
    std::vector<std::byte> wire;
    DecodeError expected;
};

TEST(LlcCodec, MalformedInputGetsAReason)
{
    auto valid = [] { return encode({1, false, TestLink{}}); };
    auto with = [&](std::vector<std::byte> b, std::size_t at, std::uint8_t v) {
        b[at] = std::byte{v};
        return b;
    };
    std::vector<std::byte> v2 = encode({2, false, TestLink{}});
    std::vector<Bad> cases = {
        {"short", std::vector<std::byte>(43), DecodeError::TooShort},
        {"version 3", with(valid(), 0, 0x37), DecodeError::BadVersion},
        {"type 0", with(valid(), 0, 0x00), DecodeError::UnknownType},
        {"type 10", with(valid(), 0, 0x0a), DecodeError::UnknownType},
        {"CDC byte", with(valid(), 0, 0xfe), DecodeError::BadVersion},
        {"v1 length 43", with(valid(), 1, 43), DecodeError::BadLength},
        {"reserved flag", with(valid(), 3, 0x40), DecodeError::ReservedFlags},
        {"reserved nibble", with(valid(), 2, 0x10), DecodeError::ReservedBits},
        {"reject reason off ADD_LINK", with(valid(), 2, 0x01), DecodeError::ReservedBits},
        {"no eyecatcher", with(encode({1, false, ConfirmLink{}}), 3, 0x00),
         DecodeError::MissingEyecatcherFlags},
        {"3 extra rtokens", with(encode({1, false, ConfirmRkey{}}), 4, 3), DecodeError::BadCount},
        {"0 rkeys to delete", with(encode({1, false, DeleteRkey{false, 0, 0, {1}}}), 4, 0),
         DecodeError::BadCount},
        {"9 rkeys in v1", with(encode({1, false, DeleteRkey{false, 0, 0, {1}}}), 4, 9),
         DecodeError::BadCount},
        {"v2 length 43", with(v2, 1, 43), DecodeError::BadLength},
        {"v2 length beyond buffer", with(v2, 1, 60), DecodeError::TooShort},
        {"ADD_LINK_CONT in v2", with(v2, 0, 0x23), DecodeError::V1Only},
        {"REQ_ADD_LINK in v1", with(valid(), 0, 0x05), DecodeError::V2Only},
        {"ADD_LINK mtu high nibble", with(encode({1, false, AddLink{}}), 32, 0x13),
         DecodeError::ReservedBits},
    };
    // A v2 ADD_LINK whose rkey count does not match its length.
    AddLink a;
    a.ext = AddLinkV2Ext{false, {}, {{1, 2, 3}}};
    std::vector<std::byte> ext = encode({2, false, a});
    ext[44 + 26] = std::byte{2};
    cases.push_back({"ext count vs length", ext, DecodeError::BadLength});

    for (const Bad& c : cases) {
        Result<Message> r = decode(c.wire);
        ASSERT_FALSE(r) << c.what;
        EXPECT_EQ(r.error(), c.expected) << c.what << ": " << r.error().message();
        EXPECT_FALSE(r.error().message().empty());
    }
}

} // namespace
} // namespace smc::llc
