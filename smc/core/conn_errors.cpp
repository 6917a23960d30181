// SPDX-License-Identifier: MIT
// Messages of the connection error category.
#include "smc/core/conn_errors.h"

#include "base/error_category.h"

namespace smc
{
namespace
{

const char* connMessage(ConnErrc e) noexcept
{
    switch (e) {
    case ConnErrc::HandshakeDone:
        return "the handshake was completed or abandoned already";
    case ConnErrc::PeerRmbUnknown:
        return "the peer's RMB is not known yet (complete the handshake first)";
    case ConnErrc::SndbufRange:
        return "write beyond the end of the connection's send buffer";
    case ConnErrc::PeerRmbRange:
        return "write beyond the end of the peer's receive buffer (RMB)";
    case ConnErrc::PeerRmbGone:
        return "the peer deleted its receive buffer (DELETE_RKEY); the connection is dead";
    case ConnErrc::UnknownConnection:
        return "not a connection of this link group";
    case ConnErrc::Closed:
        return "the connection was closed already";
    }
    return nullptr;
}

} // namespace

const std::error_category& connCategory() noexcept
{
    static const ErrorCategory<ConnErrc> category("smc.conn", "connection", connMessage);
    return category;
}

} // namespace smc
