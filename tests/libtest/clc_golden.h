// SPDX-License-Identifier: MIT
// Hand-built CLC messages in Linux's byte layouts, field by field, with the decoded form of each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "smc/clc/clc_messages.h"

namespace smc::testing
{

// Appends fields in wire order; each call is one field (or a run of zero bytes).
class WireBuilder
{
public:
    WireBuilder& put(std::initializer_list<std::uint8_t> field)
    {
        for (std::uint8_t b : field)
            bytes_.push_back(std::byte{b});
        return *this;
    }
    WireBuilder& zeros(std::size_t n) { return fill(0, n); }
    WireBuilder& fill(std::uint8_t value, std::size_t n)
    {
        bytes_.insert(bytes_.end(), n, std::byte{value});
        return *this;
    }
    WireBuilder& text(std::string_view s, std::size_t width) // blank padded
    {
        for (std::size_t i = 0; i < width; ++i)
            bytes_.push_back(std::byte(i < s.size() ? static_cast<std::uint8_t>(s[i]) : ' '));
        return *this;
    }
    std::size_t size() const { return bytes_.size(); }
    std::vector<std::byte> done() const { return bytes_; }

private:
    std::vector<std::byte> bytes_;
};

struct Golden {
    std::string name;
    std::vector<std::byte> bytes;
    clc::Message message;
};

namespace golden
{
using namespace smc::clc;

inline constexpr std::initializer_list<std::uint8_t> kSmcr = {0xe2, 0xd4, 0xc3, 0xd9};
inline constexpr std::initializer_list<std::uint8_t> kSmcd = {0xe2, 0xd4, 0xc3, 0xc4};

inline const SystemId kSystemId = {0x12, 0x34, 0x02, 0x00, 0x00, 0x0a, 0x0b, 0x0c};
inline const Gid kGid = {0xfe, 0x80, 0,    0,    0,    0,    0,    0,
                         0x02, 0x00, 0x00, 0xff, 0xfe, 0x0a, 0x0b, 0x0c};
inline const Mac kMac = {0x02, 0x00, 0x00, 0x0a, 0x0b, 0x0c};
inline constexpr std::uint64_t kLoGid = 0x1122334455667788;    // loopback-ism GID
inline constexpr std::uint64_t kLoGidExt = 0x99aabbccddeeff00; // and its second GID
inline const Eid kUeid = *makeEid("SMC-BPFTEST-UEID");

inline WireBuilder& systemIdGidMac(WireBuilder& w)
{
    w.put({0x12, 0x34, 0x02, 0x00, 0x00, 0x0a, 0x0b, 0x0c}); // system id: 2 random + MAC
    w.put({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x00, 0x00, 0xff, 0xfe, 0x0a, 0x0b, 0x0c}); // GID
    return w.put({0x02, 0x00, 0x00, 0x0a, 0x0b, 0x0c});                                    // MAC
}

// SMC-R v1 PROPOSAL from an old peer (version 1, no SMC-D area), IPv4: 52 bytes.
inline Golden proposalV1Ipv4()
{
    WireBuilder w;
    w.put(kSmcr).put({0x01}).put({0x00, 0x34}).put({0x10}); // 0: SMCR, PROPOSAL, 52, v1 R
    systemIdGidMac(w);                                      // 8, 16, 32
    w.put({0x00, 0x00});                                    // 38: iparea_offset 0
    w.put({192, 168, 1, 0}).put({24});                      // 40: 192.168.1.0/24
    w.zeros(2).put({0});                                    // 45: reserved, 0 IPv6 prefixes
    w.put(kSmcr);                                           // 48: trailer
    Proposal p;
    p.version = 1;
    p.typeV1 = SmcType::SmcR;
    p.systemId = kSystemId;
    p.gid = kGid;
    p.mac = kMac;
    p.prefixes.ipv4Subnet = {192, 168, 1, 0};
    p.prefixes.ipv4PrefixLength = 24;
    return {"proposal-v1-ipv4", w.done(), p};
}

// SMC-R v1 PROPOSAL over IPv6: two prefixes, IPv4 fields 0: 86 bytes.
inline Golden proposalV1Ipv6()
{
    WireBuilder w;
    w.put(kSmcr).put({0x01}).put({0x00, 0x56}).put({0x10}); // 0: length 86, v1 R
    systemIdGidMac(w);
    w.put({0x00, 0x00});                                             // 38: iparea_offset 0
    w.zeros(4).put({0}).zeros(2).put({0x02});                        // 40: no IPv4, 2 IPv6 prefixes
    w.put({0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01}).zeros(10).put({48}); // 48: 2001:db8:1::/48
    w.put({0xfd, 0x00, 0, 0, 0, 0, 0x00, 0x07}).zeros(8).put({64});  // 65: fd00:0:0:7::/64
    w.put(kSmcr);                                                    // 82: trailer
    Proposal p;
    p.version = 1;
    p.typeV1 = SmcType::SmcR;
    p.systemId = kSystemId;
    p.gid = kGid;
    p.mac = kMac;
    p.prefixes.ipv6 = {{{0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01}, 48},
                       {{0xfd, 0x00, 0, 0, 0, 0, 0x00, 0x07}, 64}};
    return {"proposal-v1-ipv6", w.done(), p};
}

inline WireBuilder& loopbackEntries(WireBuilder& w)
{
    w.put({0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}).put({0xff, 0xff});        // gid, CHID
    return w.put({0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00}).put({0xff, 0xff}); // gid_ext
}

// What Linux 6.x sends with a RoCE device and loopback-ism: version 2 offering SMC-Rv1
// (IPv4 prefix) and SMC-Dv2 (loopback-ism, one UEID): 232 bytes.
inline Golden proposalV2Linux()
{
    WireBuilder w;
    w.put(kSmcr).put({0x01}).put({0x00, 0xe8}).put({0x24}); // 0: 232, v2, typev2 D, typev1 R
    systemIdGidMac(w);
    w.put({0x00, 0x28});                                 // 38: iparea_offset 40
    w.zeros(8).put({0x00, 0x00});                        // 40: no native ISM
    w.put({0x00, 0x24});                                 // 50: v2 ext at 52 + 36 = 88
    w.zeros(3).zeros(5).zeros(20);                       // 52: OUI, vendor options, reserved
    w.put({192, 168, 1, 0}).put({24}).zeros(2).put({0}); // 80: prefix area
    w.put({1}).put({2}).zeros(1).put({0x10});            // 88: 1 EID, 2 ISM entries, release 1
    w.zeros(2).put({0x00, 0x40});                        // 92: SMC-Dv2 ext at 96 + 64 = 160
    w.zeros(16).put({0}).put({0}).put({0x00, 0x01});     // 96: no RoCEv2 GID, feature mask
    w.zeros(12);                                         // 116: reserved
    w.text("SMC-BPFTEST-UEID", 32);                      // 128: user EID
    w.zeros(32).zeros(16);                               // 160: system EID (none), reserved
    loopbackEntries(w);                                  // 208: loopback-ism's two entries
    w.put(kSmcr);                                        // 228: trailer
    Proposal p;
    p.typeV1 = SmcType::SmcR;
    p.typeV2 = SmcType::SmcD;
    p.systemId = kSystemId;
    p.gid = kGid;
    p.mac = kMac;
    p.prefixes.ipv4Subnet = {192, 168, 1, 0};
    p.prefixes.ipv4PrefixLength = 24;
    p.v2.release = kRelease1;
    p.v2.userEids = {kUeid};
    p.v2.featureMask = kFeatureEmulatedIsm;
    p.smcdV2.entries = {{kLoGid, kLoopbackChid}, {kLoGidExt, kLoopbackChid}};
    return {"proposal-v2-linux", w.done(), p};
}

// SMC-Dv2 only (loopback-ism, one UEID), no v1 offer: 224 bytes.
inline Golden proposalV2LoopbackOnly()
{
    WireBuilder w;
    w.put(kSmcr).put({0x01}).put({0x00, 0xe0}).put({0x26}); // 0: 224, v2, typev2 D, typev1 N
    w.zeros(8 + 16 + 6);                                    // 8: no SMC-R
    w.put({0x00, 0x00});                                    // 38: iparea_offset 0
    w.zeros(10).put({0x00, 0x1c}).zeros(28);                // 40: v2 ext at 52 + 28 = 80
    w.put({1}).put({2}).zeros(1).put({0x10}).zeros(2).put({0x00, 0x40}); // 80: ext header
    w.zeros(16).zeros(2).put({0x00, 0x01}).zeros(12); // 88: GID, max, features, rsvd
    w.text("SMC-BPFTEST-UEID", 32);                   // 120: user EID
    w.zeros(48);                                      // 152: SMC-Dv2 ext fixed part
    loopbackEntries(w);                               // 200
    w.put(kSmcr);                                     // 220: trailer
    Proposal p;
    p.typeV2 = SmcType::SmcD;
    p.v2.release = kRelease1;
    p.v2.userEids = {kUeid};
    p.v2.featureMask = kFeatureEmulatedIsm;
    p.smcdV2.entries = {{kLoGid, kLoopbackChid}, {kLoGidExt, kLoopbackChid}};
    return {"proposal-v2-loopback", w.done(), p};
}

inline SmcdAcceptConfirm loopbackSmcd()
{
    SmcdAcceptConfirm d;
    d.gid = kLoGid;
    d.token = 0x00000000a5a52001;
    d.dmbeSize = 1;
    d.linkId = {0x00, 0x00, 0x01, 0x02};
    d.chid = kLoopbackChid;
    d.eid = kUeid;
    d.gidExt = kLoGidExt;
    return d;
}

inline WireBuilder& loopbackSmcdBody(WireBuilder& w)
{
    w.put({0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88});        // 8: sender GID
    w.put({0, 0, 0, 0, 0xa5, 0xa5, 0x20, 0x01});                    // 16: DMB token
    w.put({0x00}).put({0x10}).zeros(2);                             // 24: dmbe_idx 0, size class 1
    w.put({0x00, 0x00, 0x01, 0x02});                                // 28: link id
    w.put({0xff, 0xff});                                            // 32: CHID loopback-ism
    w.text("SMC-BPFTEST-UEID", 32);                                 // 34: negotiated EID
    return w.put({0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00}); // 66: gid_ext
}

// SMC-Dv2 ACCEPT over loopback-ism, first contact, release 1 (52-byte extension): 130 bytes.
inline Golden acceptSmcdV2()
{
    WireBuilder w;
    w.put(kSmcd).put({0x02}).put({0x00, 0x82}).put({0x29}); // 0: 130, v2, first contact, D
    loopbackSmcdBody(w);
    w.put({0x00}).put({0x21}).zeros(2); // 74: not direct, Linux, release 1
    w.text("host-a", 32);               // 78: hostname
    w.zeros(2).put({0x00, 0x01});       // 110: reserved (SMC-D), feature mask
    w.zeros(4).zeros(8);                // 114: vendor options, reserved
    w.put(kSmcd);                       // 126: trailer
    Accept a;
    a.firstContact = true;
    a.path = loopbackSmcd();
    a.fce.release = kRelease1;
    a.fce.hostname = makeHostname("host-a");
    a.fce.featureMask = kFeatureEmulatedIsm;
    return {"accept-smcd-v2", w.done(), a};
}

// SMC-Dv2 CONFIRM, first contact, release 0: the 36-byte extension only, 114 bytes.
inline Golden confirmSmcdV2Release0()
{
    WireBuilder w;
    w.put(kSmcd).put({0x03}).put({0x00, 0x72}).put({0x29}); // 0: CONFIRM, 114
    loopbackSmcdBody(w);
    w.put({0x00}).put({0x20}).zeros(2); // 74: Linux, release 0
    w.text("host-b", 32);               // 78: hostname
    w.put(kSmcd);                       // 110: trailer
    Confirm c;
    c.firstContact = true;
    c.path = loopbackSmcd();
    c.fce.hostname = makeHostname("host-b");
    return {"confirm-smcd-v2-r0", w.done(), c};
}

inline SmcrAcceptConfirm smcrBody()
{
    SmcrAcceptConfirm s;
    s.systemId = kSystemId;
    s.gid = kGid;
    s.mac = kMac;
    s.qpn = 0x010203;
    s.rkey = 0x1234;
    s.alertToken = 5;
    s.rmbeSize = 1;
    s.qpMtu = 3;
    s.rmbAddr = 0x00007f0012345000;
    s.psn = 0xabcdef;
    return s;
}

inline WireBuilder& smcrWireBody(WireBuilder& w)
{
    systemIdGidMac(w);                                       // 8, 16, 32
    w.put({0x01, 0x02, 0x03});                               // 38: QP number
    w.put({0x00, 0x00, 0x12, 0x34});                         // 41: rkey
    w.put({0x01});                                           // 45: rmbe_idx
    w.put({0x00, 0x00, 0x00, 0x05});                         // 46: alert token
    w.put({0x13}).zeros(1);                                  // 50: 32 KiB RMBE, MTU 1024; reserved
    w.put({0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x50, 0x00}); // 52: RMB address
    return w.zeros(1).put({0xab, 0xcd, 0xef});               // 60: reserved, PSN
}

// SMC-Rv1 ACCEPT, first contact: 68 bytes.
inline Golden acceptSmcrV1()
{
    WireBuilder w;
    w.put(kSmcr).put({0x02}).put({0x00, 0x44}).put({0x18}); // 0: 68, v1, first contact, R
    smcrWireBody(w);
    w.put(kSmcr); // 64: trailer
    Accept a;
    a.version = 1;
    a.firstContact = true;
    a.path = smcrBody();
    return {"accept-smcr-v1", w.done(), a};
}

// SMC-Rv1 CONFIRM on a known link group: 68 bytes.
inline Golden confirmSmcrV1()
{
    WireBuilder w;
    w.put(kSmcr).put({0x03}).put({0x00, 0x44}).put({0x10}); // 0: CONFIRM, 68, v1, R
    smcrWireBody(w);
    w.put(kSmcr);
    Confirm c;
    c.version = 1;
    c.path = smcrBody();
    return {"confirm-smcr-v1", w.done(), c};
}

// SMC-Rv2 CONFIRM, first contact, with the GID list (two GIDs): 196 bytes.
inline Golden confirmSmcrV2()
{
    WireBuilder w;
    w.put(kSmcr).put({0x03}).put({0x00, 0xc4}).put({0x28}); // 0: 196, v2, first contact, R
    smcrWireBody(w);
    w.text("SMC-BPFTEST-UEID", 32).zeros(8);     // 64: EID, reserved
    w.put({0x80}).put({0x21}).zeros(2);          // 104: direct, Linux, release 1
    w.text("host-b", 32);                        // 108: hostname
    w.put({0xff}).put({0x02}).put({0x00, 0x01}); // 140: max conns, max links, features
    w.zeros(4).zeros(8);                         // 144: vendor options, reserved
    w.put({2}).zeros(3);                         // 156: GID list: 2
    w.put({0xfe, 0x80}).zeros(13).put({0x01});   // 160: fe80::1
    w.put({0xfe, 0x80}).zeros(13).put({0x02});   // 176: fe80::2
    w.put(kSmcr);                                // 192: trailer
    SmcrAcceptConfirm s = smcrBody();
    s.eid = kUeid;
    s.gidList = {Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01},
                 Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02}};
    Confirm c;
    c.firstContact = true;
    c.path = s;
    c.fce.v2Direct = true;
    c.fce.release = kRelease1;
    c.fce.hostname = makeHostname("host-b");
    c.fce.maxConns = 255;
    c.fce.maxLinks = 2;
    c.fce.featureMask = kFeatureEmulatedIsm;
    return {"confirm-smcr-v2", w.done(), c};
}

// DECLINE v1 (no subnet in common): 28 bytes.
inline Golden declineV1()
{
    WireBuilder w;
    w.put(kSmcr).put({0x04}).put({0x00, 0x1c}).put({0x10});  // 0: DECLINE, 28, v1
    w.put({0x12, 0x34, 0x02, 0x00, 0x00, 0x0a, 0x0b, 0x0c}); // 8: system id
    w.put({0x03, 0x07, 0x00, 0x00});                         // 16: DIFFPREFIX
    w.put({0x00}).zeros(3);                                  // 20: os type 0 (v1), reserved
    w.put(kSmcr);                                            // 24: trailer
    return {"decline-v1", w.done(), makeDecline(DeclineCode::DiffPrefix, 1, kSystemId)};
}

// DECLINE v2 with the out-of-sync bit (SYNCERR), SMC-D (no system id): 44 bytes.
inline Golden declineV2SyncErr()
{
    WireBuilder w;
    w.put(kSmcr).put({0x04}).put({0x00, 0x2c}).put({0x28}); // 0: 44, v2, out of sync
    w.zeros(8);                                             // 8: no system id
    w.put({0x04, 0x00, 0x00, 0x00});                        // 16: SYNCERR
    w.put({0x20}).zeros(3);                                 // 20: Linux
    w.zeros(16);                                            // 24: 4 more diagnosis codes
    w.put(kSmcr);                                           // 40: trailer
    return {"decline-v2-syncerr", w.done(), makeDecline(DeclineCode::SyncErr, 2, SystemId{})};
}

} // namespace golden

// The PROPOSAL Linux 6.12.118 (Debian) sent to a listener of ours in the rxe guest, with the
// SMC TCP option in our SYN-ACK, UEID SMC-CORE-LOOPBACK and rxe0 on 192.0.2.1/24: SMC-Rv2
// only, as tests/interop/capture_proposal.sh printed it.
inline std::vector<std::byte> linux612Proposal()
{
    const std::string_view hex = "e2d4c3d901009c22000000000000000000000000000000000000000000000000"
                                 "000000000000000000000000000000000000001c000000000000000000000000"
                                 "0000000000000000000000000000000001000010000000000000000000000000"
                                 "0000ffffc0000201ff020001000000000000000000000000534d432d434f5245"
                                 "2d4c4f4f504241434b202020202020202020202020202020e2d4c3d9";
    const auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    std::vector<std::byte> bytes;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
        bytes.push_back(static_cast<std::byte>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
    return bytes;
}

inline std::vector<Golden> clcGoldens()
{
    using namespace golden;
    return {proposalV1Ipv4(),  proposalV1Ipv6(),
            proposalV2Linux(), proposalV2LoopbackOnly(),
            acceptSmcdV2(),    confirmSmcdV2Release0(),
            acceptSmcrV1(),    confirmSmcrV1(),
            confirmSmcrV2(),   declineV1(),
            declineV2SyncErr()};
}

} // namespace smc::testing
