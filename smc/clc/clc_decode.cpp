// SPDX-License-Identifier: MIT
// CLC decoder: every length and offset is checked against the header before a field is read.
#include <algorithm>

#include "smc/clc/clc_messages.h"
#include "smc/clc/internal/wire.h"

namespace smc::clc
{
namespace
{

using wire::Reader;

struct Header {
    Type type;
    std::size_t length;
    std::uint8_t version;
    std::uint8_t typeV2; // raw bits 3..2
    std::uint8_t typeV1; // raw bits 1..0
};

bool eyecatcherAt(const Reader& r, std::size_t o)
{
    const auto e = r.bytes<4>(o);
    return e == kEyecatcherSmcr || e == kEyecatcherSmcd;
}

// What the 8 header bytes alone tell (Linux smc_clc_wait_msg and the per-type length rules).
Result<Header> checkHeader(const Reader& r)
{
    if (!eyecatcherAt(r, 0))
        return ClcErrc::BadEyecatcher;
    const std::uint8_t type = r.u8(4);
    if (type < 1 || type > 4)
        return ClcErrc::UnknownType;
    const std::uint8_t b7 = r.u8(7);
    Header h{static_cast<Type>(type), r.be16(5), static_cast<std::uint8_t>(b7 >> 4),
             static_cast<std::uint8_t>(b7 >> 2 & 3), static_cast<std::uint8_t>(b7 & 3)};
    if (h.version == 0)
        return ClcErrc::BadVersion;
    const bool v1 = h.version == kVersion1;
    bool fits = false;
    switch (h.type) {
    case Type::Proposal:
        // Smallest: no area at all; largest: every area and list full.
        fits = v1 ? h.length >= wire::proposalSizeV1(0, 0) &&
                        h.length <= wire::proposalSizeV1(wire::kSmcdAreaSize, kMaxIpv6Prefixes)
                  : h.length >= wire::proposalSizeV2(SmcType::None, SmcType::None, 0, 0, 0) &&
                        h.length <= kMaxProposalSize;
        break;
    case Type::Accept:
    case Type::Confirm: {
        const auto path = static_cast<SmcType>(h.typeV1);
        if (path != SmcType::SmcR && path != SmcType::SmcD)
            return ClcErrc::BadSmcType;
        const bool smcr = path == SmcType::SmcR;
        // v1 has one size; v2 has extensions after the fixed part (Linux: at least).
        if (v1)
            fits = h.length == (smcr ? kSmcrAcceptConfirmSizeV1 : kSmcdAcceptConfirmSizeV1);
        else
            fits = h.length >= (smcr ? kSmcrAcceptConfirmSizeV2 : kSmcdAcceptConfirmSizeV2);
        break;
    }
    case Type::Decline:
        fits = h.length == (v1 ? kDeclineSizeV1 : kDeclineSizeV2);
        break;
    }
    if (!fits)
        return ClcErrc::BadLength;
    return h;
}

IsmGidChid readGidChid(const Reader& r, std::size_t o)
{
    return {r.be64(o), r.be16(o + 8)};
}

PrefixInfo readPrefixes(const Reader& r, std::size_t o, std::size_t count)
{
    PrefixInfo p;
    p.ipv4Subnet = r.bytes<4>(o);
    p.ipv4PrefixLength = r.u8(o + 4);
    for (std::size_t i = 0; i < count; ++i) {
        const std::size_t e = o + wire::kPrefixHeaderSize + i * wire::kIpv6PrefixSize;
        p.ipv6.push_back({r.bytes<16>(e), r.u8(e + 16)});
    }
    return p;
}

Result<Message> decodeProposal(const Reader& r, const Header& h)
{
    const std::size_t end = h.length - kTrailerSize; // every area ends by here
    Proposal p;
    p.version = h.version;
    p.typeV1 = static_cast<SmcType>(h.typeV1);
    p.systemId = r.bytes<8>(8);
    p.gid = r.bytes<16>(16);
    p.mac = r.bytes<6>(32);
    const std::size_t iparea = r.be16(wire::kPropIpareaOffset);
    if (iparea > wire::kSmcdAreaSize)
        return ClcErrc::BadOffset;

    if (h.version == kVersion1) {
        // typev2 bits are reserved in v1. Offset 0: the old 52-byte form; 40: an SMC-D area
        // in between, which SMC-D needs and SMC-R ignores.
        if (p.typeV1 == SmcType::None)
            return ClcErrc::BadSmcType;
        if ((iparea != 0 && iparea != wire::kSmcdAreaSize) ||
            (hasSmcD(p.typeV1) && iparea != wire::kSmcdAreaSize))
            return ClcErrc::BadOffset;
        const std::size_t at = wire::kPropBaseSize + iparea;
        if (at + wire::kPrefixHeaderSize > end)
            return ClcErrc::BadLength;
        const std::size_t n = r.u8(at + 7);
        if (n > kMaxIpv6Prefixes)
            return ClcErrc::BadCount;
        if (h.length != wire::proposalSizeV1(iparea, n))
            return ClcErrc::BadLength;
        if (hasSmcD(p.typeV1))
            p.ismV1 = readGidChid(r, wire::kPropBaseSize);
        p.prefixes = readPrefixes(r, at, n);
        return Message{std::move(p)};
    }

    // v2: the SMC-D area is always there (checkHeader: length >= 84); then, packed, the
    // prefixes (if v1 is offered), the v2 extension, the SMC-Dv2 extension.
    p.typeV2 = static_cast<SmcType>(h.typeV2);
    p.ismV1 = readGidChid(r, wire::kPropBaseSize);
    std::size_t at = wire::kPropBaseSize + wire::kSmcdAreaSize;
    const std::size_t prefixAt = at;
    std::size_t n = 0;
    if (p.typeV1 != SmcType::None) {
        if (iparea != wire::kSmcdAreaSize)
            return ClcErrc::BadOffset;
        if (at + wire::kPrefixHeaderSize > end)
            return ClcErrc::BadLength;
        n = r.u8(at + 7);
        if (n > kMaxIpv6Prefixes)
            return ClcErrc::BadCount;
        at += wire::kPrefixHeaderSize + n * wire::kIpv6PrefixSize;
        if (at > end)
            return ClcErrc::BadLength;
    }
    const std::size_t extAt = at;
    std::size_t eids = 0;
    std::size_t entries = 0;
    if (p.typeV2 != SmcType::None) {
        if (r.be16(wire::kSmcdAreaV2ExtOffset) != extAt - wire::kV2ExtBase)
            return ClcErrc::BadOffset;
        if (extAt + wire::kV2ExtFixedSize > end)
            return ClcErrc::BadLength;
        eids = r.u8(extAt);
        if (eids > kMaxUeids)
            return ClcErrc::BadCount;
        if (hasSmcD(p.typeV2)) {
            entries = r.u8(extAt + 1);
            if (entries > kMaxIsmV2Entries)
                return ClcErrc::BadCount;
            const std::size_t smcdOffset = r.be16(extAt + wire::kV2ExtSmcdOffset);
            if (smcdOffset != wire::kV2ExtFixedSize - wire::kSmcdV2ExtBase + eids * kEidSize)
                return ClcErrc::BadOffset;
        }
    }
    if (h.length != wire::proposalSizeV2(p.typeV1, p.typeV2, n, eids, entries))
        return ClcErrc::BadLength;

    // The length covers every area now: plain reads from here on.
    if (p.typeV1 != SmcType::None)
        p.prefixes = readPrefixes(r, prefixAt, n);
    if (p.typeV2 != SmcType::None) {
        V2Extension& x = p.v2;
        const std::uint8_t flags = r.u8(extAt + 3);
        x.release = flags >> 4;
        x.seid = flags & 0x01;
        x.roceV2Gid = r.bytes<16>(extAt + 8);
        x.maxConns = r.u8(extAt + 24);
        x.maxLinks = r.u8(extAt + 25);
        x.featureMask = r.be16(extAt + 26);
        for (std::size_t i = 0; i < eids; ++i)
            x.userEids.push_back(r.bytes<kEidSize>(extAt + wire::kV2ExtFixedSize + i * kEidSize));
    }
    if (hasSmcD(p.typeV2)) {
        const std::size_t y = extAt + wire::kV2ExtFixedSize + eids * kEidSize;
        p.smcdV2.systemEid = r.bytes<kEidSize>(y);
        for (std::size_t i = 0; i < entries; ++i)
            p.smcdV2.entries.push_back(
                readGidChid(r, y + wire::kSmcdV2ExtFixedSize + i * wire::kGidChidSize));
    }
    return Message{std::move(p)};
}

FirstContactExt readFce(const Reader& r, std::size_t o, bool full, bool smcr)
{
    FirstContactExt f;
    f.v2Direct = r.u8(o) & 0x80;
    f.osType = r.u8(o + 1) >> 4;
    f.release = r.u8(o + 1) & 0x0f;
    f.hostname = r.bytes<kHostnameSize>(o + 4);
    if (full) {
        if (smcr) { // reserved for SMC-D
            f.maxConns = r.u8(o + 36);
            f.maxLinks = r.u8(o + 37);
        }
        f.featureMask = r.be16(o + 38);
        f.vendorOptions = r.be32(o + 40);
    }
    return f;
}

Result<AcceptConfirm> decodeAcceptConfirm(const Reader& r, const Header& h)
{
    const std::size_t end = h.length - kTrailerSize;
    const bool v2 = h.version >= kVersion2;
    AcceptConfirm m;
    m.version = h.version;
    m.firstContact = r.u8(7) & wire::kFirstContactBit;
    if (static_cast<SmcType>(h.typeV1) == SmcType::SmcR) {
        SmcrAcceptConfirm s;
        s.systemId = r.bytes<8>(8);
        s.gid = r.bytes<16>(16);
        s.mac = r.bytes<6>(32);
        s.qpn = static_cast<std::uint32_t>(r.be(38, 3));
        s.rkey = r.be32(41);
        s.rmbeIdx = r.u8(45);
        s.alertToken = r.be32(46);
        s.rmbeSize = r.u8(50) >> 4;
        s.qpMtu = r.u8(50) & 0x0f;
        s.rmbAddr = r.be64(52);
        s.psn = static_cast<std::uint32_t>(r.be(61, 3));
        if (v2) {
            s.eid = r.bytes<kEidSize>(wire::kSmcrEidOffset);
            if (m.firstContact) {
                // SMC-R always sends the whole 52 bytes, whatever the release.
                if (wire::kSmcrFceOffset + wire::kFceSize > end)
                    return ClcErrc::BadLength;
                m.fce = readFce(r, wire::kSmcrFceOffset, true, true);
                if (h.type == Type::Confirm) {
                    const std::size_t at = wire::kSmcrFceOffset + wire::kFceSize;
                    if (at + wire::kGidListHeaderSize > end)
                        return ClcErrc::BadLength;
                    const std::size_t k = r.u8(at);
                    const std::size_t gids = at + wire::kGidListHeaderSize;
                    if (gids + k * sizeof(Gid) > end)
                        return ClcErrc::BadLength;
                    for (std::size_t i = 0; i < k; ++i)
                        s.gidList.push_back(r.bytes<16>(gids + i * sizeof(Gid)));
                }
            }
        }
        m.path = std::move(s);
    } else {
        SmcdAcceptConfirm d;
        d.gid = r.be64(8);
        d.token = r.be64(16);
        d.dmbeIdx = r.u8(24);
        d.dmbeSize = r.u8(25) >> 4;
        d.linkId = r.bytes<4>(28);
        if (v2) {
            d.chid = r.be16(wire::kSmcdChidOffset);
            d.eid = r.bytes<kEidSize>(wire::kSmcdChidOffset + 2);
            d.gidExt = r.be64(wire::kSmcdChidOffset + 2 + kEidSize);
            if (m.firstContact) {
                // Release 0 sends the 36-byte base only; the release is in it.
                const std::size_t o = wire::kSmcdFceOffset;
                if (o + wire::kFceSizeSmcdRelease0 > end)
                    return ClcErrc::BadLength;
                const bool full = (r.u8(o + 1) & 0x0f) >= kRelease1;
                if (full && o + wire::kFceSize > end)
                    return ClcErrc::BadLength;
                m.fce = readFce(r, o, full, false);
            }
        }
        m.path = d;
    }
    return m;
}

Decline decodeDecline(const Reader& r, const Header& h)
{
    Decline d;
    d.version = h.version;
    d.outOfSync = r.u8(7) & wire::kFirstContactBit;
    d.systemId = r.bytes<8>(8);
    d.diagnosis = static_cast<DeclineCode>(r.be32(16));
    d.osType = r.u8(20) >> 4;
    if (h.version >= kVersion2)
        for (std::size_t i = 0; i < d.moreDiagnosis.size(); ++i)
            d.moreDiagnosis[i] = r.be32(24 + 4 * i);
    return d;
}

} // namespace

Result<std::size_t> messageSize(std::span<const std::byte> head) noexcept
{
    if (head.size() >= kHeaderSize) {
        Result<Header> h = checkHeader(Reader{head});
        if (!h)
            return h.error();
        return h->length;
    }
    // A partial header: reject what is already wrong, so a non-CLC stream stops here.
    const std::size_t known = std::min<std::size_t>(head.size(), 4);
    const Reader r{head};
    bool smcr = true;
    bool smcd = true;
    for (std::size_t i = 0; i < known; ++i) {
        smcr = smcr && r.u8(i) == kEyecatcherSmcr[i];
        smcd = smcd && r.u8(i) == kEyecatcherSmcd[i];
    }
    if (!smcr && !smcd)
        return ClcErrc::BadEyecatcher;
    if (head.size() > 4 && (r.u8(4) < 1 || r.u8(4) > 4))
        return ClcErrc::UnknownType;
    return kHeaderSize;
}

Result<Message> decode(std::span<const std::byte> bytes)
{
    if (bytes.size() < kHeaderSize)
        return ClcErrc::Truncated;
    const Reader r{bytes};
    Result<Header> h = checkHeader(r);
    if (!h)
        return h.error();
    if (bytes.size() < h->length)
        return ClcErrc::Truncated;
    if (bytes.size() > h->length)
        return ClcErrc::TrailingBytes;

    switch (h->type) {
    case Type::Proposal: {
        Result<Message> p = decodeProposal(r, *h);
        if (p && !eyecatcherAt(r, h->length - kTrailerSize))
            return ClcErrc::BadTrailer;
        return p;
    }
    case Type::Accept:
    case Type::Confirm: {
        Result<AcceptConfirm> m = decodeAcceptConfirm(r, *h);
        if (!m)
            return m.error();
        if (!eyecatcherAt(r, h->length - kTrailerSize))
            return ClcErrc::BadTrailer;
        if (h->type == Type::Accept)
            return Message{Accept{std::move(*m)}};
        return Message{Confirm{std::move(*m)}};
    }
    case Type::Decline: // Linux does not check its trailer
        return Message{decodeDecline(r, *h)};
    }
    return ClcErrc::UnknownType;
}

} // namespace smc::clc
