// SPDX-License-Identifier: MIT
// RDMA device discovery.
#include "rdma/device.h"

#include <cerrno>
#include <memory>

#include <infiniband/verbs.h>

namespace smc::rdma
{

Result<std::vector<std::string>> listDevices()
{
    int count = 0;
    errno = 0;
    // ibv_get_device_list: NULL and errno on failure (ENOSYS without kernel
    // support). ibv_free_device_list(NULL) crashes, so free only a real list.
    ibv_device** raw = ibv_get_device_list(&count);
    if (raw == nullptr)
        return std::error_code(errno != 0 ? errno : ENOSYS, std::generic_category());
    std::unique_ptr<ibv_device*, decltype(&ibv_free_device_list)> list(raw, ibv_free_device_list);
    if (count == 0)
        return std::make_error_code(std::errc::no_such_device);
    std::vector<std::string> names;
    for (int i = 0; i < count; ++i)
        names.emplace_back(ibv_get_device_name(raw[i]));
    return names;
}

} // namespace smc::rdma
