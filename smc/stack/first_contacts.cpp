// SPDX-License-Identifier: MIT
// FirstContacts: claims per peer, and the handshakes parked behind them.
#include "smc/stack/first_contacts.h"

namespace smc
{

std::optional<FirstContacts::Claim> FirstContacts::claim(const Key& key)
{
    MutexLocker lock(mutex_);
    if (!busy_.try_emplace(key).second)
        return std::nullopt;
    return std::optional<Claim>(std::in_place, *this, key);
}

bool FirstContacts::park(const Key& key, Resume resume)
{
    MutexLocker lock(mutex_);
    auto it = busy_.find(key);
    if (it == busy_.end())
        return false;
    it->second.push_back(std::move(resume));
    return true;
}

void FirstContacts::Claim::release() noexcept
{
    if (owner_ == nullptr)
        return;
    std::vector<Resume> parked;
    {
        MutexLocker lock(owner_->mutex_);
        auto it = owner_->busy_.find(key_);
        parked = std::move(it->second);
        owner_->busy_.erase(it);
    }
    owner_ = nullptr;
    for (Resume& r : parked) // outside the lock: a resume may claim again
        r();
}

} // namespace smc
