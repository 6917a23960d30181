// SPDX-License-Identifier: MIT
// Messages of the connection error category.
#include "smc/core/conn_errors.h"

#include <string>

namespace smc
{
namespace
{

class ConnCategory final : public std::error_category
{
public:
    const char* name() const noexcept override { return "smc.conn"; }

    std::string message(int value) const override
    {
        switch (static_cast<ConnErrc>(value)) {
        case ConnErrc::HandshakeDone:
            return "the handshake was completed or abandoned already";
        case ConnErrc::PeerRmbUnknown:
            return "the peer's RMB is not known yet (complete the handshake first)";
        case ConnErrc::OutOfRange:
            return "write beyond the end of the connection's send buffer";
        case ConnErrc::UnknownConnection:
            return "not a connection of this link group";
        }
        return "unknown connection error " + std::to_string(value);
    }
};

} // namespace

const std::error_category& connCategory() noexcept
{
    static const ConnCategory category;
    return category;
}

} // namespace smc
