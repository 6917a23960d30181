// SPDX-License-Identifier: MIT
// The server's choice for a PROPOSAL: which offer this side can take, or the DECLINE reason.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "smc/clc/clc_messages.h"

namespace smc::clc
{

// One local ISM device. loopback-ism: chid kLoopbackChid and its two GIDs.
struct LocalIsm {
    std::uint64_t gid = 0;
    std::uint64_t gidExt = 0; // emulated devices only
    std::uint16_t chid = 0;
    // An emulated device shared by the host's processes (cross-process loopback-ism): `gid`
    // names the host and `gidExt` the process, so it reaches any offer with our `gid`.
    bool hostWide = false;
};

// An address of the TCP connection's local interface with its prefix length.
struct Ipv4Address {
    std::array<std::uint8_t, 4> address{};
    std::uint8_t prefixLength = 0;
};

// What this side can do for one connection.
struct Capabilities {
    std::vector<LocalIsm> ismV2;   // SMC-Dv2-capable devices, loopback-ism among them
    std::optional<LocalIsm> ismV1; // a native ISM device for SMC-Dv1
    bool smcrV1 = false;           // a RoCE device this connection may use for SMC-Rv1
    bool smcrV2 = false;           // one with a RoCE v2 IPv4 GID, for SMC-Rv2
    std::vector<Eid> ueids;        // the user EIDs configured here
    std::optional<Eid> seid;       // the system EID, if enabled (s390)
    std::uint8_t release = kRelease1;
    // The interface's addresses: the v1 subnet check, and SMC-Rv2's direct route (the peer's
    // RoCE v2 GID in one of these subnets).
    std::vector<Ipv4Address> ipv4;
    std::vector<Ipv6Prefix> ipv6; // likewise (address and prefix length)
};

// An SMC-Dv2 device the client offered: the native entry of the SMC-D area, then the
// SMC-Dv2 list with each emulated device's two entries joined.
struct IsmOffer {
    std::uint64_t gid = 0;
    std::uint64_t gidExt = 0;
    std::uint16_t chid = 0;
    friend bool operator==(const IsmOffer&, const IsmOffer&) = default;
};
// Offers in the order the proposal lists them. An emulated CHID whose next entry does not
// repeat it is skipped, as Linux's server does.
std::vector<IsmOffer> ismV2Offers(const Proposal& proposal);

// The IPv4 address of an IPv4-mapped RoCE v2 GID (::ffff:a.b.c.d), the only kind of GID
// SMC-Rv2 routes; nullopt for any other GID.
std::optional<std::array<std::uint8_t, 4>> ipv4OfGid(const Gid& gid) noexcept;

// Linux's subnet check (clc.c smc_clc_prfx_match): with no IPv6 prefixes, one IPv4 address
// with the proposed prefix length in the proposed subnet; else any proposed IPv6 prefix
// equal to one of ours.
bool prefixMatches(const PrefixInfo& proposed, const Capabilities& ours) noexcept;

struct Choice {
    std::uint8_t version = kVersion1; // of the ACCEPT
    SmcType type = SmcType::None;     // SmcR or SmcD
    std::size_t device = 0;           // SMC-Dv2: index into Capabilities::ismV2
    std::uint64_t peerGid = 0;        // SMC-D: the client's device
    std::uint64_t peerGidExt = 0;     // SMC-Dv2, emulated devices
    std::uint16_t chid = 0;           // SMC-D: the chosen device's CHID
    Eid eid{};                        // v2: the negotiated EID, for the ACCEPT
    std::uint8_t release = kRelease0; // v2: min(proposed, ours), for the first-contact ext
    friend bool operator==(const Choice&, const Choice&) = default;
};
using Negotiation = std::variant<Choice, DeclineCode>;

// What the server answers a PROPOSAL with, trying SMC-Dv2, SMC-Dv1, SMC-Rv2, then SMC-Rv1
// (the order of Linux's smc_listen_find_device) and declining with the first reason it found.
// An SMC-D device is taken when its CHID is the offered one; an emulated one (loopback-ism)
// reaches only itself, so its GIDs must be the offered ones too (a host-wide one: its gid). A
// native device's reach cannot be seen here: the caller still asks the device (query_remote_gid).
// SMC-Rv2 is taken with an EID in common, a release-1 offer of at least 16 connections and one
// link, and the peer's RoCE v2 GID in one of our subnets: a direct route, the only kind taken
// (v2_direct; a peer behind a gateway gets NoRoute). Returns a Choice, or one of these decline
// reasons: PeerNoSmc, NoIsm2Supp, NoUeid, NoSmcd2Dev, DiffPrefix, NoSmcdDev, MaxConnErr,
// MaxLinkErr, NoRoute, NoSmcrDev, NoSmcDev.
Negotiation negotiate(const Capabilities& ours, const Proposal& proposal);

} // namespace smc::clc
