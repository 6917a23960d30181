// SPDX-License-Identifier: MIT
// LLC messages (SMC-R link layer control): their types, fields and the codec.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "base/result.h"
#include "base/wire_ids.h"

namespace smc::llc
{

// Every LLC message travels in a 44-byte work request; v2 bodies may be
// longer (up to 8 KiB) and say so in the header's length_v2.
inline constexpr std::size_t kMessageSize = 44;
inline constexpr std::size_t kMaxV2Size = 8192;
inline constexpr std::size_t kMaxAddLinkRkeys = 255; // in a v2 ADD_LINK's extension

enum class Type : std::uint8_t {
    ConfirmLink = 0x01,
    AddLink = 0x02,
    AddLinkCont = 0x03,
    DeleteLink = 0x04,
    ReqAddLink = 0x05, // v2 only
    ConfirmRkey = 0x06,
    TestLink = 0x07,
    ConfirmRkeyCont = 0x08, // v1; Linux never sends it and ignores it
    DeleteRkey = 0x09,
};
const char* toString(Type type) noexcept;

using smc::Gid;
using smc::Mac;

// Flag bits of byte 3.
inline constexpr std::uint8_t kFlagResponse = 0x80;
inline constexpr std::uint8_t kFlagAddLinkReject = 0x40;
inline constexpr std::uint8_t kFlagDeleteAll = 0x40;
inline constexpr std::uint8_t kFlagDeleteOrderly = 0x20;
inline constexpr std::uint8_t kFlagRkeyNegative = 0x20;
inline constexpr std::uint8_t kFlagRkeyRetry = 0x10;
inline constexpr std::uint8_t kFlagNoRmbeEyecatcher = 0x03;

// DELETE_LINK reason codes.
enum class DeleteReason : std::uint32_t {
    None = 0,
    LostPath = 0x00010000,
    OperatorTerminated = 0x00020000,
    ProgramTerminated = 0x00030000,
    ProtocolViolation = 0x00040000,
    NoAsymmetricNeeded = 0x00050000,
    UnknownLink = 0x00100000,      // response only
    UnknownLinkGroup = 0x00200000, // response only
};

// An RMB's rkey on an existing link and its rtoken on a new one.
struct RkeyPair {
    std::uint32_t rkey = 0;    // on the link the message travels on
    std::uint32_t newRkey = 0; // on the new link
    std::uint64_t newVaddr = 0;
    friend bool operator==(const RkeyPair&, const RkeyPair&) = default;
};

struct ConfirmLink {
    Mac mac{};
    Gid gid{};
    std::uint32_t qpn = 0; // 24 bits
    std::uint8_t linkId = 0;
    std::array<std::uint8_t, 4> linkUid{};
    std::uint8_t maxLinks = 0;
    std::uint8_t maxConns = 0;
    friend bool operator==(const ConfirmLink&, const ConfirmLink&) = default;
};

struct AddLinkV2Ext {
    bool direct = false;
    Gid clientTargetGid{};
    std::vector<RkeyPair> rkeys; // at most kMaxAddLinkRkeys
    friend bool operator==(const AddLinkV2Ext&, const AddLinkV2Ext&) = default;
};

struct AddLink {
    bool reject = false;
    std::uint8_t rejectReason = 0; // v1 only (4 bits); 1 = no alternate path
    Mac mac{};
    Gid gid{};
    std::uint32_t qpn = 0;
    std::uint8_t linkId = 0;
    std::uint8_t mtu = 0;            // IB MTU enum, 4 bits
    std::uint32_t psn = 0;           // 24 bits
    std::optional<AddLinkV2Ext> ext; // v2 requests carry it
    friend bool operator==(const AddLink&, const AddLink&) = default;
};

struct AddLinkCont {
    std::uint8_t linkId = 0;
    std::uint8_t remaining = 0;  // rkeys the sender still has, this message's included
    std::vector<RkeyPair> rkeys; // at most 2
    friend bool operator==(const AddLinkCont&, const AddLinkCont&) = default;
};

struct DeleteLink {
    bool all = false;
    bool orderly = false;
    std::uint8_t linkId = 0;
    DeleteReason reason = DeleteReason::None;
    friend bool operator==(const DeleteLink&, const DeleteLink&) = default;
};

struct ReqAddLink {
    std::vector<Gid> gids; // the client's candidate devices
    friend bool operator==(const ReqAddLink&, const ReqAddLink&) = default;
};

struct RtokenEntry {
    std::uint8_t linkId = 0;
    std::uint32_t rkey = 0;
    std::uint64_t vaddr = 0;
    friend bool operator==(const RtokenEntry&, const RtokenEntry&) = default;
};

struct ConfirmRkey {
    bool negative = false;
    bool retry = false;
    std::uint32_t rkey = 0; // valid on the link the message travels on
    std::uint64_t vaddr = 0;
    std::vector<RtokenEntry> others; // the RMB on the other links, at most 2
    friend bool operator==(const ConfirmRkey&, const ConfirmRkey&) = default;
};

struct ConfirmRkeyCont {
    friend bool operator==(const ConfirmRkeyCont&, const ConfirmRkeyCont&) = default;
};

struct TestLink {
    std::array<std::uint8_t, 16> userData{};
    friend bool operator==(const TestLink&, const TestLink&) = default;
};

struct DeleteRkey {
    bool negative = false;
    std::uint8_t errorMask = 0;       // v1 response: bit (7 - i) = rkey i unknown
    std::uint8_t invalidCount = 0;    // v2 response: how many were unknown
    std::vector<std::uint32_t> rkeys; // v1: 1..8, v2: 1..255 (a v2 response carries none)
    std::uint8_t requested = 0;       // v2 response: the request's count (byte 4, as Linux)
    friend bool operator==(const DeleteRkey&, const DeleteRkey&) = default;
};

using Body = std::variant<ConfirmLink, AddLink, AddLinkCont, DeleteLink, ReqAddLink, ConfirmRkey,
                          ConfirmRkeyCont, TestLink, DeleteRkey>;

struct Message {
    std::uint8_t version = 1; // 1 or 2
    bool response = false;
    Body body;

    Type type() const noexcept;
    friend bool operator==(const Message&, const Message&) = default;
};

// Why a byte string is not an LLC message.
enum class DecodeError {
    TooShort = 1,
    BadVersion,
    UnknownType,
    BadLength,
    ReservedFlags,
    ReservedBits,
    BadCount,
    MissingEyecatcherFlags,
    V2Only,
    V1Only,
};
const std::error_category& decodeCategory() noexcept;
inline std::error_code make_error_code(DecodeError e) noexcept
{
    return {static_cast<int>(e), decodeCategory()};
}

// Read one message as Linux writes it (the bytes of one receive completion).
Result<Message> decode(std::span<const std::byte> bytes);
// Write one message byte for byte as Linux does: 44 bytes, or the v2 length.
std::vector<std::byte> encode(const Message& message);

} // namespace smc::llc

template <> struct std::is_error_code_enum<smc::llc::DecodeError> : std::true_type {
};
