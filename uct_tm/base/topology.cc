#include "topology.h"

#if UCT_TM_HAVE_HWLOC
#include <hwloc.h>
#include <hwloc/linux.h>
#include <ucs/debug/log_def.h>

#include <mutex>

namespace uct_tm {
namespace {

/* The topology is read-only after loading; loading costs milliseconds, so it
 * is done on first use and kept for the life of the process. */
class Topology {
  public:
    static Topology &instance() {
        static Topology topology;
        return topology;
    }

    hwloc_topology_t get() const { return topo_; }

  private:
    Topology() {
        if ((hwloc_topology_init(&topo_) != 0) || (hwloc_topology_load(topo_) != 0)) {
            ucs_debug("hwloc topology unavailable: no NUMA placement");
            if (topo_ != nullptr) {
                hwloc_topology_destroy(topo_);
            }
            topo_ = nullptr;
        }
    }
    ~Topology() {
        if (topo_ != nullptr) {
            hwloc_topology_destroy(topo_);
        }
    }

    hwloc_topology_t topo_ = nullptr;
};

/* Nodes near the calling thread; null bitmap when unknown. */
struct LocalNodes {
    hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
    ~LocalNodes() { hwloc_bitmap_free(nodes); }

    bool load(hwloc_topology_t topo) {
        hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
        bool ok = (hwloc_get_cpubind(topo, cpus, HWLOC_CPUBIND_THREAD) == 0) ||
                  (hwloc_get_cpubind(topo, cpus, HWLOC_CPUBIND_PROCESS) == 0);
        if (ok) {
            hwloc_cpuset_to_nodeset(topo, cpus, nodes);
            /* Not bound to one node: the node the thread runs on now is where
             * first touch would have put the memory anyway. */
            if ((hwloc_bitmap_weight(nodes) > 1) &&
                (hwloc_get_last_cpu_location(topo, cpus, HWLOC_CPUBIND_THREAD) == 0)) {
                hwloc_cpuset_to_nodeset(topo, cpus, nodes);
            }
            ok = !hwloc_bitmap_iszero(nodes);
        }
        hwloc_bitmap_free(cpus);
        return ok;
    }
};

}  // namespace

int local_numa_node() {
    hwloc_topology_t topo = Topology::instance().get();
    LocalNodes       local;
    if ((topo == nullptr) || !local.load(topo)) {
        return -1;
    }
    return hwloc_bitmap_first(local.nodes);
}

int bind_to_local_numa(void *address, size_t length) {
    hwloc_topology_t topo = Topology::instance().get();
    LocalNodes       local;
    if ((topo == nullptr) || !local.load(topo)) {
        return -1;
    }
    if (hwloc_set_area_membind(topo, address, length, local.nodes, HWLOC_MEMBIND_BIND,
                               HWLOC_MEMBIND_BYNODESET) != 0) {
        ucs_debug("hwloc_set_area_membind(%p, %zu) failed: %m", address, length);
    }
    return hwloc_bitmap_first(local.nodes);
}

int cpuset_rank(const void *cpus_arg) {
    auto             cpus = static_cast<hwloc_const_bitmap_t>(cpus_arg);
    hwloc_topology_t topo = Topology::instance().get();
    if ((topo == nullptr) || (cpus == nullptr) || hwloc_bitmap_iszero(cpus)) {
        return kRankUnknown;
    }
    hwloc_bitmap_t here = hwloc_bitmap_alloc();
    int            rank = kRankUnknown;
    if ((here != nullptr) && (hwloc_get_last_cpu_location(topo, here, HWLOC_CPUBIND_THREAD) == 0)) {
        if (hwloc_bitmap_intersects(here, cpus)) {
            rank = 0;
        } else {
            LocalNodes     local;
            hwloc_bitmap_t dev_nodes = hwloc_bitmap_alloc();
            hwloc_cpuset_to_nodeset(topo, cpus, dev_nodes);
            rank = (local.load(topo) && hwloc_bitmap_intersects(local.nodes, dev_nodes)) ? 1 : 2;
            hwloc_bitmap_free(dev_nodes);
        }
    }
    hwloc_bitmap_free(here);
    return rank;
}

int sysfs_cpumask_rank(const char *path) {
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    const int      rank = ((cpus != nullptr) && (hwloc_linux_read_path_as_cpumask(path, cpus) == 0))
                              ? cpuset_rank(cpus)
                              : kRankUnknown;
    hwloc_bitmap_free(cpus);
    return rank;
}

}  // namespace uct_tm

#else /* !UCT_TM_HAVE_HWLOC */

/* Built without hwloc (configure found none): nothing can tell the NUMA
 * nodes, so memory keeps the kernel's policy (first touch) and every device
 * ranks kRankUnknown (listed in verbs order). */
namespace uct_tm {

int local_numa_node() { return -1; }

int bind_to_local_numa(void *, size_t) { return -1; }

int cpuset_rank(const void *) { return kRankUnknown; }

int sysfs_cpumask_rank(const char *) { return kRankUnknown; }

}  // namespace uct_tm

#endif
