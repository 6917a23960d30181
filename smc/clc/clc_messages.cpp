// SPDX-License-Identifier: MIT
// CLC names (types, decline codes) and the small builders: EIDs, hostnames, DECLINEs.
#include "smc/clc/clc_messages.h"

#include <algorithm>

namespace smc::clc
{

const char* toString(DeclineCode code) noexcept
{
    switch (code) {
    case DeclineCode::Mem:
        return "MEM";
    case DeclineCode::TimeoutCl:
        return "TIMEOUT_CL";
    case DeclineCode::TimeoutAl:
        return "TIMEOUT_AL";
    case DeclineCode::CnfErr:
        return "CNFERR";
    case DeclineCode::PeerNoSmc:
        return "PEERNOSMC";
    case DeclineCode::Ipsec:
        return "IPSEC";
    case DeclineCode::NoSmcDev:
        return "NOSMCDEV";
    case DeclineCode::NoSmcdDev:
        return "NOSMCDDEV";
    case DeclineCode::NoSmcrDev:
        return "NOSMCRDEV";
    case DeclineCode::NoIsm2Supp:
        return "NOISM2SUPP";
    case DeclineCode::NoV2Ext:
        return "NOV2EXT";
    case DeclineCode::NoV2DExt:
        return "NOV2DEXT";
    case DeclineCode::NoSeid:
        return "NOSEID";
    case DeclineCode::NoSmcd2Dev:
        return "NOSMCD2DEV";
    case DeclineCode::NoUeid:
        return "NOUEID";
    case DeclineCode::ReleaseErr:
        return "RELEASEERR";
    case DeclineCode::MaxConnErr:
        return "MAXCONNERR";
    case DeclineCode::MaxLinkErr:
        return "MAXLINKERR";
    case DeclineCode::ModeUnsupp:
        return "MODEUNSUPP";
    case DeclineCode::RmbeEc:
        return "RMBE_EC";
    case DeclineCode::OptUnsupp:
        return "OPTUNSUPP";
    case DeclineCode::DiffPrefix:
        return "DIFFPREFIX";
    case DeclineCode::GetVlanErr:
        return "GETVLANERR";
    case DeclineCode::IsmVlanErr:
        return "ISMVLANERR";
    case DeclineCode::NoActLink:
        return "NOACTLINK";
    case DeclineCode::NoSrvLink:
        return "NOSRVLINK";
    case DeclineCode::VersMismat:
        return "VERSMISMAT";
    case DeclineCode::MaxDmb:
        return "MAX_DMB";
    case DeclineCode::NoRoute:
        return "NOROUTE";
    case DeclineCode::NoIndirect:
        return "NOINDIRECT";
    case DeclineCode::SyncErr:
        return "SYNCERR";
    case DeclineCode::PeerDecl:
        return "PEERDECL";
    case DeclineCode::IntErr:
        return "INTERR";
    case DeclineCode::ErrRtok:
        return "ERR_RTOK";
    case DeclineCode::ErrRdyLnk:
        return "ERR_RDYLNK";
    case DeclineCode::ErrRegBuf:
        return "ERR_REGBUF";
    }
    return "?";
}

const char* toString(Type type) noexcept
{
    switch (type) {
    case Type::Proposal:
        return "PROPOSAL";
    case Type::Accept:
        return "ACCEPT";
    case Type::Confirm:
        return "CONFIRM";
    case Type::Decline:
        return "DECLINE";
    }
    return "?";
}

Type typeOf(const Message& message) noexcept
{
    static constexpr Type kTypes[] = {Type::Proposal, Type::Accept, Type::Confirm, Type::Decline};
    return kTypes[message.index()];
}

std::optional<Eid> makeEid(std::string_view text)
{
    // Compare in ASCII by hand: <cctype> depends on the locale.
    const auto alnumUpper = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
    if (text.empty() || text.size() > kEidSize || !alnumUpper(text.front()))
        return std::nullopt;
    if (!std::all_of(text.begin(), text.end(),
                     [&](char c) { return alnumUpper(c) || c == '.' || c == '-'; }))
        return std::nullopt;
    Eid eid;
    eid.fill(' ');
    std::copy(text.begin(), text.end(), eid.begin());
    return eid;
}

Hostname makeHostname(std::string_view text)
{
    Hostname h;
    h.fill(' ');
    std::copy_n(text.begin(), std::min(text.size(), h.size()), h.begin());
    return h;
}

Decline makeDecline(DeclineCode code, std::uint8_t version, const SystemId& systemId)
{
    Decline d;
    d.version = version;
    d.outOfSync = code == DeclineCode::SyncErr; // tells the peer to drop the link group
    d.systemId = systemId;
    d.diagnosis = code;
    d.osType = version == kVersion1 ? 0 : kOsLinux;
    return d;
}

} // namespace smc::clc
