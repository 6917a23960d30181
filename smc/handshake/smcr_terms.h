// SPDX-License-Identifier: MIT
// SMC-Rv2's first-contact terms: what each side offers, accepts or declines, as pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <variant>

#include "smc/clc/clc_messages.h"
#include "smc/clc/clc_negotiate.h"
#include "smc/core/link_group_manager.h"

namespace smc::net
{

// What SMC-Rv2 adds to our ACCEPT or CONFIRM: the EID, and on first contact the extension.
struct V2Terms {
    clc::Eid eid{};
    clc::FirstContactExt fce{};
};

// Our limits for a new group, and our name in the extension.
struct OurTerms {
    unsigned maxConns = 255;
    unsigned maxLinks = 2;
    clc::Hostname hostname{};
};

// The server's terms for `choice` (Linux smc_clc_fill_fce_v2x): a direct route, as negotiate()
// takes no other; from release 1 on the smaller of the client's limits and ours, and the
// features both have.
V2Terms serverTerms(const clc::Proposal& p, const clc::Choice& choice, const OurTerms& ours);
// The client's terms from a first-contact ACCEPT, or why it declines (Linux
// smc_connect_rdma_v2_prepare, smc_clc_clnt_v2x_features_validate): an indirect route
// (NOINDIRECT), a release past ours (VERSMISMAT), fewer than 16 connections (MAXCONNERR),
// no link or more than ours (MAXLINKERR). What it accepts it echoes (the server checks).
std::variant<V2Terms, clc::DeclineCode> clientTerms(const clc::Accept& accept,
                                                    const OurTerms& ours);
// The server's check of a first-contact CONFIRM's echo (Linux
// smc_clc_v2x_features_confirm_check): the release and, from release 1, the limits it agreed
// to, unchanged; else RELEASEERR, MAXCONNERR or MAXLINKERR.
std::optional<clc::DeclineCode> echoMismatch(const clc::FirstContactExt& ours,
                                             const clc::FirstContactExt& echo);
// The group terms a v2 first contact agreed on: release 1's limits, else the defaults.
GroupTerms groupTerms(const std::optional<V2Terms>& v2);

} // namespace smc::net
