#include "sm_config.h"

#include <ucs/config/parser.h>

#include <cstddef>

namespace uct_tm {
namespace sm {

const char *sm_copy_names[] = {"auto", "cached", "stream", nullptr};
const char *sm_rndv_copy_names[] = {"auto", "cma", "pipelined", nullptr};

ucs_config_field_t sm_config_table[] = {
    {"", "", nullptr, offsetof(SmConfig, super), UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"FIFO_SIZE", "64",
     "Elements in the receive FIFO of each tm_sm interface (a power of two). Senders get\n"
     "UCS_ERR_NO_RESOURCE while it is full. A short ring stays in both cores' caches: 64\n"
     "elements carry small messages faster than 256 (docs/perf.md).",
     offsetof(SmConfig, fifo_size), UCS_CONFIG_TYPE_UINT},

    {"FIFO_ELEM_SIZE", "128",
     "Size of one FIFO element (a multiple of 64). Payloads that fit after its 40-byte header\n"
     "travel inline; this bounds tag_eager_short and am_short.",
     offsetof(SmConfig, fifo_elem_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"SEG_SIZE", "8k",
     "Payload size of a receive descriptor: the largest bcopy message, and the fragment size\n"
     "of larger eager zcopy messages.",
     offsetof(SmConfig, seg_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"SPARE_DESCS", "320",
     "Receive descriptors beyond one per FIFO element: how many descriptors the layer above\n"
     "may keep (UCT_CB_PARAM_FLAG_DESC) before messages are delivered for copying instead.\n"
     "Descriptors are reused least recently used first, so FIFO_SIZE + SPARE_DESCS also sets\n"
     "how long a descriptor rests before a sender writes it again: long enough to leave the\n"
     "receiver's cache (docs/perf.md). One that carried less than 4 KiB is not rotated.",
     offsetof(SmConfig, spare_descs), UCS_CONFIG_TYPE_UINT},

    {"EAGER_MAX", "256k",
     "Largest tag_eager_zcopy message, at most SEG_SIZE x FIFO_SIZE / 2; those above SEG_SIZE\n"
     "are split into SEG_SIZE fragments that occupy consecutive FIFO elements.",
     offsetof(SmConfig, eager_max), UCS_CONFIG_TYPE_MEMUNITS},

    {"BCOPY_MAX", "auto",
     "Largest bcopy message (am_bcopy, tag_eager_bcopy), from SEG_SIZE to EAGER_MAX. Above\n"
     "SEG_SIZE a bcopy is packed as BCOPY_IN_PLACE says and a larger one travels in SEG_SIZE\n"
     "fragments (an active message is handed up whole). auto: EAGER_MAX when built for UCX\n"
     "before 1.16, whose protocols (v1) switch to rendezvous no later than max_bcopy;\n"
     "SEG_SIZE from 1.16, whose protocols take eager zero-copy for larger messages.",
     offsetof(SmConfig, bcopy_max), UCS_CONFIG_TYPE_MEMUNITS},

    {"BCOPY_IN_PLACE", "y",
     "With BCOPY_MAX above SEG_SIZE, pack each bcopy at the receiver's descriptor through a\n"
     "window of virtual memory that continues it with this process's spill area, instead of\n"
     "into a buffer of our own that is then copied in whole: a message up to SEG_SIZE is\n"
     "copied once. Each receiver then lays out its descriptors on page boundaries.",
     offsetof(SmConfig, bcopy_in_place), UCS_CONFIG_TYPE_BOOL},

    {"RECV_MIN", "auto",
     "The smallest receive tm_sm asks to have posted to its tag list, reported as\n"
     "cap.tag.recv.min_recv: UCP posts a receive to the tag list only from\n"
     "max(UCX_TM_THRESH, RECV_MIN) bytes. Smaller receives posted all the same are matched\n"
     "alike. auto: SEG_SIZE + 1. A message that fits one descriptor is copied once either way,\n"
     "and UCP's work for an offloaded receive (registering the buffer, the consumed and\n"
     "completed callbacks) costs more than its own matching (docs/perf.md).",
     offsetof(SmConfig, recv_min), UCS_CONFIG_TYPE_MEMUNITS},

    {"COPY", "auto",
     "How the sender copies eager messages of 4 KiB and more into the receiver's descriptors:\n"
     " cached - ordinary stores: the receiver reads the lines from the sender's cache.\n"
     " stream - non-temporal stores, past the sender's cache to memory.\n"
     " auto   - cached while those copies run faster than COPY_SLOW_BW; when two in a row\n"
     "          run slower (modified lines crossing slowly between the cores, as on some\n"
     "          virtual machines), stream, trying cached again every 64 messages.",
     offsetof(SmConfig, copy), UCS_CONFIG_TYPE_ENUM(sm_copy_names)},

    {"COPY_SLOW_BW", "6GBs", "With COPY=auto: a cached copy slower than this counts as slow.",
     offsetof(SmConfig, copy_slow_bw), UCS_CONFIG_TYPE_BW},

    {"", "", nullptr, offsetof(SmConfig, tag_list), UCS_CONFIG_TYPE_TABLE(tag_list_config_table)},

    {"RNDV_SLOTS", "1024", "Rendezvous sends (tag_rndv_zcopy) outstanding at once per interface.",
     offsetof(SmConfig, rndv_slots), UCS_CONFIG_TYPE_UINT},

    {"RNDV_SPLIT", "y",
     "Let the sender write the front of a large rendezvous message (process_vm_writev) while\n"
     "the receiver reads the back (process_vm_readv): both cores copy at once. When the sender\n"
     "is busy the receiver simply takes every piece.",
     offsetof(SmConfig, rndv_split), UCS_CONFIG_TYPE_BOOL},

    {"RNDV_SPLIT_MIN", "auto",
     "Smallest rendezvous message whose copy is split between sender and receiver. Each\n"
     "piece costs a system call (1-2 us on virtual machines): smaller messages are faster\n"
     "in one read. auto: from 64 KiB to 1 MiB, the smallest power of two whose half takes\n"
     "1.5 times as long to copy as one call costs, timed once per process (256 KiB where\n"
     "CMA cannot be timed).",
     offsetof(SmConfig, rndv_split_min), UCS_CONFIG_TYPE_MEMUNITS},

    {"SPLIT_TIMEOUT", "1s",
     "How long a receiver waits, once every piece of a split copy is claimed, for the pieces\n"
     "its sender claimed and has not reported written. A sender that withholds them longer\n"
     "fails the receive (or get) with UCS_ERR_TIMED_OUT, and a force-cancel of the receive\n"
     "waits no longer than this. A conforming sender reports within one piece's copy.",
     offsetof(SmConfig, split_timeout), UCS_CONFIG_TYPE_TIME},

    {"SHM_DIRECT_MAX", "512k",
     "Rendezvous messages from MD-allocated shared memory up to this size are copied directly\n"
     "from the sender's mapping; larger ones use the split CMA copy when CMA is allowed.",
     offsetof(SmConfig, shm_direct_max), UCS_CONFIG_TYPE_MEMUNITS},

    {"CMA", "y",
     "Use cross-memory attach (process_vm_readv/writev) for rendezvous and get/put. With n,\n"
     "or where the kernel forbids it, large messages are copied through staging chunks.",
     offsetof(SmConfig, cma), UCS_CONFIG_TYPE_BOOL},

    {"RNDV_COPY", "auto",
     "How a rendezvous send of 16 KiB and more reaches its receiver (a matched receive, or\n"
     "a get_zcopy of the send's buffer) when CMA is allowed:\n"
     " cma       - cross-memory attach: one read, or split with the sender (RNDV_SPLIT).\n"
     " pipelined - the sender copies pieces into the receiver's staging chunks while the\n"
     "             receiver copies them out.\n"
     " auto      - pipelined, unless its recent copies of that size took 4 times CMA's time\n"
     "             per byte (a sender that does not progress); the way not taken is tried\n"
     "             every 64th copy.",
     offsetof(SmConfig, rndv_copy), UCS_CONFIG_TYPE_ENUM(sm_rndv_copy_names)},

    {"STAGING_CHUNKS", "16",
     "Staging chunks in each interface's segment, for pipelined copies through shared memory\n"
     "when the kernel forbids cross-memory attach (CMA) between the processes. A copy uses\n"
     "up to 4 chunks at a time.",
     offsetof(SmConfig, staging_chunks), UCS_CONFIG_TYPE_UINT},

    {"STAGING_CHUNK_SIZE", "64k", "Size of one staging chunk (a multiple of 4k).",
     offsetof(SmConfig, staging_chunk_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"MAX_PEERS", "1024", "Interfaces that may send to one tm_sm interface at the same time.",
     offsetof(SmConfig, max_peers), UCS_CONFIG_TYPE_UINT},

    {"PEER_CHECK_INTERVAL", "100ms",
     "How often progress checks that peer processes are alive; a dead peer fails its\n"
     "endpoints through the error handler.",
     offsetof(SmConfig, peer_check_interval), UCS_CONFIG_TYPE_TIME},

    {"STALL_TIMEOUT", "1s",
     "How long a FIFO element claimed by a sender may stay unwritten, after some peer died,\n"
     "before the receiver skips it.",
     offsetof(SmConfig, stall_timeout), UCS_CONFIG_TYPE_TIME},

    {"CLOSE_TIMEOUT", "1s",
     "How long closing an iface waits for its peers to take the rendezvous completions\n"
     "(FIN) still waiting for room in their FIFOs: a sender whose data was delivered then\n"
     "completes with UCS_OK. Peers that are gone or closed are not waited for.",
     offsetof(SmConfig, close_timeout), UCS_CONFIG_TYPE_TIME},

    {"STOPPED_TIMEOUT", "20s",
     "How long a FIFO element claimed by a sender that is alive but stopped (SIGSTOP, a\n"
     "debugger) may stay unwritten before the receiver drops that sender: its endpoints fail,\n"
     "its element is skipped, and it finds its own endpoints failed when it resumes.\n"
     "\"inf\" keeps waiting (debugging sessions).",
     offsetof(SmConfig, stopped_timeout), UCS_CONFIG_TYPE_TIME},

    {"NUMA_BIND", "y",
     "Place the receive FIFO and descriptors on the receiving thread's NUMA node (hwloc; no\n"
     "effect in a build without hwloc).",
     offsetof(SmConfig, numa_bind), UCS_CONFIG_TYPE_BOOL},

    {"NAMED_SEGMENTS", "n",
     "Back segments with named POSIX shared memory (/dev/shm/uct_tm.*) instead of memfd\n"
     "reached through /proc/<pid>/fd, for systems where /proc links are not usable.",
     offsetof(SmConfig, named_segments), UCS_CONFIG_TYPE_BOOL},

    {"PROGRESS_BUDGET", "32", "FIFO elements handled per progress call at most.",
     offsetof(SmConfig, progress_budget), UCS_CONFIG_TYPE_UINT},

    {"PRINT_STATS", "n",
     "Print each interface's counters to stderr when it closes: receives posted to the tag\n"
     "list and matched there, unexpected messages, protocols used, drops. The same counters\n"
     "are logged at debug level (UCX_LOG_LEVEL=debug) in any case.",
     offsetof(SmConfig, print_stats), UCS_CONFIG_TYPE_BOOL},

    {}};

}  // namespace sm
}  // namespace uct_tm
