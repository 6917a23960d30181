// SPDX-License-Identifier: MIT
// FirstContacts: one SMC-R first contact per peer at a time, its other handshakes parked behind.
#pragma once

#include <compare>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "smc/clc/clc_messages.h"

namespace smc
{

// Linux's smc_server_lgr_pending, per peer and without holding a thread: while a first
// contact with a peer (its system id and GID, as its PROPOSAL claims them) is under way, that
// peer's other handshakes are parked (a callback each) until it ends, so two first contacts
// never make two groups with one peer; other peers' handshakes go on. At most one entry per
// pending handshake: the handshake limit bounds it.
class FirstContacts
{
public:
    struct Key {
        clc::SystemId id{};
        clc::Gid gid{};
        auto operator<=>(const Key&) const = default;
    };
    using Resume = std::function<void()>;

    // The right to make the first contact with a peer; given back when dropped.
    class Claim
    {
    public:
        Claim(FirstContacts& owner, const Key& key) noexcept : owner_(&owner), key_(key) {}
        Claim(Claim&& other) noexcept
            : owner_(std::exchange(other.owner_, nullptr)), key_(other.key_)
        {
        }
        Claim& operator=(Claim&&) = delete;
        ~Claim() { release(); }
        // The first contact is over: the handshakes parked behind it go on (each
        // `Resume` runs here, once). Never blocks.
        void release() noexcept;

    private:
        FirstContacts* owner_;
        Key key_;
    };

    // The claim on `key`, or nullopt while another first contact with it is under way.
    std::optional<Claim> claim(const Key& key);
    // Keeps `resume` until the first contact with `key` ends; false (`resume` dropped) when
    // none is under way. Never blocks.
    bool park(const Key& key, Resume resume);

private:
    Mutex mutex_;
    std::map<Key, std::vector<Resume>> busy_ SMC_GUARDED_BY(mutex_); // the parked, per claim
};

} // namespace smc
