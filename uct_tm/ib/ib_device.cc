#include "ib_device.h"

#include "base/topology.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace uct_tm {
namespace ib {
namespace {

std::vector<DeviceInfo> list_devices() {
    std::vector<DeviceInfo> found;
    int                     count = 0;
    struct ibv_device     **list  = ibv_get_device_list(&count);
    if (list == nullptr) {
        ucs_debug("tm: no verbs devices (%s)", strerror(errno));
        return found;
    }
    for (int i = 0; i < count; ++i) {
        struct ibv_context *ctx = ibv_open_device(list[i]);
        if (ctx == nullptr) {
            ucs_debug("tm: cannot open %s: %s", ibv_get_device_name(list[i]), strerror(errno));
            continue;
        }
        struct ibv_device_attr attr;
        DeviceInfo             info;
        info.name = ibv_get_device_name(list[i]);
        if (ibv_query_device(ctx, &attr) == 0) {
            for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
                struct ibv_port_attr pa;
                if ((ibv_query_port(ctx, p, &pa) != 0) || (pa.state != IBV_PORT_ACTIVE)) {
                    continue;
                }
                PortInfo port;
                port.num       = p;
                port.link      = pa.link_layer;
                port.lid       = pa.lid;
                port.mtu       = pa.active_mtu;
                port.mtu_bytes = mtu_bytes(pa.active_mtu);
                info.ports.push_back(port);
            }
        }
        /* The CPUs near the device's PCI slot (none for software devices). */
        const std::string local_cpus = std::string(list[i]->ibdev_path) + "/device/local_cpus";
        info.rank                    = sysfs_cpumask_rank(local_cpus.c_str());
        ibv_close_device(ctx);
        if (!info.ports.empty()) {
            found.push_back(std::move(info));
        }
    }
    ibv_free_device_list(list);
    std::stable_sort(found.begin(), found.end(),
                     [](const DeviceInfo &a, const DeviceInfo &b) { return a.rank < b.rank; });
    return found;
}

}  // namespace

const std::vector<DeviceInfo> &devices() {
    static std::once_flag          once;
    static std::vector<DeviceInfo> list;
    std::call_once(once, [] { list = list_devices(); });
    return list;
}

const DeviceInfo *find_device(const std::string &name) {
    for (const DeviceInfo &d : devices()) {
        if (d.name == name) {
            return &d;
        }
    }
    return nullptr;
}

struct ibv_context *open_device(const std::string &name) {
    int                 count = 0;
    struct ibv_device **list  = ibv_get_device_list(&count);
    struct ibv_context *ctx   = nullptr;
    for (int i = 0; (list != nullptr) && (i < count); ++i) {
        if (name == ibv_get_device_name(list[i])) {
            ctx = ibv_open_device(list[i]);
            if (ctx == nullptr) {
                ucs_error("tm: ibv_open_device(%s): %s", name.c_str(), strerror(errno));
            }
        }
    }
    if (list != nullptr) {
        ibv_free_device_list(list);
    }
    return ctx;
}

ucs_status_t select_gid(struct ibv_context *ctx, uint8_t port, int configured, int *index,
                        union ibv_gid *gid) {
    struct ibv_port_attr pa;
    if (ibv_query_port(ctx, port, &pa) != 0) {
        return UCS_ERR_IO_ERROR;
    }
    if (configured >= 0) {
        *index = configured;
        return (ibv_query_gid(ctx, port, configured, gid) == 0) ? UCS_OK : UCS_ERR_INVALID_PARAM;
    }
    int v2_any = -1, v2_ipv4 = -1;
    for (int i = 0; (i < pa.gid_tbl_len) && (v2_ipv4 < 0); ++i) {
        struct ibv_gid_entry entry;
        if (ibv_query_gid_ex(ctx, port, i, &entry, 0) != 0) {
            continue; /* an empty slot */
        }
        if (entry.gid_type != IBV_GID_TYPE_ROCE_V2) {
            continue;
        }
        if (v2_any < 0) {
            v2_any = i;
        }
        static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(entry.gid.raw, v4_prefix, sizeof(v4_prefix)) == 0) {
            v2_ipv4 = i;
        }
    }
    *index = (v2_ipv4 >= 0) ? v2_ipv4 : (v2_any >= 0) ? v2_any : 0;
    return (ibv_query_gid(ctx, port, *index, gid) == 0) ? UCS_OK : UCS_ERR_NO_DEVICE;
}

uint32_t mtu_bytes(enum ibv_mtu mtu) {
    switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
    }
    return 1024;
}

}  // namespace ib
}  // namespace uct_tm
