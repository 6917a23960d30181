// SPDX-License-Identifier: MIT
// ErrorCategory<Errc>: a std::error_category made of a name, messages and generic conditions.
#pragma once

#include <optional>
#include <string>
#include <system_error>

namespace smc
{

// The std::error_category of one layer's error enum, so that a layer writes
// only what differs: its name, the message of each enumerator and, if some
// codes are also generic POSIX conditions, which ones. Messages are string
// literals; a value that is no enumerator (the message function returns
// nullptr) reads "unknown <what> error <value>". Codes without a generic
// condition are their own condition (the std::error_category default).
//
// Example:
//
//   const char* poolMessage(PoolErrc e) noexcept
//   {
//       switch (e) {
//       case PoolErrc::InvalidSize:
//           return "buffer size must be between 1 byte and the largest size class";
//       ...
//       }
//       return nullptr;
//   }
//
//   const std::error_category& poolCategory() noexcept
//   {
//       static const ErrorCategory<PoolErrc> category("smc.pool", "pool", poolMessage);
//       return category;
//   }
template <typename Errc> class ErrorCategory final : public std::error_category
{
public:
    // The enumerator's message, or nullptr for a value that is none.
    using MessageFn = const char* (*)(Errc) noexcept;
    // The generic condition a code is (`ec == std::errc::...` holds), or none.
    using ConditionFn = std::optional<std::errc> (*)(Errc) noexcept;

    constexpr ErrorCategory(const char* categoryName, const char* what, MessageFn messageFn,
                            ConditionFn conditionFn = nullptr) noexcept
        : name_(categoryName), what_(what), message_(messageFn), condition_(conditionFn)
    {
    }

    const char* name() const noexcept override { return name_; }

    std::string message(int value) const override
    {
        if (const char* text = message_(static_cast<Errc>(value)))
            return text;
        return std::string("unknown ") + what_ + " error " + std::to_string(value);
    }

    std::error_condition default_error_condition(int value) const noexcept override
    {
        if (condition_ != nullptr)
            if (std::optional<std::errc> generic = condition_(static_cast<Errc>(value)))
                return *generic;
        return {value, *this};
    }

private:
    const char* name_;
    const char* what_;
    MessageFn message_;
    ConditionFn condition_;
};

} // namespace smc
