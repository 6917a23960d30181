// SPDX-License-Identifier: MIT
// The LLC codec: Linux's byte layouts (big-endian fields; length_v2 in host order, as Linux).
#include <algorithm>
#include <cstring>
#include <string>

#include "base/bytes.h"
#include "smc/llc/llc_messages.h"

namespace smc::llc
{
namespace
{

class DecodeCategory final : public std::error_category
{
public:
    const char* name() const noexcept override { return "llc"; }
    std::string message(int v) const override
    {
        switch (static_cast<DecodeError>(v)) {
        case DecodeError::TooShort:
            return "LLC message shorter than 44 bytes (or than its own length)";
        case DecodeError::BadVersion:
            return "LLC version is neither 1 nor 2";
        case DecodeError::UnknownType:
            return "unknown LLC message type";
        case DecodeError::BadLength:
            return "LLC length field does not fit the message type";
        case DecodeError::ReservedFlags:
            return "reserved LLC flag bits set";
        case DecodeError::ReservedBits:
            return "reserved bits set in an LLC field";
        case DecodeError::BadCount:
            return "LLC element count out of range";
        case DecodeError::MissingEyecatcherFlags:
            return "CONFIRM_LINK without the no-RMBE-eyecatcher flags";
        case DecodeError::V2Only:
            return "this LLC message type exists only in version 2";
        case DecodeError::V1Only:
            return "this LLC message type exists only in version 1";
        }
        return "malformed LLC message";
    }
};

using Reader = BeReader;
using Writer = BeWriter;

constexpr std::size_t kAddLinkExtHeader = 28;
constexpr std::size_t kRkeyPairSize = 16;
constexpr std::size_t kReqAddLinkGids = 28;
constexpr std::size_t kDeleteRkeyList = 8;

bool knownType(std::uint8_t t)
{
    return t >= 1 && t <= 9;
}

// Flag bits a message type may carry (the rest are reserved).
std::uint8_t allowedFlags(Type t)
{
    switch (t) {
    case Type::ConfirmLink:
        return kFlagResponse | kFlagNoRmbeEyecatcher;
    case Type::AddLink:
        return kFlagResponse | kFlagAddLinkReject;
    case Type::DeleteLink:
        return kFlagResponse | kFlagDeleteAll | kFlagDeleteOrderly;
    case Type::ConfirmRkey:
        return kFlagResponse | kFlagRkeyNegative | kFlagRkeyRetry;
    case Type::DeleteRkey:
        return kFlagResponse | kFlagRkeyNegative;
    default:
        return kFlagResponse;
    }
}

RkeyPair readPair(const Reader& r, std::size_t o)
{
    return {r.be32(o), r.be32(o + 4), r.be64(o + 8)};
}

void writePair(Writer& w, std::size_t o, const RkeyPair& p)
{
    w.be(o, p.rkey, 4);
    w.be(o + 4, p.newRkey, 4);
    w.be64(o + 8, p.newVaddr);
}

} // namespace

const std::error_category& decodeCategory() noexcept
{
    static const DecodeCategory category;
    return category;
}

const char* toString(Type type) noexcept
{
    switch (type) {
    case Type::ConfirmLink:
        return "CONFIRM_LINK";
    case Type::AddLink:
        return "ADD_LINK";
    case Type::AddLinkCont:
        return "ADD_LINK_CONT";
    case Type::DeleteLink:
        return "DELETE_LINK";
    case Type::ReqAddLink:
        return "REQ_ADD_LINK";
    case Type::ConfirmRkey:
        return "CONFIRM_RKEY";
    case Type::TestLink:
        return "TEST_LINK";
    case Type::ConfirmRkeyCont:
        return "CONFIRM_RKEY_CONT";
    case Type::DeleteRkey:
        return "DELETE_RKEY";
    }
    return "?";
}

Type Message::type() const noexcept
{
    static constexpr Type kTypes[] = {Type::ConfirmLink,     Type::AddLink,    Type::AddLinkCont,
                                      Type::DeleteLink,      Type::ReqAddLink, Type::ConfirmRkey,
                                      Type::ConfirmRkeyCont, Type::TestLink,   Type::DeleteRkey};
    return kTypes[body.index()];
}

Result<Message> decode(std::span<const std::byte> bytes)
{
    if (bytes.size() < kMessageSize)
        return DecodeError::TooShort;
    const Reader r{bytes};
    const std::uint8_t version = r.u8(0) >> 4;
    const std::uint8_t rawType = r.u8(0) & 0x0f;
    if (version != 1 && version != 0 && version != 2)
        return DecodeError::BadVersion;
    if (!knownType(rawType))
        return DecodeError::UnknownType;
    const Type type = static_cast<Type>(rawType);
    Message m;
    m.version = version == 2 ? 2 : 1; // v1 messages carry 0 in the high nibble
    const std::uint8_t flags = r.u8(3);
    if (flags & ~allowedFlags(type))
        return DecodeError::ReservedFlags;
    m.response = flags & kFlagResponse;

    std::size_t length = kMessageSize;
    if (m.version == 1) {
        if (r.u8(1) != kMessageSize)
            return DecodeError::BadLength;
        // Byte 2: low nibble = ADD_LINK reject reason, high nibble reserved.
        if ((r.u8(2) & 0xf0) || (type != Type::AddLink && (r.u8(2) & 0x0f)))
            return DecodeError::ReservedBits;
    } else {
        length = r.host16(1);
        if (length < kMessageSize || length > kMaxV2Size)
            return DecodeError::BadLength;
        if (bytes.size() < length)
            return DecodeError::TooShort;
    }

    switch (type) {
    case Type::ConfirmLink: {
        if (length != kMessageSize)
            return DecodeError::BadLength;
        if ((flags & kFlagNoRmbeEyecatcher) == 0)
            return DecodeError::MissingEyecatcherFlags;
        ConfirmLink c;
        c.mac = r.bytes<6>(4);
        c.gid = r.bytes<16>(10);
        c.qpn = r.be(26, 3);
        c.linkId = r.u8(29);
        c.linkUid = r.bytes<4>(30);
        c.maxLinks = r.u8(34);
        c.maxConns = r.u8(35);
        m.body = c;
        break;
    }
    case Type::AddLink: {
        AddLink a;
        a.reject = flags & kFlagAddLinkReject;
        a.rejectReason = m.version == 1 ? r.u8(2) & 0x0f : 0;
        a.mac = r.bytes<6>(4);
        a.gid = r.bytes<16>(12);
        a.qpn = r.be(28, 3);
        a.linkId = r.u8(31);
        if (r.u8(32) & 0xf0)
            return DecodeError::ReservedBits;
        a.mtu = r.u8(32) & 0x0f;
        a.psn = r.be(33, 3);
        if (m.version == 2 && length > kMessageSize) {
            if (length < kMessageSize + kAddLinkExtHeader)
                return DecodeError::BadLength;
            AddLinkV2Ext ext;
            const std::size_t e = kMessageSize;
            if (r.u8(e) & 0x7f)
                return DecodeError::ReservedBits;
            ext.direct = r.u8(e) & 0x80;
            ext.clientTargetGid = r.bytes<16>(e + 2);
            const std::size_t n = r.host16(e + 26);
            if (n > kMaxAddLinkRkeys)
                return DecodeError::BadCount;
            if (length != kMessageSize + kAddLinkExtHeader + n * kRkeyPairSize)
                return DecodeError::BadLength;
            for (std::size_t i = 0; i < n; ++i)
                ext.rkeys.push_back(readPair(r, e + kAddLinkExtHeader + i * kRkeyPairSize));
            a.ext = std::move(ext);
        }
        m.body = std::move(a);
        break;
    }
    case Type::AddLinkCont: {
        if (m.version != 1)
            return DecodeError::V1Only;
        AddLinkCont c;
        c.linkId = r.u8(4);
        c.remaining = r.u8(5);
        for (std::size_t i = 0; i < std::min<std::size_t>(c.remaining, 2); ++i)
            c.rkeys.push_back(readPair(r, 8 + i * kRkeyPairSize));
        m.body = std::move(c);
        break;
    }
    case Type::DeleteLink: {
        if (length != kMessageSize)
            return DecodeError::BadLength;
        DeleteLink d;
        d.all = flags & kFlagDeleteAll;
        d.orderly = flags & kFlagDeleteOrderly;
        d.linkId = r.u8(4);
        d.reason = static_cast<DeleteReason>(r.be32(5));
        m.body = d;
        break;
    }
    case Type::ReqAddLink: {
        if (m.version != 2)
            return DecodeError::V2Only;
        ReqAddLink q;
        const std::size_t n = r.u8(24);
        // A response echoes the request with its data zeroed.
        if (!m.response && (n == 0 || length < kReqAddLinkGids + n * 16))
            return DecodeError::BadCount;
        if (!m.response)
            for (std::size_t i = 0; i < n; ++i)
                q.gids.push_back(r.bytes<16>(kReqAddLinkGids + i * 16));
        m.body = std::move(q);
        break;
    }
    case Type::ConfirmRkey: {
        if (length != kMessageSize)
            return DecodeError::BadLength;
        ConfirmRkey c;
        c.negative = flags & kFlagRkeyNegative;
        c.retry = flags & kFlagRkeyRetry;
        const std::size_t n = r.u8(4);
        if (n > 2)
            return DecodeError::BadCount;
        c.rkey = r.be32(5);
        c.vaddr = r.be64(9);
        for (std::size_t i = 0; i < n; ++i)
            c.others.push_back({r.u8(17 + i * 13), r.be32(18 + i * 13), r.be64(22 + i * 13)});
        m.body = std::move(c);
        break;
    }
    case Type::ConfirmRkeyCont:
        if (m.version != 1)
            return DecodeError::V1Only;
        m.body = ConfirmRkeyCont{};
        break;
    case Type::TestLink: {
        if (length != kMessageSize)
            return DecodeError::BadLength;
        TestLink t;
        t.userData = r.bytes<16>(4);
        m.body = t;
        break;
    }
    case Type::DeleteRkey: {
        DeleteRkey d;
        d.negative = flags & kFlagRkeyNegative;
        const std::size_t n = r.u8(4);
        if (m.version == 1) {
            if (n < 1 || n > 8)
                return DecodeError::BadCount;
            d.errorMask = r.u8(5);
            for (std::size_t i = 0; i < n; ++i)
                d.rkeys.push_back(r.be32(8 + i * 4));
        } else {
            d.invalidCount = r.u8(5);
            if (m.response) { // Linux answers with the rkey area zeroed
                d.requested = static_cast<std::uint8_t>(n);
            } else {
                if (n < 1 || length < kDeleteRkeyList + n * 4)
                    return DecodeError::BadCount;
                for (std::size_t i = 0; i < n; ++i)
                    d.rkeys.push_back(r.be32(kDeleteRkeyList + i * 4));
            }
        }
        m.body = std::move(d);
        break;
    }
    }
    return m;
}

std::vector<std::byte> encode(const Message& m)
{
    const Type type = m.type();
    std::size_t length = kMessageSize;
    if (m.version == 2) {
        if (const auto* a = std::get_if<AddLink>(&m.body); a && a->ext)
            length += kAddLinkExtHeader + a->ext->rkeys.size() * kRkeyPairSize;
        if (const auto* q = std::get_if<ReqAddLink>(&m.body))
            length = std::max(length, kReqAddLinkGids + q->gids.size() * 16);
        if (const auto* d = std::get_if<DeleteRkey>(&m.body))
            length = std::max(length, kDeleteRkeyList + d->rkeys.size() * 4);
    }
    std::vector<std::byte> out(length);
    Writer w{out};
    w.u8(0,
         static_cast<std::uint8_t>(m.version == 2 ? 0x20 : 0x00) | static_cast<std::uint8_t>(type));
    if (m.version == 2)
        w.host16(1, static_cast<std::uint16_t>(length));
    else
        w.u8(1, kMessageSize);
    std::uint8_t flags = m.response ? kFlagResponse : 0;

    std::visit(
        [&](const auto& body) {
            using T = std::decay_t<decltype(body)>;
            if constexpr (std::is_same_v<T, ConfirmLink>) {
                flags |= kFlagNoRmbeEyecatcher; // Linux always sets both
                w.bytes(4, body.mac);
                w.bytes(10, body.gid);
                w.be(26, body.qpn, 3);
                w.u8(29, body.linkId);
                w.bytes(30, body.linkUid);
                w.u8(34, body.maxLinks);
                w.u8(35, body.maxConns);
            } else if constexpr (std::is_same_v<T, AddLink>) {
                if (body.reject)
                    flags |= kFlagAddLinkReject;
                if (m.version == 1)
                    w.u8(2, body.rejectReason & 0x0f);
                w.bytes(4, body.mac);
                w.bytes(12, body.gid);
                w.be(28, body.qpn, 3);
                w.u8(31, body.linkId);
                w.u8(32, body.mtu & 0x0f);
                w.be(33, body.psn, 3);
                if (m.version == 2 && body.ext) {
                    const std::size_t e = kMessageSize;
                    w.u8(e, body.ext->direct ? 0x80 : 0);
                    w.bytes(e + 2, body.ext->clientTargetGid);
                    w.host16(e + 26, static_cast<std::uint16_t>(body.ext->rkeys.size()));
                    for (std::size_t i = 0; i < body.ext->rkeys.size(); ++i)
                        writePair(w, e + kAddLinkExtHeader + i * kRkeyPairSize, body.ext->rkeys[i]);
                }
            } else if constexpr (std::is_same_v<T, AddLinkCont>) {
                w.u8(4, body.linkId);
                w.u8(5, body.remaining);
                for (std::size_t i = 0; i < std::min<std::size_t>(body.rkeys.size(), 2); ++i)
                    writePair(w, 8 + i * kRkeyPairSize, body.rkeys[i]);
            } else if constexpr (std::is_same_v<T, DeleteLink>) {
                if (body.all)
                    flags |= kFlagDeleteAll;
                if (body.orderly)
                    flags |= kFlagDeleteOrderly;
                w.u8(4, body.linkId);
                w.be(5, static_cast<std::uint32_t>(body.reason), 4);
            } else if constexpr (std::is_same_v<T, ReqAddLink>) {
                w.u8(24, static_cast<std::uint8_t>(body.gids.size()));
                for (std::size_t i = 0; i < body.gids.size(); ++i)
                    w.bytes(kReqAddLinkGids + i * 16, body.gids[i]);
            } else if constexpr (std::is_same_v<T, ConfirmRkey>) {
                if (body.negative)
                    flags |= kFlagRkeyNegative;
                if (body.retry)
                    flags |= kFlagRkeyRetry;
                w.u8(4, static_cast<std::uint8_t>(std::min<std::size_t>(body.others.size(), 2)));
                w.be(5, body.rkey, 4);
                w.be64(9, body.vaddr);
                for (std::size_t i = 0; i < std::min<std::size_t>(body.others.size(), 2); ++i) {
                    w.u8(17 + i * 13, body.others[i].linkId);
                    w.be(18 + i * 13, body.others[i].rkey, 4);
                    w.be64(22 + i * 13, body.others[i].vaddr);
                }
            } else if constexpr (std::is_same_v<T, TestLink>) {
                w.bytes(4, body.userData);
            } else if constexpr (std::is_same_v<T, DeleteRkey>) {
                if (body.negative)
                    flags |= kFlagRkeyNegative;
                const bool v2Response = m.version == 2 && m.response;
                w.u8(4, v2Response ? body.requested : static_cast<std::uint8_t>(body.rkeys.size()));
                w.u8(5, m.version == 1 ? body.errorMask : body.invalidCount);
                const std::size_t max = m.version == 1 ? 8 : 255;
                for (std::size_t i = 0; i < std::min(body.rkeys.size(), max); ++i)
                    w.be(kDeleteRkeyList + i * 4, body.rkeys[i], 4);
            }
        },
        m.body);
    w.u8(3, flags);
    return out;
}

} // namespace smc::llc
