// SPDX-License-Identifier: MIT
// RkeyFlows: CONFIRM_RKEY and DELETE_RKEY, ours (our RMBs told to the peer) and the peer's (its
// RMBs in our rtoken table).
#pragma once

#include "smc/llc/llc_core.h"

namespace smc
{

class RkeyFlows
{
public:
    explicit RkeyFlows(LlcCore& core) : core_(core) {}

    // Holding an Rkey flow token. CONFIRM_RKEY: our RMB on every ACTIVE link but `via` (CLC
    // told `via`).
    Result<void> confirmRkey(const BufferDesc& rmb, unsigned via);
    // DELETE_RKEY: the peer forgets our RMB (the whole row).
    Result<void> deleteRkey(const BufferDesc& rmb);
    // The peer's requests: they run beside our own flows (Linux allows it).
    void remoteConfirmRkey(unsigned slot, const llc::Message& m);
    void remoteDeleteRkey(unsigned slot, const llc::Message& m);

private:
    LlcCore& core_;
};

} // namespace smc
