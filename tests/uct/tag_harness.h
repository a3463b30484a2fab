/*
 * Shared pieces of the UCT tag conformance suite: transport discovery, seeded
 * payload patterns, guarded receive buffers, recorders for every callback the
 * tag API makes, bounded waits, and send helpers for each eager/rndv path.
 *
 * Everything here goes through UCX's public API (uct.h) only, so that every
 * tag-capable transport of uct-tm can run the same tests.
 */
#ifndef UCT_TM_TESTS_UCT_TAG_HARNESS_H_
#define UCT_TM_TESTS_UCT_TAG_HARNESS_H_

#include "uct_env.h"

#include <uct/api/uct.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace uct_tm_test {

using Settings = std::vector<std::pair<std::string, std::string>>;

/* Seed of every random choice in the suite: TM_TEST_SEED, or a fixed value.
 * Printed once per process so that a failure can be replayed. */
uint64_t test_seed();

/* Small deterministic generator (splitmix64). */
class Rng {
  public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    /* Uniform in [lo, hi]. */
    size_t range(size_t lo, size_t hi) { return lo + static_cast<size_t>(next() % (hi - lo + 1)); }

  private:
    uint64_t state_;
};

/* Transports of uct-tm's components whose iface, opened with tag offload, reports
 * at least one UCT_IFACE_FLAG_TAG_* capability. */
std::vector<std::string> tag_transports();

/* True if transport `tl` connects to a remote iface address
 * (UCT_IFACE_FLAG_CONNECT_TO_IFACE) rather than endpoint to endpoint. */
bool connects_to_iface(const std::string &tl);

/* ---- payloads -------------------------------------------------------------------- */

/* Byte `i` of the message identified by `seed`. */
inline uint8_t pattern_byte(uint64_t seed, size_t i) {
    const uint64_t x = (seed ^ (i * 0x9e3779b97f4a7c15ull)) * 0xd6e8feb86659fd93ull;
    return static_cast<uint8_t>(x >> 56);
}
void fill_pattern(void *dst, size_t length, uint64_t seed, size_t offset = 0);
/* Index of the first byte of `data` differing from the pattern (message
 * offset `offset` on), or SIZE_MAX. */
size_t pattern_mismatch(const void *data, size_t length, uint64_t seed, size_t offset = 0);

/* A buffer with a guard region after it (and before it), all filled with
 * kFill, so that a test can prove nothing was written beyond its end. */
class GuardedBuffer {
  public:
    static constexpr uint8_t kFill  = 0xa5;
    static constexpr size_t  kGuard = 256;

    explicit GuardedBuffer(size_t size = 0) { resize(size); }
    void   resize(size_t size);
    char  *data() { return storage_.data() + kGuard; }
    const char *data() const { return storage_.data() + kGuard; }
    size_t size() const { return size_; }
    /* Guards before and after the buffer hold kFill. */
    bool guards_intact() const;
    /* Bytes [from, to) of the buffer still hold kFill. */
    bool untouched(size_t from, size_t to) const;

  private:
    std::vector<char> storage_;
    size_t            size_ = 0;
};

/* ---- posted receives ---------------------------------------------------------------- */

/* A uct_tag_context with everything its callbacks reported. */
struct RecvCtx {
    enum Event { kConsumed, kCompleted, kRndv };

    uct_tag_context_t ctx; /* must stay first: callbacks get &ctx */
    std::vector<Event> events;
    uct_tag_t          stag        = 0;
    uint64_t           imm         = 0;
    size_t             length      = 0;
    ucs_status_t       status      = UCS_INPROGRESS;
    bool               inline_data = false; /* completed_cb got inline_data != NULL */
    std::string        header;              /* rndv_cb */
    unsigned           rndv_flags  = 0;
    /* Called at the end of tag_consumed_cb. */
    std::function<void(RecvCtx &)> on_consumed;
    /* Called at the end of completed_cb / rndv_cb (may re-enter UCT). */
    std::function<void(RecvCtx &)> on_done;

    RecvCtx();
    RecvCtx(const RecvCtx &)            = delete;
    RecvCtx &operator=(const RecvCtx &) = delete;
    static RecvCtx *of(uct_tag_context_t *ctx) { return reinterpret_cast<RecvCtx *>(ctx); }

    int  count(Event e) const;
    bool done() const { return (count(kCompleted) + count(kRndv)) > 0; }
    bool consumed() const { return count(kConsumed) > 0; }
    /* "consumed,completed" etc. */
    std::string sequence() const;
    /* Back to the just-constructed state, for reuse. */
    void reset();
};

/* Posted buffers of one receive: one GuardedBuffer per iov entry. */
struct RecvBuffers {
    std::vector<GuardedBuffer> pieces;
    std::vector<uct_iov_t>     iov;

    /* `capacity` bytes split into `iovcnt` entries (the first ones bigger). */
    RecvBuffers(size_t capacity, size_t iovcnt = 1);
    size_t capacity() const;
    /* The first min(capacity, length) bytes are the pattern, the rest of the
     * pieces and every guard untouched. Empty string if so, else what is wrong. */
    std::string check(uint64_t seed, size_t length) const;
    /* Nothing written anywhere. */
    bool untouched() const;
};

/* ---- unexpected arrivals --------------------------------------------------------------- */

/* Records what the iface's eager_cb and rndv_cb deliver and checks their
 * protocol (FIRST/MORE sequence, per-message context, DESC/headroom). */
class Unexpected {
  public:
    struct Message {
        uct_tag_t             tag      = 0;
        uint64_t              imm      = 0;
        std::string           data;
        std::vector<unsigned> flags;    /* of each fragment */
        bool                  complete = false;
    };
    struct Rndv {
        unsigned    flags       = 0;
        uct_tag_t   tag         = 0;
        std::string header;
        uint64_t    remote_addr = 0;
        size_t      length      = 0;
        std::string rkey;          /* packed rkey, rkey_size bytes; empty if NULL */
    };
    /* A descriptor the callback kept (UCS_INPROGRESS). */
    struct Held {
        void       *desc;    /* what uct_iface_release_desc() takes */
        char       *data;
        std::string content; /* the fragment as delivered */
        uint64_t    headroom_seed;
    };

    explicit Unexpected(size_t rx_headroom = 0, size_t rkey_size = 0)
        : rx_headroom_(rx_headroom), rkey_size_(rkey_size) {}

    static ucs_status_t eager_cb(void *arg, void *data, size_t length, unsigned flags,
                                 uct_tag_t stag, uint64_t imm, void **context);
    static ucs_status_t rndv_cb(void *arg, unsigned flags, uint64_t stag, const void *header,
                                unsigned header_length, uint64_t remote_addr, size_t length,
                                const void *rkey_buf);

    void set_rkey_size(size_t size) { rkey_size_ = size; }
    void set_rx_headroom(size_t size) { rx_headroom_ = size; }
    /* Keep up to `max` descriptors delivered with UCT_CB_PARAM_FLAG_DESC. */
    void hold_descs(size_t max) { hold_max_ = max; }

    std::vector<Message>     messages;
    std::vector<Rndv>        rndvs;
    std::vector<Held>        held;
    std::vector<std::string> violations;  /* protocol errors seen */
    size_t                   fragments       = 0;
    size_t                   desc_fragments  = 0; /* delivered with DESC */
    std::vector<const void *> desc_data;          /* their data pointers, in order */
    /* Called for each complete eager message (index into messages). */
    std::function<void(size_t)> on_message;
    /* Called for each rendezvous (index into rndvs). */
    std::function<void(size_t)> on_rndv;

    size_t complete_messages() const;
    /* Checks every held descriptor still has its content and headroom
     * pattern; returns the violations. */
    std::string check_held() const;
    /* uct_iface_release_desc() of every held descriptor. */
    void release_held();

  private:
    size_t rx_headroom_;
    size_t rkey_size_;
    size_t hold_max_ = 0;
    size_t open_     = 0; /* messages not complete yet */
};

/* ---- waiting ------------------------------------------------------------------------- */

inline constexpr double kWaitSeconds = 15.0;

/* Calls `progress` until `done` holds or `seconds` pass; true if done. */
bool wait_for(const std::function<bool()> &done, const std::function<void()> &progress,
              double seconds = kWaitSeconds);

/* A uct_completion_t counting its calls. */
struct Completion {
    uct_completion_t comp;  /* must stay first */
    int              calls  = 0;
    ucs_status_t     status = UCS_OK;

    explicit Completion(int count = 1);
    static void cb(uct_completion_t *self);
};

/* Records iface error handler calls. */
struct ErrorLog {
    struct Entry {
        uct_ep_h     ep;
        ucs_status_t status;
    };
    std::vector<Entry> entries;
    static ucs_status_t handler(void *arg, uct_ep_h ep, ucs_status_t status);
    int count(uct_ep_h ep) const;
};

/* ---- sending ------------------------------------------------------------------------- */

enum class Path { kShort, kBcopy, kZcopy, kZcopyMulti, kRndv };
const char *path_name(Path path);

struct Caps {
    uint64_t flags         = 0;
    size_t   max_short     = 0;
    size_t   max_bcopy     = 0;
    size_t   max_zcopy     = 0;
    size_t   eager_max_iov = 0;
    size_t   rndv_max_zcopy = 0;
    size_t   rndv_max_hdr  = 0;
    size_t   rndv_max_iov  = 0;
    size_t   recv_max_iov  = 0;
    size_t   recv_max_outstanding = 0;
    /* Largest single-fragment zcopy message (one descriptor). */
    size_t   zcopy_single  = 0;

    static Caps of(const uct_iface_attr_t &attr);
    bool has(Path path) const;
    /* Interesting message sizes for a path (all within its caps). */
    std::vector<size_t> sizes(Path path) const;
};

/* The iov list of a send: `length` bytes of `data` in `iovcnt` pieces. */
std::vector<uct_iov_t> split_iov(const void *data, size_t length, size_t iovcnt);

/* A message being sent: payload (pattern of `seed`), and what the send returned. */
struct Send {
    Path                   path;
    uct_tag_t              tag;
    uint64_t               imm    = 0;
    uint64_t               seed   = 0;
    std::vector<char>      payload;
    size_t                 iovcnt = 1;
    std::string            header; /* rndv */
    std::unique_ptr<Completion> comp;  /* zcopy/rndv */
    bool                   comp_pending = false; /* comp will be called */
    void                  *rndv_op = nullptr;

    Send(Path p, uct_tag_t t, uint64_t i, uint64_t s, size_t length, size_t iov = 1);
    /* One attempt: UCS_OK, UCS_ERR_NO_RESOURCE, or an error. */
    ucs_status_t post(uct_ep_h ep);
};

/* UCT_IFACE_FLAG_* needed by a path. */
uint64_t path_flag(Path path);

/* Receive headroom asked for by default; odd on purpose (UCP asks for
 * sizeof(ucp_recv_desc_t) + 32). */
inline constexpr size_t kRxHeadroom = 88;

/* One iface opened with tag offload, unexpected callbacks, an error handler
 * and `rx_headroom`. */
class Node {
  public:
    Node(UctEnv &env, const std::string &tl, const Settings &settings = {},
         size_t rx_headroom = kRxHeadroom);
    ~Node();
    Node(const Node &)            = delete;
    Node &operator=(const Node &) = delete;

    ucs_status_t     status = UCS_ERR_NO_ELEM; /* of uct_iface_open */
    uct_iface_h      iface  = nullptr;
    uct_iface_attr_t attr{};
    Caps             caps;
    Unexpected       unexp;
    ErrorLog         errors;

    /* Device address followed by iface address. */
    std::string address() const;
    /* An endpoint to the iface whose address() is `remote` (CONNECT_TO_IFACE). */
    ucs_status_t connect(const std::string &remote, uct_ep_h *ep) const;
    /* Connects this node to `peer`: *ep from here to there. A CONNECT_TO_EP
     * transport also needs the peer's endpoint back to us (*peer_ep, the two
     * queue pairs are bound to each other); CONNECT_TO_IFACE ones leave it null. */
    ucs_status_t connect_pair(const Node &peer, uct_ep_h *ep, uct_ep_h *peer_ep) const;
    /* uct_iface_set_am_handler(id) recording payloads into `log`. */
    ucs_status_t set_am_log(uint8_t id, std::vector<std::string> *log);
    /* uct_iface_release_desc() of descriptors the recorder kept. */
    void release_held_descs();
};

/* uct_mem_alloc of `length` bytes by MD `md` (UCT_ALLOC_METHOD_MD). */
uct_allocated_memory_t md_alloc(uct_md_h md, size_t length, ucs_status_t *status);

/* tm_sm's named segment files in /dev/shm (uct_tm.<uid>.<16 hex digits>). */
std::vector<std::string> shm_leftovers();
/* The entries that appeared since `before` (a shm_leftovers()) and that no
 * other live process owns: what this process, or a process of the test that
 * has ended, left behind. A segment's creator holds an flock on it while it
 * exists (named segments are named at random, not by pid), so a segment
 * whose lock another process holds is that process's; one this process still
 * has open or mapped is a leak all the same. A dead process's segment counts
 * whoever's it was: the test programs that check this way (test_tag_multiproc,
 * test_shm_resources) run one after the other. */
std::vector<std::string> shm_leaked_since(const std::vector<std::string> &before);
/* Remembers the segment files this process holds (open or mapped) now. Node
 * calls it before it closes its iface, and so should whatever else lets go
 * of segments (an MD, freed memory): what this process held and then left in
 * /dev/shm is told apart from other processes' files by that. */
void shm_note_held();
/* The entries that appeared since `before` and that this process held, now
 * or when it noted (shm_note_held): its own leaks, whatever programs running
 * alongside create, kill or squat in /dev/shm meanwhile. */
std::vector<std::string> shm_leaked_by_this_process(const std::vector<std::string> &before);

/* Runs `f` with stderr going to a file; what it wrote (an iface's
 * PRINT_STATS lines when `f` closes it). */
std::string capture_stderr(const std::function<void()> &f);

}  // namespace uct_tm_test

#endif
