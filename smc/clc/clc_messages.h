// SPDX-License-Identifier: MIT
// CLC messages (the SMC handshake over TCP): constants, fields, and the codec's entry points.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"
#include "base/wire_ids.h"
#include "smc/clc/clc_errors.h"
#include "smc/clc/decline_code.h"

namespace smc::clc
{

// Layout facts (Linux net/smc/smc_clc.{h,c}); every multi-byte field is big-endian.
inline constexpr std::size_t kHeaderSize = 8;
inline constexpr std::size_t kTrailerSize = 4;
inline constexpr std::size_t kSmcrAcceptConfirmSizeV1 = 68;
inline constexpr std::size_t kSmcrAcceptConfirmSizeV2 = 108; // without extensions
inline constexpr std::size_t kSmcdAcceptConfirmSizeV1 = 48;
inline constexpr std::size_t kSmcdAcceptConfirmSizeV2 = 78; // without extensions
inline constexpr std::size_t kDeclineSizeV1 = 28;
inline constexpr std::size_t kDeclineSizeV2 = 44;
inline constexpr std::size_t kMaxProposalSize = 652; // every list full
inline constexpr std::size_t kMaxIpv6Prefixes = 8;
inline constexpr std::size_t kMaxUeids = 8;
inline constexpr std::size_t kMaxIsmV2Entries = 8; // an emulated device takes two
inline constexpr std::size_t kEidSize = 32;
inline constexpr std::size_t kHostnameSize = 32;

using Eyecatcher = std::array<std::uint8_t, 4>;
inline constexpr Eyecatcher kEyecatcherSmcr = {0xe2, 0xd4, 0xc3, 0xd9}; // "SMCR" in EBCDIC
inline constexpr Eyecatcher kEyecatcherSmcd = {0xe2, 0xd4, 0xc3, 0xc4}; // "SMCD" in EBCDIC

inline constexpr std::uint8_t kVersion1 = 1;
inline constexpr std::uint8_t kVersion2 = 2; // any version >= 2 has the v2 layout
inline constexpr std::uint8_t kRelease0 = 0; // v2.0
inline constexpr std::uint8_t kRelease1 = 1; // v2.1: max conns/links, feature mask
inline constexpr std::uint8_t kOsZos = 1;
inline constexpr std::uint8_t kOsLinux = 2;
inline constexpr std::uint8_t kOsAix = 3;
inline constexpr std::uint16_t kFeatureEmulatedIsm = 0x0001; // what Linux offers
inline constexpr std::uint16_t kLoopbackChid = 0xffff;       // loopback-ism

// CHIDs 0xFF00-0xFFFF name emulated ISM devices (loopback-ism, virtio-ism); each is offered
// as two GID/CHID entries: {gid, chid}, {gidExt, chid}.
constexpr bool isEmulatedChid(std::uint16_t chid) noexcept
{
    return (chid & 0xff00) == 0xff00;
}

enum class Type : std::uint8_t { Proposal = 1, Accept = 2, Confirm = 3, Decline = 4 };

// The header's 2-bit path types.
enum class SmcType : std::uint8_t { SmcR = 0, SmcD = 1, None = 2, Both = 3 };
constexpr bool hasSmcR(SmcType t) noexcept
{
    return t == SmcType::SmcR || t == SmcType::Both;
}
constexpr bool hasSmcD(SmcType t) noexcept
{
    return t == SmcType::SmcD || t == SmcType::Both;
}

using smc::Gid;
using smc::Mac;
using smc::SystemId;
using Eid = std::array<std::uint8_t, kEidSize>;           // upper-case, blank padded
using Hostname = std::array<std::uint8_t, kHostnameSize>; // ASCII, blank padded

// A user EID as CLC carries it: 1..32 of A-Z 0-9 '.' '-', starting alphanumeric, blank
// padded (Linux smc_clc_ueid_valid); nullopt if `text` is not one.
std::optional<Eid> makeEid(std::string_view text);
// A hostname blank padded (or cut) to 32 bytes.
Hostname makeHostname(std::string_view text);

struct IsmGidChid {
    std::uint64_t gid = 0;
    std::uint16_t chid = 0;
    friend bool operator==(const IsmGidChid&, const IsmGidChid&) = default;
};

struct Ipv6Prefix {
    std::array<std::uint8_t, 16> prefix{};
    std::uint8_t length = 0; // bits
    friend bool operator==(const Ipv6Prefix&, const Ipv6Prefix&) = default;
};

// The proposal's IP area: the IPv4 subnet of the TCP connection's local address, or up to
// eight IPv6 prefixes of its device (then the IPv4 fields are 0).
struct PrefixInfo {
    std::array<std::uint8_t, 4> ipv4Subnet{}; // network order
    std::uint8_t ipv4PrefixLength = 0;
    std::vector<Ipv6Prefix> ipv6;
    friend bool operator==(const PrefixInfo&, const PrefixInfo&) = default;
};

struct V2Extension {
    std::uint8_t release = 0; // 4 bits
    bool seid = false;        // the SMC-Dv2 extension's system EID is valid
    std::vector<Eid> userEids;
    Gid roceV2Gid{}; // SMC-Rv2 device
    std::uint8_t maxConns = 0;
    std::uint8_t maxLinks = 0;
    std::uint16_t featureMask = 0;
    friend bool operator==(const V2Extension&, const V2Extension&) = default;
};

struct SmcdV2Extension {
    Eid systemEid{};
    std::vector<IsmGidChid> entries; // raw: an emulated device is two entries
    friend bool operator==(const SmcdV2Extension&, const SmcdV2Extension&) = default;
};

// PROPOSAL (client -> server). Which areas are on the wire follows from the header:
// decode leaves an absent area default, encode ignores it.
struct Proposal {
    std::uint8_t version = kVersion2; // header version, 1..15
    SmcType typeV1 = SmcType::None;   // offered in v1
    SmcType typeV2 = SmcType::None;   // offered in v2; None in a version 1 proposal
    SystemId systemId{};              // SMC-Rv1 only, else 0
    Gid gid{};                        // SMC-Rv1 RoCE GID
    Mac mac{};                        // SMC-Rv1 RoCE MAC
    IsmGidChid ismV1{};               // SMC-D area: version >= 2 always, v1 if typeV1 has D
    PrefixInfo prefixes{};            // iff typeV1 != None
    V2Extension v2{};                 // iff version >= 2 and typeV2 != None
    SmcdV2Extension smcdV2{};         // iff version >= 2 and typeV2 has SMC-D
    friend bool operator==(const Proposal&, const Proposal&) = default;
};

// The first-contact extension of a v2 ACCEPT/CONFIRM: 52 bytes, or 36 for SMC-D release 0
// (then the fields from maxConns on are absent).
struct FirstContactExt {
    bool v2Direct = false;          // SMC-Rv2: no IP gateway between the peers
    std::uint8_t osType = kOsLinux; // 4 bits
    std::uint8_t release = 0;       // 4 bits: the negotiated one
    Hostname hostname{};
    std::uint8_t maxConns = 0; // SMC-R only
    std::uint8_t maxLinks = 0; // SMC-R only
    std::uint16_t featureMask = 0;
    std::uint32_t vendorOptions = 0;
    friend bool operator==(const FirstContactExt&, const FirstContactExt&) = default;
};

struct SmcrAcceptConfirm {
    SystemId systemId{};
    Gid gid{};
    Mac mac{};
    std::uint32_t qpn = 0; // 24 bits
    std::uint32_t rkey = 0;
    std::uint8_t rmbeIdx = 1; // Linux: one RMBE per RMB
    std::uint32_t alertToken = 0;
    std::uint8_t rmbeSize = 0; // 4 bits: 16 KiB << rmbeSize
    std::uint8_t qpMtu = 0;    // 4 bits: IB MTU enum
    std::uint64_t rmbAddr = 0;
    std::uint32_t psn = 0;    // 24 bits
    Eid eid{};                // v2: the negotiated EID
    std::vector<Gid> gidList; // v2 CONFIRM with first contact only: own and alternate GIDs
    friend bool operator==(const SmcrAcceptConfirm&, const SmcrAcceptConfirm&) = default;
};

struct SmcdAcceptConfirm {
    std::uint64_t gid = 0;
    std::uint64_t token = 0;
    std::uint8_t dmbeIdx = 0;
    std::uint8_t dmbeSize = 0;            // 4 bits: DMB of (16 KiB << dmbeSize), CDC incl.
    std::array<std::uint8_t, 4> linkId{}; // the link group id, as is
    std::uint16_t chid = 0;               // v2: the device chosen
    Eid eid{};                            // v2: the negotiated EID
    std::uint64_t gidExt = 0;             // v2, emulated CHIDs only
    friend bool operator==(const SmcdAcceptConfirm&, const SmcdAcceptConfirm&) = default;
};

// ACCEPT (server -> client) and CONFIRM (client -> server) share one layout.
struct AcceptConfirm {
    std::uint8_t version = kVersion2; // 1..15
    bool firstContact = false;        // a new link group
    std::variant<SmcrAcceptConfirm, SmcdAcceptConfirm> path;
    FirstContactExt fce{}; // iff version >= 2 and firstContact
    friend bool operator==(const AcceptConfirm&, const AcceptConfirm&) = default;
};
struct Accept : AcceptConfirm {
    friend bool operator==(const Accept&, const Accept&) = default;
};
struct Confirm : AcceptConfirm {
    friend bool operator==(const Confirm&, const Confirm&) = default;
};

struct Decline {
    std::uint8_t version = kVersion2; // 28 bytes if 1, else 44
    bool outOfSync = false;           // Linux: iff diagnosis is SyncErr
    SystemId systemId{};
    DeclineCode diagnosis{};
    std::uint8_t osType = 0;                      // 4 bits; Linux: 0 in v1, kOsLinux in v2
    std::array<std::uint32_t, 4> moreDiagnosis{}; // v2 only; Linux sends and reads none
    friend bool operator==(const Decline&, const Decline&) = default;
};

// The DECLINE Linux sends for `code` in `version` (the proposal's, on the server).
Decline makeDecline(DeclineCode code, std::uint8_t version, const SystemId& systemId);

using Message = std::variant<Proposal, Accept, Confirm, Decline>;
Type typeOf(const Message& message) noexcept;
const char* toString(Type type) noexcept;

// How many bytes the message starting with `head` needs: kHeaderSize while fewer header
// bytes are known, then the header's length field. For reading CLC from a TCP stream:
// read until the buffer holds that many, then decode() exactly them.
// Errors (ClcErrc): BadEyecatcher, UnknownType, BadVersion, BadSmcType, BadLength -- each as
// soon as the bytes given show it, so a stream that is not CLC is never read beyond.
Result<std::size_t> messageSize(std::span<const std::byte> head) noexcept;

// Reads one message, exactly `bytes`. Reserved fields are ignored, as Linux does; so is the
// DECLINE trailer and anything between a v2 ACCEPT/CONFIRM's last extension and its trailer.
// Errors (ClcErrc): Truncated, TrailingBytes, BadEyecatcher, BadTrailer, BadVersion,
// UnknownType, BadLength, BadSmcType, BadOffset, BadCount.
Result<Message> decode(std::span<const std::byte> bytes);

// Writes one message as Linux does (eyecatchers, offsets, reserved bytes 0). The bytes
// decode to `message` again, except for areas the header says are absent (left default).
// Errors (ClcErrc): BadVersion (0 or > 15), BadSmcType (a version 1 proposal offering v2 or
// nothing), BadCount (lists over their limit), FieldRange (a value wider than its field).
Result<std::vector<std::byte>> encode(const Message& message);

} // namespace smc::clc
