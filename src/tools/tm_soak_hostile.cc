/*
 * tm_soak_hostile: the soak's hostile neighbour (contrib/soak.sh, HOSTILE=1).
 * A process of the same user that plays the attacks tm_sm must shrug off
 * while the pairs move checked traffic:
 *  - it opens a live iface's memfd segment through /proc/PID/fd and tries to
 *    truncate it (must fail: the segment is sealed);
 *  - it maps the segment and writes rendezvous answers it has no right to
 *    (FIN, RTR, pipelined-copy request, NACK) naming random peer slots and
 *    tokens with guessed proofs (each must be dropped);
 *  - it spoils a split copy in progress in that segment's rendezvous slots:
 *    a claim storm or a withheld piece (the transfer must fail with an error
 *    on both sides, in bounded time; tm_soak --attacked accounts for it).
 * Named segments (the pairs with UCX_TM_SM_NAMED_SEGMENTS=y) are left alone:
 * they take no seals, and truncating one fails its pairs' endpoints by design
 * (docs/tm_sm.md, "Threat model"), which the soak would count as lost.
 *
 * Addresses come from the soak's DIR/addr.<slot> files. On SIGTERM it prints
 *   tm_soak_hostile forged=N truncations_refused=M truncated=K named=L
 *                   claims_stormed=S pieces_withheld=W
 * truncated must be 0.
 */
#include "sm/sm_fifo.h"
#include "sm/sm_layout.h"
#include "sm/sm_peer.h"
#include "sm/sm_split_claim.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace {

using namespace uct_tm::sm;

volatile sig_atomic_t g_stop = 0;

struct Counts {
    uint64_t forged = 0, refused = 0, truncated = 0, named = 0, stormed = 0, withheld = 0;
};

/* The iface address in DIR/addr.<slot> (pid, device address, iface address). */
bool read_iface_address(const std::string &path, IfaceAddress *out) {
    FILE *f = fopen(path.c_str(), "r");
    if (f == nullptr) {
        return false;
    }
    uint64_t          pid = 0, dl = 0, il = 0;
    std::vector<char> skip(4096);
    bool ok = (fread(&pid, 8, 1, f) == 1) && (fread(&dl, 8, 1, f) == 1) && (dl < skip.size()) &&
              (fread(skip.data(), 1, dl, f) == dl) && (fread(&il, 8, 1, f) == 1) &&
              (il >= sizeof(*out)) && (fread(out, sizeof(*out), 1, f) == 1);
    fclose(f);
    return ok;
}

/* The memfd behind `id`, if /proc/PID/fd/FD still is that segment (its name
 * carries the serial): a reused descriptor number is never touched. */
int open_memfd(const uct_tm::ShmId &id) {
    char link[64], target[256];
    snprintf(link, sizeof(link), "/proc/%d/fd/%d", id.pid, id.fd);
    const ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n < 0) {
        return -1;
    }
    target[n] = '\0';
    return uct_tm::shm_memfd_link_is(target, id.serial) ? open(link, O_RDWR | O_CLOEXEC) : -1;
}

/* One forged answer into the segment's FIFO. */
void forge(void *base, std::mt19937_64 &rng, Counts *n) {
    auto             *header  = static_cast<SegmentHeader *>(base);
    const Geometry    g       = header->geometry;
    static const Kind kinds[] = {Kind::kRndvFin, Kind::kRndvRtr, Kind::kPullReq, Kind::kPullNack};
    FifoWriter        fifo;
    fifo.init(header, g);
    uint64_t seq;
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old); /* a claimed element is always published */
    if (fifo.claim(1, &seq)) {
        ElemHeader *e = fifo.elem(seq);
        e->kind       = kinds[rng() % 4];
        e->flags      = kFlagFirst;
        e->peer       = static_cast<uint16_t>(rng() % g.max_peers);
        e->aux        = 0;
        e->imm        = (rng() % 4 == 0) ? rng() : (((rng() % 64) << 32) | (rng() % 16));
        e->tag        = (rng() % 2 == 0) ? 0 : rng();
        e->length     = 0;
        if (e->kind == Kind::kPullReq) {
            PullRequest req{};
            req.pull_token = rng();
            req.address    = rng();
            req.length     = 4096;
            req.rndv_token = (rng() % 2 == 0) ? 0 : e->imm;
            req.rndv_proof = rng();
            req.piece_size = 4096;
            req.nchunks    = 1;
            memcpy(inline_payload(e), &req, sizeof(req));
            e->length = sizeof(req);
        }
        fifo.publish(e, seq);
        ++n->forged;
    }
    sigprocmask(SIG_SETMASK, &old, nullptr);
}

/* A split copy in progress (a send's slot READING, pieces left to claim) is
 * spoiled as a peer could: the claim counter stormed (hi = 2^24 - 1, which
 * no conforming peer writes) or one piece claimed and never written. Either
 * must fail that transfer with an error on both sides within SPLIT_TIMEOUT.
 * Splits last microseconds: the slots are watched for up to 2 ms. */
void spoil_split(void *base, std::mt19937_64 &rng, Counts *n) {
    const Geometry g     = static_cast<const SegmentHeader *>(base)->geometry;
    auto          *slots = reinterpret_cast<RndvSlot *>(static_cast<char *>(base) + g.rndv_offset);
    const bool     storm = (rng() % 2) == 0;
    const auto     until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    while (std::chrono::steady_clock::now() < until) {
        for (uint32_t i = 0; i < g.rndv_slots; ++i) {
            if ((slots[i].word.load(std::memory_order_acquire) & 0xf) != kRndvReading) {
                continue;
            }
            uint64_t         claim = slots[i].claim.load(std::memory_order_acquire);
            const SplitClaim c     = SplitClaim::unpack(claim);
            if (c.lo >= c.hi) {
                continue;
            }
            const uint64_t spoiled = storm ? SplitClaim{c.lo, kMaxSplitPieces, c.epoch}.pack()
                                           : SplitClaim{c.lo + 1, c.hi, c.epoch}.pack();
            if (slots[i].claim.compare_exchange_strong(claim, spoiled)) {
                ++(storm ? n->stormed : n->withheld);
                return;
            }
        }
    }
}

void attack(const IfaceAddress &a, std::mt19937_64 &rng, Counts *n) {
    const uct_tm::ShmId &id = a.segment;
    if (uct_tm::shm_is_named(id)) {
        ++n->named;
        return;
    }
    const int fd = open_memfd(id);
    if (fd < 0) {
        return; /* gone, or its descriptor reused */
    }
    if (ftruncate(fd, 0) == 0) {
        ++n->truncated;
        fprintf(stderr, "tm_soak_hostile: TRUNCATED the segment of process %d\n", id.pid);
    } else if (errno == EPERM) {
        ++n->refused;
    }
    void *base = mmap(nullptr, id.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        return;
    }
    const auto *header = static_cast<const SegmentHeader *>(base);
    if ((header->magic == kSegmentMagic) && (header->version == kLayoutVersion) &&
        valid_geometry(header->geometry, id.size)) {
        forge(base, rng, n);
        spoil_split(base, rng, n);
    }
    munmap(base, id.size);
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [SLOTS] [PER_SECOND] [SEED]\n", argv[0]);
        return 2;
    }
    const std::string dir   = argv[1];
    const int         slots = (argc > 2) ? atoi(argv[2]) : 16;
    const int         rate  = (argc > 3) ? atoi(argv[3]) : 50;
    std::mt19937_64   rng((argc > 4) ? strtoull(argv[4], nullptr, 0) : getpid());
    signal(SIGTERM, [](int) { g_stop = 1; });
    signal(SIGINT, [](int) { g_stop = 1; });
    Counts n;
    while (!g_stop && (slots > 0) && (rate > 0)) {
        IfaceAddress a;
        if (read_iface_address(dir + "/addr." + std::to_string(rng() % slots), &a)) {
            attack(a, rng, &n);
        }
        usleep(1000000 / rate);
    }
    printf("tm_soak_hostile forged=%llu truncations_refused=%llu truncated=%llu named=%llu "
           "claims_stormed=%llu pieces_withheld=%llu\n",
           static_cast<unsigned long long>(n.forged), static_cast<unsigned long long>(n.refused),
           static_cast<unsigned long long>(n.truncated), static_cast<unsigned long long>(n.named),
           static_cast<unsigned long long>(n.stormed), static_cast<unsigned long long>(n.withheld));
    return 0;
}
