// SPDX-License-Identifier: MIT
// Result<T>: a value or a std::error_code, shaped like C++23 std::expected.
#pragma once

#include <cassert>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

namespace smc
{

namespace detail
{
// value() on an error: a bug in the caller. It fails the same way in every
// build type (message on stderr, then abort), never undefined behaviour.
[[noreturn]] void badResultAccess(std::error_code error) noexcept;
} // namespace detail

// Errors are stored as (value, category) rather than a std::error_code, whose
// default constructor calls the out-of-line std::system_category(): success
// must cost nothing on the data path.
namespace detail
{
class ErrorStore
{
public:
    ErrorStore() = default;
    ErrorStore(std::error_code ec) noexcept : value_(ec.value()), category_(&ec.category()) {}
    bool failed() const noexcept { return category_ != nullptr && value_ != 0; }
    std::error_code get() const noexcept
    {
        return category_ ? std::error_code(value_, *category_) : std::error_code();
    }

private:
    int value_ = 0;
    const std::error_category* category_ = nullptr;
};
} // namespace detail

// Control-path functions return Result<T>; the member names follow std::expected
// (has_value, value, error, operator*) so that moving to it later is a rename.
//
// Example:
//   Result<BufferRef> r = pool.acquire(BufferKind::Rmb, 65536);
//   if (!r)
//       return r.error();
//   use(r->data());
template <typename T> class [[nodiscard]] Result
{
public:
    Result(T value) : value_(std::move(value)) {}
    Result(std::error_code error) : error_(error) { assert(error); }
    template <typename E>
    requires std::is_error_code_enum_v<E> Result(E error)
        : Result(std::error_code(make_error_code(error)))
    {
    }

    bool has_value() const noexcept { return value_.has_value(); }
    explicit operator bool() const noexcept { return has_value(); }

    // Only on success: on an error these abort (detail::badResultAccess).
    T& value() &
    {
        check();
        return *value_;
    }
    const T& value() const&
    {
        check();
        return *value_;
    }
    T&& value() &&
    {
        check();
        return std::move(*value_);
    }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    std::error_code error() const noexcept { return error_.get(); }

private:
    void check() const noexcept
    {
        if (!value_.has_value()) [[unlikely]]
            detail::badResultAccess(error_.get());
    }

    std::optional<T> value_;
    detail::ErrorStore error_;
};

// Result<void>: success, or an error code.
template <> class [[nodiscard]] Result<void>
{
public:
    Result() = default;
    Result(std::error_code error) : error_(error) {}
    template <typename E>
    requires std::is_error_code_enum_v<E> Result(E error) : error_(make_error_code(error)) {}

    bool has_value() const noexcept { return !error_.failed(); }
    explicit operator bool() const noexcept { return has_value(); }
    std::error_code error() const noexcept { return error_.get(); }

private:
    detail::ErrorStore error_;
};

} // namespace smc
