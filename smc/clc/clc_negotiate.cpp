// SPDX-License-Identifier: MIT
// The server's side of CLC negotiation, as a pure function of the PROPOSAL and what we have.
#include "smc/clc/clc_negotiate.h"

#include <algorithm>

namespace smc::clc
{
namespace
{

// The first `bits` bits of a and b agree.
template <std::size_t N>
bool samePrefix(const std::array<std::uint8_t, N>& a, const std::array<std::uint8_t, N>& b,
                unsigned bits)
{
    if (bits > N * 8)
        return false;
    for (std::size_t i = 0; i < N && bits > 0; ++i, bits = bits > 8 ? bits - 8 : 0) {
        const auto mask = static_cast<std::uint8_t>(bits >= 8 ? 0xff : 0xff << (8 - bits));
        if ((a[i] ^ b[i]) & mask)
            return false;
    }
    return true;
}

bool reaches(const LocalIsm& d, const IsmOffer& o)
{
    if (d.chid != o.chid)
        return false;
    if (!isEmulatedChid(d.chid))
        return true;
    return d.gid == o.gid && (d.hostWide || d.gidExt == o.gidExt);
}

// Linux smc_clc_match_eid: the system EID if both sides enabled it and agree, else the first
// of the client's user EIDs that is configured here.
std::optional<Eid> matchEid(const Capabilities& ours, const Proposal& p)
{
    if (ours.seid && p.v2.seid && p.smcdV2.systemEid == *ours.seid)
        return *ours.seid;
    for (const Eid& e : p.v2.userEids)
        if (std::find(ours.ueids.begin(), ours.ueids.end(), e) != ours.ueids.end())
            return e;
    return std::nullopt;
}

// Linux smc_find_rdma_v2_device_serv and smc_clc_srv_v2x_features_validate, for a direct
// route only.
Negotiation smcrV2(const Capabilities& ours, const Proposal& p)
{
    if (!ours.smcrV2)
        return DeclineCode::NoSmcrDev;
    const std::optional<Eid> eid = matchEid(ours, p);
    if (!eid)
        return DeclineCode::NoUeid;
    const std::uint8_t release = std::min(p.v2.release, ours.release);
    if (release >= kRelease1 && p.v2.maxConns < 16)
        return DeclineCode::MaxConnErr;
    if (release >= kRelease1 && p.v2.maxLinks < 1)
        return DeclineCode::MaxLinkErr;
    const std::optional<std::array<std::uint8_t, 4>> peer = ipv4OfGid(p.v2.roceV2Gid);
    if (!peer)
        return DeclineCode::NoRoute; // no route we can check
    const bool direct = std::any_of(ours.ipv4.begin(), ours.ipv4.end(), [&](const Ipv4Address& a) {
        return samePrefix(a.address, *peer, a.prefixLength);
    });
    if (!direct)
        return DeclineCode::NoRoute;
    Choice c;
    c.version = kVersion2;
    c.type = SmcType::SmcR;
    c.eid = *eid;
    c.release = release;
    return c;
}

} // namespace

std::optional<std::array<std::uint8_t, 4>> ipv4OfGid(const Gid& gid) noexcept
{
    constexpr std::array<std::uint8_t, 12> kMapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (!std::equal(kMapped.begin(), kMapped.end(), gid.begin()))
        return std::nullopt;
    return std::array<std::uint8_t, 4>{gid[12], gid[13], gid[14], gid[15]};
}

std::vector<IsmOffer> ismV2Offers(const Proposal& p)
{
    std::vector<IsmOffer> offers;
    if (p.ismV1.chid != 0) // the native device; Linux never offers an emulated one here
        offers.push_back({p.ismV1.gid, 0, p.ismV1.chid});
    const auto& e = p.smcdV2.entries;
    for (std::size_t i = 0; i < e.size(); ++i) {
        if (!isEmulatedChid(e[i].chid)) {
            offers.push_back({e[i].gid, 0, e[i].chid});
        } else if (i + 1 < e.size() && e[i + 1].chid == e[i].chid) {
            offers.push_back({e[i].gid, e[i + 1].gid, e[i].chid});
            ++i;
        }
    }
    return offers;
}

bool prefixMatches(const PrefixInfo& proposed, const Capabilities& ours) noexcept
{
    if (proposed.ipv6.empty())
        return std::any_of(ours.ipv4.begin(), ours.ipv4.end(), [&](const Ipv4Address& a) {
            return a.prefixLength == proposed.ipv4PrefixLength &&
                   samePrefix(a.address, proposed.ipv4Subnet, a.prefixLength);
        });
    for (const Ipv6Prefix& p : proposed.ipv6)
        for (const Ipv6Prefix& a : ours.ipv6)
            if (a.length == p.length && samePrefix(a.prefix, p.prefix, a.length))
                return true;
    return false;
}

Negotiation negotiate(const Capabilities& ours, const Proposal& p)
{
    const bool v2 = p.version >= kVersion2;
    const bool v1d = hasSmcD(p.typeV1);
    const bool v1r = hasSmcR(p.typeV1);
    bool v2d = v2 && hasSmcD(p.typeV2);
    bool v2r = v2 && hasSmcR(p.typeV2);

    // Which versions are usable at all (Linux smc_listen_v2_check); the last reason stands.
    DeclineCode versionReason = DeclineCode::PeerNoSmc;
    if (v2d && ours.ismV2.empty()) {
        v2d = false;
        versionReason = DeclineCode::NoIsm2Supp;
    } else if (v2d && p.v2.userEids.empty() && !p.v2.seid) {
        v2d = false;
        versionReason = DeclineCode::NoUeid;
    }
    if (v2r && p.v2.userEids.empty()) {
        v2r = false;
        versionReason = DeclineCode::NoUeid;
    }
    if (!v1d && !v1r && !v2d && !v2r)
        return versionReason;

    // From here the first reason found is the one declined with (Linux ini->rc).
    std::optional<DeclineCode> reason;
    const auto note = [&](DeclineCode c) {
        if (!reason)
            reason = c;
    };

    if (v2d) {
        for (const IsmOffer& o : ismV2Offers(p)) {
            const auto d = std::find_if(ours.ismV2.begin(), ours.ismV2.end(),
                                        [&](const LocalIsm& l) { return reaches(l, o); });
            if (d == ours.ismV2.end())
                continue;
            // Linux leaves no reason of its own for an EID mismatch (it ends up NOSMCDDEV
            // or whatever came first); NoUeid says what happened.
            const std::optional<Eid> eid = matchEid(ours, p);
            if (!eid) {
                note(DeclineCode::NoUeid);
                break;
            }
            Choice c;
            c.version = kVersion2;
            c.type = SmcType::SmcD;
            c.device = static_cast<std::size_t>(d - ours.ismV2.begin());
            c.peerGid = o.gid;
            c.peerGidExt = o.gidExt;
            c.chid = o.chid;
            c.eid = *eid;
            c.release = std::min(p.v2.release, ours.release);
            return c;
        }
        note(DeclineCode::NoSmcd2Dev);
    }

    // v1 needs the client in one of our subnets.
    bool prefixOk = true;
    if (p.typeV1 != SmcType::None && !prefixMatches(p.prefixes, ours)) {
        prefixOk = false;
        note(DeclineCode::DiffPrefix);
    }
    if (v1d && prefixOk) {
        if (ours.ismV1 && ours.ismV1->chid == p.ismV1.chid) {
            Choice c;
            c.type = SmcType::SmcD;
            c.peerGid = p.ismV1.gid;
            c.chid = p.ismV1.chid;
            return c;
        }
        note(DeclineCode::NoSmcdDev);
    }
    if (!v1r && !v2r)
        return reason.value_or(DeclineCode::NoSmcdDev);
    if (v2r) {
        const Negotiation r = smcrV2(ours, p);
        if (const auto* c = std::get_if<Choice>(&r))
            return *c;
        note(std::get<DeclineCode>(r));
    }
    if (v1r && prefixOk && ours.smcrV1) {
        Choice c;
        c.type = SmcType::SmcR;
        return c;
    }
    return reason.value_or(DeclineCode::NoSmcDev);
}

} // namespace smc::clc
