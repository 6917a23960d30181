// SPDX-License-Identifier: MIT
// The checked distance of an untrusted CDC cursor (connection notes §2.3, hardening).
#include "smc/cdc/cdc_cursor.h"

namespace smc::cdc
{

Result<std::size_t> validateCursor(std::size_t ringSize, Cursor reference, Cursor received) noexcept
{
    if (received.count >= ringSize)
        return CdcErrc::CursorOutOfRange;
    const std::int64_t size = static_cast<std::int64_t>(ringSize);
    const std::int64_t delta = std::int64_t(received.count) - reference.count;
    switch (static_cast<std::uint16_t>(received.wrap - reference.wrap)) {
    case 0: // same lap
        if (delta < 0)
            return CdcErrc::CursorBackwards;
        return static_cast<std::size_t>(delta);
    case 1: // one lap on: at most a ring ahead means at or before reference's count
        if (delta > 0)
            return CdcErrc::CursorTooFar;
        return static_cast<std::size_t>(size + delta);
    case 0xffff: // one lap back
        return CdcErrc::CursorBackwards;
    default: // two laps or more either way: no honest peer is there
        return CdcErrc::CursorTooFar;
    }
}

} // namespace smc::cdc
