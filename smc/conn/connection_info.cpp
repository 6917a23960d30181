// SPDX-License-Identifier: MIT
// The names of the transports, as smcss prints them.
#include "smc/conn/connection_info.h"

namespace smc
{

const char* toString(Transport transport) noexcept
{
    switch (transport) {
    case Transport::SmcD:
        return "SMC-D";
    case Transport::SmcR:
        return "SMC-R";
    case Transport::Tcp:
        return "TCP";
    case Transport::None:
        return "none";
    }
    return "?";
}

} // namespace smc
