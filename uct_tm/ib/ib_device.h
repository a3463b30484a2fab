/*
 * Verbs devices seen by component "tm_ib": which exist, which of their ports
 * are usable, how close each is to the calling thread (hwloc), and the
 * address a port is reached at (LID for InfiniBand, a RoCE v2 GID for
 * Ethernet).
 */
#ifndef UCT_TM_IB_IB_DEVICE_H_
#define UCT_TM_IB_IB_DEVICE_H_

#include <infiniband/verbs.h>
#include <ucs/type/status.h>

#include <cstdint>
#include <string>
#include <vector>

namespace uct_tm {
namespace ib {

/* What an active port offers. */
struct PortInfo {
    uint8_t  num       = 0;
    uint8_t  link      = IBV_LINK_LAYER_UNSPECIFIED; /* IBV_LINK_LAYER_* */
    uint16_t lid       = 0;
    uint32_t mtu_bytes = 0;
    enum ibv_mtu mtu   = IBV_MTU_1024;
    bool roce() const { return link == IBV_LINK_LAYER_ETHERNET; }
};

/* A verbs device with at least one active port. */
struct DeviceInfo {
    std::string           name;  /* ibv_get_device_name */
    std::vector<PortInfo> ports; /* active ones */
    int                   rank = 0; /* 0: the calling thread runs on the device's CPUs */
};

/* Devices with an active port, closest to the calling thread first. Lists the
 * system once per process (devices do not come and go under a running job). */
const std::vector<DeviceInfo> &devices();

/* The device named `name`, or null. */
const DeviceInfo *find_device(const std::string &name);

/* Opens device `name`; null (and a logged reason) on failure. */
struct ibv_context *open_device(const std::string &name);

/* GID index to use on a RoCE port: `configured` if >= 0, else the first
 * RoCE v2 entry holding an IPv4-mapped address, else the first RoCE v2
 * entry, else 0. */
ucs_status_t select_gid(struct ibv_context *ctx, uint8_t port, int configured, int *index,
                        union ibv_gid *gid);

/* Bytes of an MTU enum. */
uint32_t mtu_bytes(enum ibv_mtu mtu);

}  // namespace ib
}  // namespace uct_tm

#endif
