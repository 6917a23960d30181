// SPDX-License-Identifier: MIT
// SMC-Rv2's first-contact terms, as Linux checks them on either side.
#include "smc/handshake/smcr_terms.h"

#include <algorithm>

namespace smc::net
{

using clc::DeclineCode;

V2Terms serverTerms(const clc::Proposal& p, const clc::Choice& choice, const OurTerms& ours)
{
    V2Terms t;
    t.eid = choice.eid;
    t.fce.v2Direct = true;
    t.fce.osType = clc::kOsLinux;
    t.fce.release = choice.release;
    t.fce.hostname = ours.hostname;
    if (choice.release >= clc::kRelease1) {
        t.fce.maxConns =
            static_cast<std::uint8_t>(std::min<unsigned>(p.v2.maxConns, ours.maxConns));
        t.fce.maxLinks =
            static_cast<std::uint8_t>(std::min<unsigned>(p.v2.maxLinks, ours.maxLinks));
        t.fce.featureMask = p.v2.featureMask & clc::kFeatureEmulatedIsm;
    }
    return t;
}

std::variant<V2Terms, DeclineCode> clientTerms(const clc::Accept& accept, const OurTerms& ours)
{
    const clc::FirstContactExt& f = accept.fce;
    if (!f.v2Direct)
        return DeclineCode::NoIndirect; // we route directly only
    if (f.release > clc::kRelease1)
        return DeclineCode::VersMismat;
    if (f.release >= clc::kRelease1 && f.maxConns < 16)
        return DeclineCode::MaxConnErr;
    if (f.release >= clc::kRelease1 && (f.maxLinks < 1 || f.maxLinks > ours.maxLinks))
        return DeclineCode::MaxLinkErr;
    V2Terms t;
    if (const auto* r = std::get_if<clc::SmcrAcceptConfirm>(&accept.path))
        t.eid = r->eid;
    t.fce = f; // echoed: the server checks release and limits for equality
    t.fce.osType = clc::kOsLinux;
    t.fce.hostname = ours.hostname;
    t.fce.featureMask &= clc::kFeatureEmulatedIsm;
    t.fce.vendorOptions = 0;
    return t;
}

std::optional<DeclineCode> echoMismatch(const clc::FirstContactExt& ours,
                                        const clc::FirstContactExt& echo)
{
    if (echo.release != ours.release)
        return DeclineCode::ReleaseErr;
    if (ours.release >= clc::kRelease1 && echo.maxConns != ours.maxConns)
        return DeclineCode::MaxConnErr;
    if (ours.release >= clc::kRelease1 && echo.maxLinks != ours.maxLinks)
        return DeclineCode::MaxLinkErr;
    return std::nullopt;
}

GroupTerms groupTerms(const std::optional<V2Terms>& v2)
{
    if (!v2)
        return {};
    if (v2->fce.release < clc::kRelease1)
        return {clc::kVersion2};
    return {clc::kVersion2, v2->fce.maxConns, v2->fce.maxLinks};
}

} // namespace smc::net
