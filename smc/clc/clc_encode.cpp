// SPDX-License-Identifier: MIT
// CLC encoder: Linux's byte layouts, sizes computed first, reserved bytes left zero.
#include "smc/clc/clc_messages.h"
#include "smc/clc/internal/wire.h"

namespace smc::clc
{
namespace
{

using wire::Writer;

constexpr std::uint32_t kMax24 = 0xffffff;
constexpr std::uint8_t kMax4 = 0x0f;

bool validVersion(std::uint8_t v)
{
    return v >= kVersion1 && v <= kMax4;
}

bool validType(SmcType t)
{
    return static_cast<std::uint8_t>(t) <= 3;
}

std::vector<std::byte> frame(std::size_t size, const Eyecatcher& eye, Type type, std::uint8_t b7)
{
    std::vector<std::byte> out(size);
    Writer w{out};
    w.bytes(0, eye);
    w.u8(4, static_cast<std::uint8_t>(type));
    w.be(5, size, 2);
    w.u8(7, b7);
    w.bytes(size - kTrailerSize, eye);
    return out;
}

void writeGidChid(Writer& w, std::size_t o, const IsmGidChid& e)
{
    w.be(o, e.gid, 8);
    w.be(o + 8, e.chid, 2);
}

void writePrefixes(Writer& w, std::size_t o, const PrefixInfo& p)
{
    w.bytes(o, p.ipv4Subnet);
    w.u8(o + 4, p.ipv4PrefixLength);
    w.u8(o + 7, static_cast<std::uint8_t>(p.ipv6.size()));
    for (std::size_t i = 0; i < p.ipv6.size(); ++i) {
        const std::size_t e = o + wire::kPrefixHeaderSize + i * wire::kIpv6PrefixSize;
        w.bytes(e, p.ipv6[i].prefix);
        w.u8(e + 16, p.ipv6[i].length);
    }
}

Result<std::vector<std::byte>> encodeProposal(const Proposal& p)
{
    if (!validVersion(p.version))
        return ClcErrc::BadVersion;
    if (!validType(p.typeV1) || !validType(p.typeV2))
        return ClcErrc::FieldRange;
    const bool v1 = p.version == kVersion1;
    // A v1 proposal has no v2 types, and must offer something (Linux rejects it otherwise).
    if (v1 && (p.typeV1 == SmcType::None || p.typeV2 != SmcType::None))
        return ClcErrc::BadSmcType;
    const bool prefixes = p.typeV1 != SmcType::None;
    const bool ext = !v1 && p.typeV2 != SmcType::None;
    const bool smcdExt = !v1 && hasSmcD(p.typeV2);
    if ((prefixes && p.prefixes.ipv6.size() > kMaxIpv6Prefixes) ||
        (ext && p.v2.userEids.size() > kMaxUeids) ||
        (smcdExt && p.smcdV2.entries.size() > kMaxIsmV2Entries))
        return ClcErrc::BadCount;
    if (ext && p.v2.release > kMax4)
        return ClcErrc::FieldRange;

    const std::size_t n = p.prefixes.ipv6.size();
    const std::size_t eids = ext ? p.v2.userEids.size() : 0;
    const std::size_t entries = smcdExt ? p.smcdV2.entries.size() : 0;
    // v1 carries the SMC-D area only when it offers SMC-D; v2 always (as Linux >= 5.10).
    const bool smcdArea = !v1 || hasSmcD(p.typeV1);
    const std::size_t iparea = smcdArea && prefixes ? wire::kSmcdAreaSize : 0;
    const std::size_t size = v1 ? wire::proposalSizeV1(iparea, n)
                                : wire::proposalSizeV2(p.typeV1, p.typeV2, n, eids, entries);
    const auto t2 = static_cast<std::uint8_t>(v1 ? 0 : static_cast<std::uint8_t>(p.typeV2));
    std::vector<std::byte> out =
        frame(size, kEyecatcherSmcr, Type::Proposal,
              wire::headerByte7(p.version, t2, static_cast<std::uint8_t>(p.typeV1)));
    Writer w{out};
    w.bytes(8, p.systemId);
    w.bytes(16, p.gid);
    w.bytes(32, p.mac);
    w.be(wire::kPropIpareaOffset, iparea, 2);
    std::size_t at = wire::kPropBaseSize;
    if (smcdArea) {
        writeGidChid(w, at, p.ismV1);
        at += wire::kSmcdAreaSize;
    }
    if (prefixes) {
        writePrefixes(w, at, p.prefixes);
        at += wire::kPrefixHeaderSize + n * wire::kIpv6PrefixSize;
    }
    if (ext) {
        w.be(wire::kSmcdAreaV2ExtOffset, at - wire::kV2ExtBase, 2);
        const V2Extension& x = p.v2;
        w.u8(at, static_cast<std::uint8_t>(eids));
        w.u8(at + 1, static_cast<std::uint8_t>(entries));
        w.u8(at + 3, static_cast<std::uint8_t>(x.release << 4 | (x.seid ? 1 : 0)));
        if (smcdExt)
            w.be(at + wire::kV2ExtSmcdOffset,
                 wire::kV2ExtFixedSize - wire::kSmcdV2ExtBase + eids * kEidSize, 2);
        w.bytes(at + 8, x.roceV2Gid);
        w.u8(at + 24, x.maxConns);
        w.u8(at + 25, x.maxLinks);
        w.be(at + 26, x.featureMask, 2);
        at += wire::kV2ExtFixedSize;
        for (const Eid& e : x.userEids) {
            w.bytes(at, e);
            at += kEidSize;
        }
    }
    if (smcdExt) {
        w.bytes(at, p.smcdV2.systemEid);
        at += wire::kSmcdV2ExtFixedSize;
        for (const IsmGidChid& e : p.smcdV2.entries) {
            writeGidChid(w, at, e);
            at += wire::kGidChidSize;
        }
    }
    return out;
}

void writeFce(Writer& w, std::size_t o, const FirstContactExt& f, bool full, bool smcr)
{
    w.u8(o, f.v2Direct ? 0x80 : 0);
    w.u8(o + 1, static_cast<std::uint8_t>(f.osType << 4 | f.release));
    w.bytes(o + 4, f.hostname);
    if (!full)
        return;
    if (smcr) {
        w.u8(o + 36, f.maxConns);
        w.u8(o + 37, f.maxLinks);
    }
    w.be(o + 38, f.featureMask, 2);
    w.be(o + 40, f.vendorOptions, 4);
}

Result<std::vector<std::byte>> encodeSmcr(Type type, const AcceptConfirm& m,
                                          const SmcrAcceptConfirm& s)
{
    const bool v2 = m.version >= kVersion2;
    const bool fce = v2 && m.firstContact;
    const bool gidList = fce && type == Type::Confirm;
    if (s.qpn > kMax24 || s.psn > kMax24 || s.rmbeSize > kMax4 || s.qpMtu > kMax4)
        return ClcErrc::FieldRange;
    if (gidList && s.gidList.size() > 0xff)
        return ClcErrc::BadCount;
    std::size_t size = v2 ? kSmcrAcceptConfirmSizeV2 : kSmcrAcceptConfirmSizeV1;
    if (fce)
        size += wire::kFceSize;
    if (gidList)
        size += wire::kGidListHeaderSize + s.gidList.size() * sizeof(Gid);
    std::vector<std::byte> out = frame(size, kEyecatcherSmcr, type,
                                       wire::headerByte7(m.version, m.firstContact ? 2 : 0,
                                                         static_cast<std::uint8_t>(SmcType::SmcR)));
    Writer w{out};
    w.bytes(8, s.systemId);
    w.bytes(16, s.gid);
    w.bytes(32, s.mac);
    w.be(38, s.qpn, 3);
    w.be(41, s.rkey, 4);
    w.u8(45, s.rmbeIdx);
    w.be(46, s.alertToken, 4);
    w.u8(50, static_cast<std::uint8_t>(s.rmbeSize << 4 | s.qpMtu));
    w.be(52, s.rmbAddr, 8);
    w.be(61, s.psn, 3);
    if (v2)
        w.bytes(wire::kSmcrEidOffset, s.eid);
    if (fce)
        writeFce(w, wire::kSmcrFceOffset, m.fce, true, true);
    if (gidList) {
        std::size_t at = wire::kSmcrFceOffset + wire::kFceSize;
        w.u8(at, static_cast<std::uint8_t>(s.gidList.size()));
        at += wire::kGidListHeaderSize;
        for (const Gid& g : s.gidList) {
            w.bytes(at, g);
            at += sizeof(Gid);
        }
    }
    return out;
}

Result<std::vector<std::byte>> encodeSmcd(Type type, const AcceptConfirm& m,
                                          const SmcdAcceptConfirm& d)
{
    const bool v2 = m.version >= kVersion2;
    const bool fce = v2 && m.firstContact;
    if (d.dmbeSize > kMax4)
        return ClcErrc::FieldRange;
    const bool full = m.fce.release >= kRelease1;
    std::size_t size = v2 ? kSmcdAcceptConfirmSizeV2 : kSmcdAcceptConfirmSizeV1;
    if (fce)
        size += full ? wire::kFceSize : wire::kFceSizeSmcdRelease0;
    std::vector<std::byte> out = frame(size, kEyecatcherSmcd, type,
                                       wire::headerByte7(m.version, m.firstContact ? 2 : 0,
                                                         static_cast<std::uint8_t>(SmcType::SmcD)));
    Writer w{out};
    w.be(8, d.gid, 8);
    w.be(16, d.token, 8);
    w.u8(24, d.dmbeIdx);
    w.u8(25, static_cast<std::uint8_t>(d.dmbeSize << 4));
    w.bytes(28, d.linkId);
    if (v2) {
        w.be(wire::kSmcdChidOffset, d.chid, 2);
        w.bytes(wire::kSmcdChidOffset + 2, d.eid);
        w.be(wire::kSmcdChidOffset + 2 + kEidSize, d.gidExt, 8);
    }
    if (fce)
        writeFce(w, wire::kSmcdFceOffset, m.fce, full, false);
    return out;
}

Result<std::vector<std::byte>> encodeAcceptConfirm(Type type, const AcceptConfirm& m)
{
    if (!validVersion(m.version))
        return ClcErrc::BadVersion;
    if (m.version >= kVersion2 && m.firstContact && (m.fce.osType > kMax4 || m.fce.release > kMax4))
        return ClcErrc::FieldRange;
    if (const auto* s = std::get_if<SmcrAcceptConfirm>(&m.path))
        return encodeSmcr(type, m, *s);
    return encodeSmcd(type, m, std::get<SmcdAcceptConfirm>(m.path));
}

Result<std::vector<std::byte>> encodeDecline(const Decline& d)
{
    if (!validVersion(d.version))
        return ClcErrc::BadVersion;
    if (d.osType > kMax4)
        return ClcErrc::FieldRange;
    const bool v2 = d.version >= kVersion2;
    // Linux writes SMCR here whatever the path.
    std::vector<std::byte> out =
        frame(v2 ? kDeclineSizeV2 : kDeclineSizeV1, kEyecatcherSmcr, Type::Decline,
              wire::headerByte7(d.version, d.outOfSync ? 2 : 0, 0));
    Writer w{out};
    w.bytes(8, d.systemId);
    w.be(16, static_cast<std::uint32_t>(d.diagnosis), 4);
    w.u8(20, static_cast<std::uint8_t>(d.osType << 4));
    if (v2)
        for (std::size_t i = 0; i < d.moreDiagnosis.size(); ++i)
            w.be(24 + 4 * i, d.moreDiagnosis[i], 4);
    return out;
}

} // namespace

Result<std::vector<std::byte>> encode(const Message& message)
{
    switch (message.index()) {
    case 0:
        return encodeProposal(std::get<Proposal>(message));
    case 1:
        return encodeAcceptConfirm(Type::Accept, std::get<Accept>(message));
    case 2:
        return encodeAcceptConfirm(Type::Confirm, std::get<Confirm>(message));
    default:
        return encodeDecline(std::get<Decline>(message));
    }
}

} // namespace smc::clc
