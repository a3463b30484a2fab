/*
 * Machine topology through hwloc, loaded once per process: the NUMA nodes
 * near the calling thread (where a receiver places its shared memory). In a
 * build without hwloc (configure --without-hwloc, or none found) every call
 * answers "cannot tell": -1 or kRankUnknown.
 */
#ifndef UCT_TM_BASE_TOPOLOGY_H_
#define UCT_TM_BASE_TOPOLOGY_H_

#include <cstddef>

namespace uct_tm {

/* Binds [address, address + length) to the NUMA node(s) of the CPUs the
 * calling thread may run on, before the pages are first touched. Returns the
 * first such node, or -1 when hwloc cannot tell (the memory is then left to
 * the kernel's default policy). */
int bind_to_local_numa(void *address, size_t length);

/* NUMA node of the calling thread's CPU binding, or -1 if unknown. */
int local_numa_node();

/* How close a device whose local CPUs are `cpus` (an hwloc_cpuset_t) is to
 * the calling thread: 0 the thread runs on one of them, 1 they share a NUMA
 * node with the thread's binding, 2 farther, kRankUnknown when hwloc cannot
 * tell. Devices are listed by rank. */
inline constexpr int kRankUnknown = 3;
int cpuset_rank(const void *cpus);

/* cpuset_rank() of the CPU mask in sysfs file `path` (a device's local_cpus). */
int sysfs_cpumask_rank(const char *path);

}  // namespace uct_tm

#endif
