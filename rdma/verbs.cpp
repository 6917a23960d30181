// SPDX-License-Identifier: MIT
// libibverbs RAII wrappers and error normalisation.
#include "rdma/verbs.h"

#include <fcntl.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/sys_error.h"
#include "pool/errors.h"

namespace smc::rdma
{
namespace
{

class CompletionCategory final : public std::error_category
{
public:
    const char* name() const noexcept override { return "ibv_wc"; }
    std::string message(int value) const override
    {
        return ibv_wc_status_str(static_cast<ibv_wc_status>(value));
    }
};

// Destroy functions report failure as a returned errno; a destructor can
// only log it (a failing dealloc means a child leaked: a bug worth seeing).
void destroyed(const char* what, int ret) noexcept
{
    if (ret != 0)
        std::fprintf(stderr, "smc-core: %s failed: %s\n", what,
                     std::generic_category().message(ret).c_str());
}

using DeviceList = std::unique_ptr<ibv_device*, decltype(&ibv_free_device_list)>;

// ibv_get_device_list: NULL and errno on failure (ENOSYS without kernel RDMA
// support). ibv_free_device_list(NULL) crashes, so only a real list is owned.
Result<std::pair<DeviceList, int>> deviceList()
{
    int count = 0;
    errno = 0;
    ibv_device** raw = ibv_get_device_list(&count);
    if (raw == nullptr)
        return std::error_code(errno != 0 ? errno : ENOSYS, std::generic_category());
    return std::pair{DeviceList(raw, ibv_free_device_list), count};
}

} // namespace

template <typename T, int (*Destroy)(T*)>
template <typename... Parents>
void Handle<T, Destroy>::adopt(T* raw, const char* what, std::shared_ptr<Parents>... parents)
{
    // The parents are captures of the deleter: they go after Destroy has run.
    handle_.reset(raw, [what, parents...](T* p) { destroyed(what, Destroy(p)); });
}

Result<std::vector<std::string>> listDevices()
{
    Result<std::pair<DeviceList, int>> list = deviceList();
    if (!list)
        return list.error();
    if (list->second == 0)
        return std::make_error_code(std::errc::no_such_device);
    std::vector<std::string> names;
    for (int i = 0; i < list->second; ++i)
        names.emplace_back(ibv_get_device_name(list->first.get()[i]));
    return names;
}

const std::error_category& completionCategory() noexcept
{
    static const CompletionCategory category;
    return category;
}

std::error_code completionError(ibv_wc_status status) noexcept
{
    return status == IBV_WC_SUCCESS ? std::error_code()
                                    : std::error_code(status, completionCategory());
}

Result<Context> Context::open(std::string_view name)
{
    Result<std::pair<DeviceList, int>> list = deviceList();
    if (!list)
        return list.error();
    ibv_device* found = nullptr;
    for (int i = 0; i < list->second && found == nullptr; ++i)
        if (name.empty() || name == ibv_get_device_name(list->first.get()[i]))
            found = list->first.get()[i];
    if (found == nullptr)
        return std::make_error_code(std::errc::no_such_device);
    Context c;
    c.name_ = ibv_get_device_name(found);
    errno = 0;
    ibv_context* raw = ibv_open_device(found);
    if (!raw)
        return lastError();
    c.adopt(raw, "ibv_close_device");
    return c;
}

Result<PortInfo> Context::port(std::uint8_t portNum) const
{
    ibv_port_attr attr{};
    if (std::error_code ec = errnoCode(ibv_query_port(get(), portNum, &attr)))
        return ec;
    return PortInfo{attr.state, attr.active_mtu, attr.gid_tbl_len, attr.link_layer};
}

Result<Context::AsyncEvent> Context::nextAsyncEvent() const
{
    const int fd = asyncFd();
    if (const int flags = ::fcntl(fd, F_GETFL);
        flags < 0 || ((flags & O_NONBLOCK) == 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0))
        return lastError();
    ibv_async_event raw{};
    if (ibv_get_async_event(get(), &raw) != 0)
        return lastError();
    AsyncEvent e{raw.event_type, 0};
    if (raw.event_type == IBV_EVENT_PORT_ACTIVE || raw.event_type == IBV_EVENT_PORT_ERR ||
        raw.event_type == IBV_EVENT_LID_CHANGE || raw.event_type == IBV_EVENT_GID_CHANGE)
        e.port = static_cast<std::uint8_t>(raw.element.port_num);
    ibv_ack_async_event(&raw);
    return e;
}

Result<Gid> Context::gid(std::uint8_t portNum, int index) const
{
    ibv_gid raw{};
    if (std::error_code ec = errnoCode(ibv_query_gid(get(), portNum, index, &raw)))
        return ec;
    Gid g;
    std::copy(std::begin(raw.raw), std::end(raw.raw), g.begin());
    return g;
}

Result<int> Context::findRoceV2Ipv4Gid(std::uint8_t portNum) const
{
    Result<std::vector<int>> all = roceV2Ipv4Gids(portNum);
    if (!all)
        return all.error();
    if (all->empty())
        return std::make_error_code(std::errc::address_not_available);
    return all->front();
}

Result<std::vector<int>> Context::roceV2Ipv4Gids(std::uint8_t portNum) const
{
    Result<PortInfo> p = port(portNum);
    if (!p)
        return p.error();
    // One call for the valid entries of every port (a query per index costs
    // a system call each, and RoCE tables have hundreds of empty slots).
    ibv_device_attr device{};
    if (int rc = ibv_query_device(get(), &device); rc != 0)
        return errnoCode(rc);
    std::vector<ibv_gid_entry> entries(static_cast<std::size_t>(p->gidTableLength) *
                                       std::max<int>(device.phys_port_cnt, 1));
    const ssize_t n = ibv_query_gid_table(get(), entries.data(), entries.size(), 0);
    if (n < 0)
        return std::error_code(static_cast<int>(-n), std::generic_category());
    std::vector<int> out;
    for (ssize_t i = 0; i < n; ++i) {
        const ibv_gid_entry& entry = entries[static_cast<std::size_t>(i)];
        Gid g;
        std::copy(std::begin(entry.gid.raw), std::end(entry.gid.raw), g.begin());
        if (entry.port_num == portNum && entry.gid_type == IBV_GID_TYPE_ROCE_V2 && isIpv4Mapped(g))
            out.push_back(static_cast<int>(entry.gid_index));
    }
    std::sort(out.begin(), out.end());
    return out;
}

Result<Mac> Context::gidMac(std::uint8_t portNum, int index) const
{
    ibv_gid_entry entry{};
    if (int rc = ibv_query_gid_ex(get(), portNum, static_cast<std::uint32_t>(index), &entry, 0);
        rc != 0)
        return errnoCode(rc);
    ifreq request{};
    if (entry.ndev_ifindex == 0 ||
        ::if_indextoname(entry.ndev_ifindex, request.ifr_name) == nullptr)
        return std::make_error_code(std::errc::no_such_device);
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return lastError();
    const int rc = ::ioctl(fd, SIOCGIFHWADDR, &request);
    const int saved = errno;
    ::close(fd);
    if (rc != 0)
        return std::error_code(saved, std::generic_category());
    Mac mac;
    std::memcpy(mac.data(), request.ifr_hwaddr.sa_data, mac.size());
    return mac;
}

Result<ProtectionDomain> ProtectionDomain::create(const Context& context)
{
    errno = 0;
    ibv_pd* raw = ibv_alloc_pd(context.get());
    if (raw == nullptr)
        return lastError();
    ProtectionDomain pd;
    pd.adopt(raw, "ibv_dealloc_pd", context.shared());
    return pd;
}

Result<MemoryRegion> MemoryRegion::create(const ProtectionDomain& pd, void* addr,
                                          std::size_t length, int access)
{
    errno = 0;
    ibv_mr* raw = ibv_reg_mr(pd.get(), addr, length, access);
    if (raw == nullptr)
        return lastError();
    MemoryRegion mr;
    mr.adopt(raw, "ibv_dereg_mr", pd.shared());
    return mr;
}

Result<CompletionChannel> CompletionChannel::create(const Context& context)
{
    errno = 0;
    ibv_comp_channel* raw = ibv_create_comp_channel(context.get());
    if (raw == nullptr)
        return lastError();
    CompletionChannel c;
    c.adopt(raw, "ibv_destroy_comp_channel", context.shared());
    return c;
}

Result<CompletionQueue> CompletionQueue::create(const Context& context, int entries,
                                                const CompletionChannel* channel)
{
    errno = 0;
    ibv_cq* raw =
        ibv_create_cq(context.get(), entries, nullptr, channel ? channel->get() : nullptr, 0);
    if (raw == nullptr)
        return lastError();
    CompletionQueue cq;
    std::shared_ptr<ibv_comp_channel> keepChannel = channel ? channel->shared() : nullptr;
    cq.adopt(raw, "ibv_destroy_cq", context.shared(), std::move(keepChannel));
    return cq;
}

Result<int> CompletionQueue::poll(ibv_wc* wc, int max) const noexcept
{
    const int n = ibv_poll_cq(get(), max, wc);
    if (n < 0)
        return std::make_error_code(std::errc::io_error); // the CQ itself failed
    return n;
}

Result<void> CompletionQueue::requestNotify() const noexcept
{
    return errnoCode(ibv_req_notify_cq(get(), 0));
}

Result<QueuePair> QueuePair::createRc(const ProtectionDomain& pd, const CompletionQueue& sendCq,
                                      const CompletionQueue& recvCq, const QueuePairCaps& caps)
{
    ibv_qp_init_attr attr{};
    attr.send_cq = sendCq.get();
    attr.recv_cq = recvCq.get();
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = caps.maxSendWr;
    attr.cap.max_recv_wr = caps.maxRecvWr;
    attr.cap.max_send_sge = caps.maxSendSge;
    attr.cap.max_recv_sge = caps.maxRecvSge;
    errno = 0;
    ibv_qp* raw = ibv_create_qp(pd.get(), &attr);
    if (raw == nullptr)
        return lastError();
    QueuePair qp;
    qp.caps_ = caps;
    qp.adopt(raw, "ibv_destroy_qp", pd.shared(), sendCq.shared(), recvCq.shared());
    return qp;
}

Result<void> QueuePair::toInit(std::uint8_t portNum)
{
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = portNum;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    return errnoCode(ibv_modify_qp(
        get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
}

Result<void> QueuePair::toRts(std::uint8_t portNum, int gidIndex, std::uint32_t localPsn,
                              const Endpoint& peer)
{
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = peer.mtu;
    a.dest_qp_num = peer.qpn;
    a.rq_psn = peer.psn & 0xffffff;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 5;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = portNum;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gidIndex);
    std::copy(peer.gid.begin(), peer.gid.end(), a.ah_attr.grh.dgid.raw);
    if (std::error_code ec = errnoCode(
            ibv_modify_qp(get(), &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
        return ec;

    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 15;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = localPsn & 0xffffff;
    a.max_rd_atomic = 1;
    return errnoCode(ibv_modify_qp(get(), &a,
                                   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                       IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
}

Result<void> QueuePair::toError() noexcept
{
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    return errnoCode(ibv_modify_qp(get(), &a, IBV_QP_STATE));
}

Result<ibv_qp_state> QueuePair::state() const noexcept
{
    ibv_qp_attr a{};
    ibv_qp_init_attr init{};
    if (std::error_code ec = errnoCode(ibv_query_qp(get(), &a, IBV_QP_STATE, &init)))
        return ec;
    return a.qp_state;
}

} // namespace smc::rdma
