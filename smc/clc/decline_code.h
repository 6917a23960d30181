// SPDX-License-Identifier: MIT
// DeclineCode: why an SMC handshake fell back to TCP (a CLC DECLINE's peer diagnosis).
#pragma once

#include <cstdint>

namespace smc::clc
{

// Peer diagnosis codes of a DECLINE (Linux SMC_CLC_DECL_*). The field is any 32-bit value:
// an unknown code survives decode and encode unchanged.
enum class DeclineCode : std::uint32_t {
    Mem = 0x01010000,        // allocation failed
    TimeoutCl = 0x02010000,  // LLC CONFIRM_LINK timed out
    TimeoutAl = 0x02020000,  // LLC ADD_LINK timed out
    CnfErr = 0x03000000,     // configuration (prefix, VLAN)
    PeerNoSmc = 0x03010000,  // peer did not offer SMC
    Ipsec = 0x03020000,      // the TCP connection uses IPsec
    NoSmcDev = 0x03030000,   // no SMC-R or SMC-D device
    NoSmcdDev = 0x03030001,  // no SMC-D device
    NoSmcrDev = 0x03030002,  // no SMC-R device
    NoIsm2Supp = 0x03030003, // no ISMv2-capable device
    NoV2Ext = 0x03030004,    // proposal lacks the v2 extension
    NoV2DExt = 0x03030005,   // proposal lacks the SMC-Dv2 extension
    NoSeid = 0x03030006,     // peer sent no system EID
    NoSmcd2Dev = 0x03030007, // no matching SMC-Dv2 device
    NoUeid = 0x03030008,     // no usable EID
    ReleaseErr = 0x03030009, // v2.1 release negotiation
    MaxConnErr = 0x0303000a, // v2.1 max connections negotiation
    MaxLinkErr = 0x0303000b, // v2.1 max links negotiation
    ModeUnsupp = 0x03040000, // ACCEPT chose a type/version that was not proposed
    RmbeEc = 0x03050000,     // CONFIRM_LINK without the no-RMBE-eyecatcher bits
    OptUnsupp = 0x03060000,  // TCP fast open
    DiffPrefix = 0x03070000, // no local interface in the proposed subnet
    GetVlanErr = 0x03080000, // VLAN lookup
    IsmVlanErr = 0x03090000, // ISM VLAN registration
    NoActLink = 0x030a0000,  // no active link in the link group
    NoSrvLink = 0x030b0000,  // the server's link is unknown
    VersMismat = 0x030c0000, // version mismatch
    MaxDmb = 0x030d0000,     // the ISM device's DMB limit
    NoRoute = 0x030e0000,    // SMC-Rv2: no route to the peer
    NoIndirect = 0x030f0000, // SMC-Rv2: direct/indirect mismatch
    SyncErr = 0x04000000,    // client found no link group the server said to reuse
    PeerDecl = 0x05000000,   // internal: the peer declined
    IntErr = 0x09990000,     // internal error
    ErrRtok = 0x09990001,    // rtoken handling
    ErrRdyLnk = 0x09990002,  // link bring-up
    ErrRegBuf = 0x09990003,  // buffer registration
};
// Linux's name without the SMC_CLC_DECL_ prefix ("NOSMCDDEV"); "?" for an unknown code.
const char* toString(DeclineCode code) noexcept;

} // namespace smc::clc
