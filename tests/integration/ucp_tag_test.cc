/*
 * ucp_tag_test: UCP's tag API between two processes over whatever UCX_TLS selects (the
 * driver runs it with tm_sm), asserting payloads, statuses, sender tags and lengths.
 *
 * Cases: activation by an unexpected message, exact / masked / wildcard receives of eager
 * and rendezvous sizes, expected and unexpected, synchronous sends, ucp_tag_probe_nb with
 * and without remove (+ ucp_tag_msg_recv_nbx), cancel of a posted receive, truncation
 * (eager and rendezvous, posted and unexpected) with a guard area behind every receive
 * buffer, and every receive completing exactly once. Non-contiguous datatypes, as Open
 * MPI's pml ucx uses them for derived MPI datatypes: receives (and some sends) through a
 * UCP iov datatype (three pieces with gaps) and a UCP generic datatype (64-byte blocks
 * every 128 bytes), posted and unexpected, eager and rendezvous; every byte is checked
 * where the layout puts it and every gap must stay untouched.
 *
 * The parent forks the receiver (its stderr captured) and the sender. With
 * UCX_TM_SM_PRINT_STATS=y (set here) tm_sm prints its counters when the receiver's iface
 * closes; the parent parses that line and asserts that receives were posted into tm_sm's
 * tag list, matched there and cancelled there (UCP offload active). --no-offload-check
 * skips that (for transports other than tm_sm); --offload-off asserts that nothing was
 * posted (UCP told not to offload).
 *
 * Between two hosts: `ucp_tag_test -p PORT` receives, `ucp_tag_test -p PORT HOST` sends;
 * they meet over TCP. The offload check is then the caller's (the receiver's transport
 * prints its counters to the receiver's stderr).
 *
 * UCP_TAG_TEST_SOCKADDR=IP connects through UCP's connection manager (the receiver
 * listens on IP) instead of exchanging worker addresses: for transports that connect
 * endpoint to endpoint where no UD transport can carry UCP's wireup.
 *
 * Exit: 0 pass, 1 failure (each failure printed), 77 when no UCP transport connects.
 */
#include "tcp_link.h"
#include "ucp_peer.h"

#include <ucp/api/ucp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using ucp_test::kSenderId;
using ucp_test::kSenderMask;
using ucp_test::kTimeout;
using ucp_test::pattern;
using ucp_test::Peer;

constexpr size_t  kGuard     = 64; /* bytes checked behind each buffer */
constexpr uint8_t kGuardByte = 0xe7;

int failures = 0;

void expect(bool ok, const std::string &what) {
    if (!ok) {
        ++failures;
        fprintf(stdout, "FAIL: %s\n", what.c_str());
        fflush(stdout);
    }
}

/* How a message is laid out in the user's buffer: the UCP datatype a side uses. */
enum class Dt {
    Contig,  /* ucp_dt_make_contig(1) */
    Iov,     /* ucp_dt_make_iov(): three pieces (1/4, 1/2, the rest) with kIovGap between */
    Generic, /* ucp_dt_create_generic: kBlock bytes every 2 * kBlock */
};

constexpr size_t kIovGap = 40;
constexpr size_t kBlock  = 64;

/* Where the datatype puts byte `i` of a message of up to `length` bytes. */
size_t place(Dt dt, size_t length, size_t i) {
    switch (dt) {
    case Dt::Contig:
        return i;
    case Dt::Iov: {
        const size_t first = length / 4, second = length / 2;
        return i < first ? i : i < first + second ? i + kIovGap : i + 2 * kIovGap;
    }
    case Dt::Generic:
        return (i / kBlock) * 2 * kBlock + i % kBlock;
    }
    return i;
}

/* The bytes a buffer of `length` message bytes spans in this layout. */
size_t span(Dt dt, size_t length) { return length == 0 ? 0 : place(dt, length, length - 1) + 1; }

/* How a case is driven; both processes walk the same table in the same order. */
enum class Kind {
    Expected,     /* receiver posts, then the sender sends */
    Unexpected,   /* the sender sends, then the receiver receives */
    SyncExpected, /* as Expected, with ucp_tag_send_sync_nbx */
    ProbeKeep,    /* unexpected; probe without remove, then ucp_tag_recv_nbx */
    ProbeRemove,  /* unexpected; probe with remove, then ucp_tag_msg_recv_nbx */
    /* as ProbeRemove, the receive's param without UCP_OP_ATTR_FIELD_USER_DATA and its
     * user_data field left holding garbage: the callback must see NULL */
    ProbeRemoveNoUserData,
    Cancel,       /* receiver posts and cancels; nothing is sent */
};

struct Case {
    const char *name;
    Kind        kind;
    size_t      send_len;
    size_t      recv_len;
    uint64_t    tag;      /* the sent tag (kSenderId is or-ed in) */
    uint64_t    recv_tag; /* the receive's tag and mask */
    uint64_t    mask;
    ucs_status_t expect_status;
    bool        posted;   /* expected to be posted into the transport's tag list */
    /* sent with UCP_OP_ATTR_FLAG_FAST_CMPL (as Open MPI's blocking MPI_Send): UCP's v2
     * engine selects from another table, where 64-300 KiB go by tm_sm's tag rendezvous */
    bool        fast    = false;
    Dt          recv_dt = Dt::Contig;
    Dt          send_dt = Dt::Contig;
};

constexpr uint64_t kFull = ~0ull;

/* Receives of at least UCX_TM_THRESH (1024) bytes with a specific sender are posted once
 * offload is active, which the first case does (an unexpected message). It is at least
 * UCX_TM_THRESH long so that UCP also learns which iface this sender uses: with several
 * ifaces (UCX_TLS=tm_sm,self) UCP posts only for senders seen through such a message. */
const std::vector<Case> &cases() {
    static const std::vector<Case> table = {
        {"activate: unexpected 4 KiB", Kind::Unexpected, 4096, 4096, 1, 1, kFull, UCS_OK, false},
        {"exact eager 2 KiB", Kind::Expected, 2048, 2048, 2, 2, kFull, UCS_OK, true},
        {"exact eager 16 KiB", Kind::Expected, 16384, 16384, 3, 3, kFull, UCS_OK, true},
        {"exact rndv 256 KiB", Kind::Expected, 256 << 10, 256 << 10, 4, 4, kFull, UCS_OK, true},
        {"exact rndv 1 MiB", Kind::Expected, 1 << 20, 1 << 20, 5, 5, kFull, UCS_OK, true},
        {"exact rndv 1 MiB into 2 MiB", Kind::Expected, 1 << 20, 2 << 20, 6, 6, kFull, UCS_OK,
         true},
        {"masked eager 4 KiB", Kind::Expected, 4096, 4096, 0x7a5, 0x700, ~0xffull, UCS_OK, true},
        {"masked rndv 512 KiB", Kind::Expected, 512 << 10, 512 << 10, 0x8c3, 0x800, ~0xffull,
         UCS_OK, true},
        {"wildcard tag eager 8 KiB", Kind::Expected, 8192, 8192, 0x91, 0, kSenderMask, UCS_OK,
         true},
        {"wildcard any eager 4 KiB", Kind::Expected, 4096, 4096, 0xa1, 0, 0, UCS_OK, false},
        {"wildcard any rndv 1 MiB", Kind::Expected, 1 << 20, 1 << 20, 0xa2, 0, 0, UCS_OK, false},
        {"sync eager 4 KiB", Kind::SyncExpected, 4096, 4096, 0xb1, 0xb1, kFull, UCS_OK, true},
        {"sync eager 64 B", Kind::SyncExpected, 64, 64, 0xb2, 0xb2, kFull, UCS_OK, false},
        {"unexpected eager 32 KiB", Kind::Unexpected, 32768, 32768, 0xc1, 0xc1, kFull, UCS_OK,
         false},
        {"unexpected rndv 1 MiB", Kind::Unexpected, 1 << 20, 1 << 20, 0xc2, 0xc2, kFull, UCS_OK,
         false},
        {"probe keep eager 2 KiB", Kind::ProbeKeep, 2048, 2048, 0xd1, 0xd1, kFull, UCS_OK, false},
        {"probe remove eager 4 KiB", Kind::ProbeRemove, 4096, 4096, 0xd2, 0xd2, kFull, UCS_OK,
         false},
        {"probe remove rndv 1 MiB", Kind::ProbeRemove, 1 << 20, 1 << 20, 0xd3, 0xd3, kFull,
         UCS_OK, false},
        {"probe remove rndv 1,148,576 B, no user data", Kind::ProbeRemoveNoUserData, 1148576,
         1148576, 0xd4, 0xd4, kFull, UCS_OK, false},
        {"cancel posted 4 KiB", Kind::Cancel, 0, 4096, 0, 0xe1, kFull, UCS_ERR_CANCELED, true},
        {"cancel posted 1 MiB", Kind::Cancel, 0, 1 << 20, 0, 0xe2, kFull, UCS_ERR_CANCELED, true},
        {"truncated posted eager 4 KiB into 2 KiB", Kind::Expected, 4096, 2048, 0xf1, 0xf1,
         kFull, UCS_ERR_MESSAGE_TRUNCATED, true},
        {"truncated posted rndv 1 MiB into 64 KiB", Kind::Expected, 1 << 20, 64 << 10, 0xf2,
         0xf2, kFull, UCS_ERR_MESSAGE_TRUNCATED, true},
        {"truncated unexpected eager 4 KiB into 2 KiB", Kind::Unexpected, 4096, 2048, 0xf3,
         0xf3, kFull, UCS_ERR_MESSAGE_TRUNCATED, false},
        {"truncated unexpected rndv 1 MiB into 64 KiB", Kind::Unexpected, 1 << 20, 64 << 10,
         0xf4, 0xf4, kFull, UCS_ERR_MESSAGE_TRUNCATED, false},
        {"exact eager 2 KiB after truncation", Kind::Expected, 2048, 2048, 0xf5, 0xf5, kFull,
         UCS_OK, true},
        {"unexpected rndv 128 KiB, fast-completion send", Kind::Unexpected, 128 << 10, 128 << 10,
         0x101, 0x101, kFull, UCS_OK, false, true},
        {"exact rndv 128 KiB, fast-completion send", Kind::Expected, 128 << 10, 128 << 10, 0x102,
         0x102, kFull, UCS_OK, true, true},
        {"exact eager 32 KiB, fast-completion send", Kind::Expected, 32768, 32768, 0x103, 0x103,
         kFull, UCS_OK, true, true},
        /* Non-contiguous receives are not posted to the transport (UCP keeps them in
         * software), but a rendezvous matching one may still use its one-sided ops. */
        {"iov receive eager 4 KiB", Kind::Expected, 4096, 4096, 0x201, 0x201, kFull, UCS_OK,
         false, false, Dt::Iov},
        {"iov receive rndv 1 MiB", Kind::Expected, 1 << 20, 1 << 20, 0x202, 0x202, kFull,
         UCS_OK, false, false, Dt::Iov},
        {"iov receive unexpected rndv 256 KiB", Kind::Unexpected, 256 << 10, 256 << 10, 0x203,
         0x203, kFull, UCS_OK, false, false, Dt::Iov},
        {"generic receive eager 4 KiB", Kind::Expected, 4096, 4096, 0x211, 0x211, kFull, UCS_OK,
         false, false, Dt::Generic},
        {"generic receive eager 16 KiB", Kind::Expected, 16384, 16384, 0x212, 0x212, kFull,
         UCS_OK, false, false, Dt::Generic},
        {"generic receive rndv 256 KiB", Kind::Expected, 256 << 10, 256 << 10, 0x213, 0x213,
         kFull, UCS_OK, false, false, Dt::Generic},
        {"generic receive rndv 1 MiB", Kind::Expected, 1 << 20, 1 << 20, 0x214, 0x214, kFull,
         UCS_OK, false, false, Dt::Generic},
        {"generic receive unexpected eager 8 KiB", Kind::Unexpected, 8192, 8192, 0x215, 0x215,
         kFull, UCS_OK, false, false, Dt::Generic},
        {"generic receive unexpected rndv 1 MiB", Kind::Unexpected, 1 << 20, 1 << 20, 0x216,
         0x216, kFull, UCS_OK, false, false, Dt::Generic},
        {"generic receive, probe remove rndv 1 MiB", Kind::ProbeRemove, 1 << 20, 1 << 20, 0x217,
         0x217, kFull, UCS_OK, false, false, Dt::Generic},
        {"generic receive rndv 512 KiB into 1 MiB", Kind::Expected, 512 << 10, 1 << 20, 0x218,
         0x218, kFull, UCS_OK, false, false, Dt::Generic},
        /* The contiguous receive after non-contiguous ones is posted to the transport: the
         * receive Open MPI makes next to its derived datatypes. */
        {"contig receive rndv 4 KiB after generic ones", Kind::Expected, 4096, 4096, 0x219,
         0x219, kFull, UCS_OK, true},
        {"contig receive rndv 256 KiB after generic ones", Kind::Expected, 256 << 10, 256 << 10,
         0x21a, 0x21a, kFull, UCS_OK, true},
        {"generic send rndv 1 MiB into contig receive", Kind::Expected, 1 << 20, 1 << 20, 0x221,
         0x221, kFull, UCS_OK, true, false, Dt::Contig, Dt::Generic},
        {"generic send eager 8 KiB into generic receive", Kind::Expected, 8192, 8192, 0x222,
         0x222, kFull, UCS_OK, false, false, Dt::Generic, Dt::Generic},
        {"iov send rndv 256 KiB into generic receive, unexpected", Kind::Unexpected, 256 << 10,
         256 << 10, 0x223, 0x223, kFull, UCS_OK, false, false, Dt::Generic, Dt::Iov},
        {"generic send rndv 1 MiB into iov receive", Kind::Expected, 1 << 20, 1 << 20, 0x224,
         0x224, kFull, UCS_OK, false, false, Dt::Iov, Dt::Generic},
    };
    return table;
}

/* ---- datatypes ---------------------------------------------------------------------- */

/* The generic datatype's state: the user's buffer and its length in bytes (count). */
struct GenericState {
    uint8_t *base;
    size_t   count;
};

void *generic_start_pack(void *, const void *buffer, size_t count) {
    return new GenericState{static_cast<uint8_t *>(const_cast<void *>(buffer)), count};
}

void *generic_start_unpack(void *, void *buffer, size_t count) {
    return new GenericState{static_cast<uint8_t *>(buffer), count};
}

size_t generic_packed_size(void *state) { return static_cast<GenericState *>(state)->count; }

/* Copies between the packed stream at `offset` and the blocks, a block piece at a time. */
template <typename Copy> void for_each_block(size_t offset, size_t length, Copy copy) {
    for (size_t done = 0; done < length;) {
        const size_t i = offset + done;
        const size_t n = std::min(length - done, kBlock - i % kBlock);
        copy(place(Dt::Generic, 0, i), done, n);
        done += n;
    }
}

size_t generic_pack(void *state, size_t offset, void *dest, size_t max_length) {
    const auto  *st = static_cast<GenericState *>(state);
    const size_t n  = offset < st->count ? std::min(max_length, st->count - offset) : 0;
    for_each_block(offset, n, [&](size_t at, size_t done, size_t len) {
        memcpy(static_cast<uint8_t *>(dest) + done, st->base + at, len);
    });
    return n;
}

ucs_status_t generic_unpack(void *state, size_t offset, const void *src, size_t length) {
    const auto *st = static_cast<GenericState *>(state);
    if ((offset > st->count) || (length > st->count - offset)) {
        fprintf(stdout, "FAIL: generic unpack of %zu bytes at %zu into %zu\n", length, offset,
                st->count);
        ++failures;
        return UCS_ERR_MESSAGE_TRUNCATED;
    }
    for_each_block(offset, length, [&](size_t at, size_t done, size_t len) {
        memcpy(st->base + at, static_cast<const uint8_t *>(src) + done, len);
    });
    return UCS_OK;
}

void generic_finish(void *state) { delete static_cast<GenericState *>(state); }

ucp_datatype_t generic_datatype() {
    static ucp_datatype_t dt = [] {
        ucp_generic_dt_ops_t ops{};
        ops.start_pack   = generic_start_pack;
        ops.start_unpack = generic_start_unpack;
        ops.packed_size  = generic_packed_size;
        ops.pack         = generic_pack;
        ops.unpack       = generic_unpack;
        ops.finish       = generic_finish;
        ucp_datatype_t created;
        if (ucp_dt_create_generic(&ops, nullptr, &created) != UCS_OK) {
            fprintf(stdout, "FAIL: ucp_dt_create_generic\n");
            exit(1);
        }
        return created;
    }();
    return dt;
}

/* A user buffer of `length` message bytes in a datatype's layout, kGuard bytes behind it,
 * everything filled with `fill` first. */
class UserBuffer {
  public:
    UserBuffer(Dt dt, size_t length, uint8_t fill)
        : dt_(dt), length_(length), bytes_(span(dt, length) + kGuard, fill) {
        const size_t sizes[3] = {length / 4, length / 2, length - length / 4 - length / 2};
        size_t       at       = 0;
        for (int k = 0; k < 3; ++k) {
            iov_[k] = {bytes_.data() + place(dt, length, at), sizes[k]};
            at += sizes[k];
        }
    }
    UserBuffer(const UserBuffer &)            = delete;
    UserBuffer &operator=(const UserBuffer &) = delete;

    void          *ucp_buffer() { return dt_ == Dt::Iov ? static_cast<void *>(iov_) : bytes_.data(); }
    size_t         ucp_count() const { return dt_ == Dt::Iov ? 3 : length_; }
    ucp_datatype_t datatype() const {
        return dt_ == Dt::Contig ? ucp_dt_make_contig(1)
               : dt_ == Dt::Iov  ? ucp_dt_make_iov()
                                 : generic_datatype();
    }
    uint8_t       &at(size_t i) { return bytes_[place(dt_, length_, i)]; }
    /* What the buffer holds after receiving `received` bytes of pattern `seed` into it
     * filled with `fill`; compared byte for byte (gaps and guard included). */
    size_t first_difference(unsigned seed, size_t received, uint8_t fill) const {
        std::vector<uint8_t> want(bytes_.size(), fill);
        for (size_t i = 0; i < received; ++i) {
            want[place(dt_, length_, i)] = ucp_test::pattern(seed, i);
        }
        const auto diff = std::mismatch(want.begin(), want.end(), bytes_.begin());
        return diff.first == want.end() ? SIZE_MAX : static_cast<size_t>(diff.first - want.begin());
    }
    /* Nothing after the layout's span written (the guard). */
    bool guard_intact(uint8_t fill) const {
        return std::all_of(bytes_.end() - kGuard, bytes_.end(), [&](uint8_t b) { return b == fill; });
    }

  private:
    Dt                   dt_;
    size_t               length_;
    std::vector<uint8_t> bytes_;
    ucp_dt_iov_t         iov_[3];
};

/* ---- receiver ---------------------------------------------------------------------- */

struct RecvResult {
    int                 completions = 0;
    ucs_status_t        status      = UCS_INPROGRESS;
    ucp_tag_recv_info_t info{};
};

void on_recv(void *, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user_data) {
    auto *result = static_cast<RecvResult *>(user_data);
    ++result->completions;
    result->status = status;
    result->info   = *info;
}

ucp_request_param_t recv_param(RecvResult *result, ucp_datatype_t datatype) {
    ucp_request_param_t param{};
    /* NO_IMM_CMPL: a receive that matches an unexpected message at once still reports
     * through the callback, so every receive is checked the same way. */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv   = on_recv;
    param.user_data = result;
    param.datatype  = datatype;
    return param;
}

/* The receive whose param has no user data: UCP passes the callback NULL. */
RecvResult no_user_data_result;
const void *no_user_data_seen = nullptr;

void on_recv_no_user_data(void *, ucs_status_t status, const ucp_tag_recv_info_t *info,
                          void *user_data) {
    no_user_data_seen = user_data;
    on_recv(nullptr, status, info, &no_user_data_result);
}

void check_received(const Case &c, unsigned seed, const UserBuffer &buffer,
                    const RecvResult &result, ucs_status_t waited) {
    const std::string name = c.name;
    expect(waited != UCS_ERR_TIMED_OUT, name + ": receive completed");
    expect(result.completions == 1,
           name + ": completed exactly once (" + std::to_string(result.completions) + ")");
    expect(result.status == c.expect_status,
           name + ": status " + ucs_status_string(result.status) + ", expected " +
                   ucs_status_string(c.expect_status));
    const uint64_t sent_tag = c.tag | kSenderId;
    if (c.expect_status != UCS_ERR_CANCELED) {
        expect(result.info.sender_tag == sent_tag, name + ": sender tag");
    }
    if (c.expect_status == UCS_OK) {
        expect(result.info.length == c.send_len,
               name + ": length " + std::to_string(result.info.length));
        /* every byte where the datatype puts it, every gap and the guard untouched */
        const size_t bad = buffer.first_difference(seed, c.send_len, kGuardByte);
        expect(bad == SIZE_MAX, name + ": buffer differs at byte " + std::to_string(bad));
    } else {
        expect(buffer.guard_intact(kGuardByte), name + ": nothing written past the receive buffer");
    }
}

ucp_tag_message_h probe(Peer &peer, const Case &c, int remove, ucp_tag_recv_info_t *info) {
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    for (;;) {
        ucp_tag_message_h msg =
                ucp_tag_probe_nb(peer.worker(), c.recv_tag | kSenderId, c.mask, remove, info);
        if (msg != nullptr || std::chrono::steady_clock::now() > deadline) {
            return msg;
        }
        ucp_worker_progress(peer.worker());
    }
}

void receive_case(Peer &peer, const Case &c, unsigned seed) {
    UserBuffer           buffer(c.recv_dt, c.recv_len, kGuardByte);
    RecvResult           result;
    ucp_request_param_t  param    = recv_param(&result, buffer.datatype());
    const uint64_t       recv_tag = c.mask == 0 ? 0 : (c.recv_tag | kSenderId);
    const std::string    name     = c.name;
    void                *req      = nullptr;

    switch (c.kind) {
    case Kind::Expected:
    case Kind::SyncExpected:
        req = ucp_tag_recv_nbx(peer.worker(), buffer.ucp_buffer(), buffer.ucp_count(),
                               recv_tag, c.mask, &param);
        expect(peer.signal(static_cast<uint8_t>(seed)), name + ": signal");
        break;
    case Kind::Unexpected:
        expect(peer.wait_signal(static_cast<uint8_t>(seed)), name + ": sender signal");
        peer.progress_for(std::chrono::milliseconds(2)); /* let it land unexpected */
        req = ucp_tag_recv_nbx(peer.worker(), buffer.ucp_buffer(), buffer.ucp_count(),
                               recv_tag, c.mask, &param);
        break;
    case Kind::ProbeKeep:
    case Kind::ProbeRemove:
    case Kind::ProbeRemoveNoUserData: {
        expect(peer.wait_signal(static_cast<uint8_t>(seed)), name + ": sender signal");
        const int           remove = c.kind != Kind::ProbeKeep;
        if (c.kind == Kind::ProbeRemoveNoUserData) {
            param.op_attr_mask &= ~UCP_OP_ATTR_FIELD_USER_DATA;
            param.user_data = &param; /* garbage UCP must not read */
            param.cb.recv   = on_recv_no_user_data;
        }
        ucp_tag_recv_info_t info{};
        ucp_tag_message_h   msg = probe(peer, c, remove, &info);
        expect(msg != nullptr, name + ": probe found the message");
        if (msg == nullptr) {
            return;
        }
        expect(info.sender_tag == (c.tag | kSenderId), name + ": probe sender tag");
        expect(info.length == c.send_len,
               name + ": probe length " + std::to_string(info.length));
        if (remove) {
            ucp_tag_recv_info_t again{};
            expect(ucp_tag_probe_nb(peer.worker(), recv_tag, c.mask, 0, &again) == nullptr,
                   name + ": a removed message is not probed again");
            req = ucp_tag_msg_recv_nbx(peer.worker(), buffer.ucp_buffer(), buffer.ucp_count(), msg,
                                       &param);
        } else {
            req = ucp_tag_recv_nbx(peer.worker(), buffer.ucp_buffer(), buffer.ucp_count(),
                                   recv_tag, c.mask, &param);
        }
        break;
    }
    case Kind::Cancel:
        req = ucp_tag_recv_nbx(peer.worker(), buffer.ucp_buffer(), buffer.ucp_count(),
                               recv_tag, c.mask, &param);
        peer.progress_for(std::chrono::milliseconds(1));
        expect(result.completions == 0, name + ": not completed before the cancel");
        ucp_request_cancel(peer.worker(), req);
        expect(peer.signal(static_cast<uint8_t>(seed)), name + ": signal");
        break;
    }
    ucs_status_t waited = peer.wait(req);
    peer.progress_for(std::chrono::milliseconds(1)); /* a second completion would show now */
    if (c.kind == Kind::ProbeRemoveNoUserData) {
        expect(no_user_data_seen == nullptr, name + ": the callback's user_data is NULL");
        result = no_user_data_result;
    }
    check_received(c, seed, buffer, result, waited);
}

/* ---- sender ------------------------------------------------------------------------- */

void send_case(Peer &peer, const Case &c, unsigned seed) {
    const std::string name = c.name;
    if (c.kind == Kind::Cancel) {
        expect(peer.wait_signal(static_cast<uint8_t>(seed)), name + ": receiver signal");
        return;
    }
    UserBuffer data(c.send_dt, c.send_len, 0);
    for (size_t i = 0; i < c.send_len; ++i) {
        data.at(i) = pattern(seed, i);
    }
    const bool receiver_first = c.kind == Kind::Expected || c.kind == Kind::SyncExpected;
    if (receiver_first) {
        expect(peer.wait_signal(static_cast<uint8_t>(seed)), name + ": receiver signal");
    }
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | (c.fast ? UCP_OP_ATTR_FLAG_FAST_CMPL : 0);
    param.datatype     = data.datatype();
    void *req = c.kind == Kind::SyncExpected
                        ? ucp_tag_send_sync_nbx(peer.ep(), data.ucp_buffer(), data.ucp_count(),
                                                c.tag | kSenderId, &param)
                        : ucp_tag_send_nbx(peer.ep(), data.ucp_buffer(), data.ucp_count(),
                                           c.tag | kSenderId, &param);
    if (!receiver_first) {
        expect(peer.signal(static_cast<uint8_t>(seed)), name + ": signal");
    }
    ucs_status_t status = peer.wait(req);
    expect(status == UCS_OK, name + ": send status " + ucs_status_string(status));
}

enum Role { kReceiver, kSender };

int run_peer(Role role, int fd) {
    Peer        peer(fd);
    const char *sockaddr = getenv("UCP_TAG_TEST_SOCKADDR");
    if (!peer.open() ||
        !(sockaddr != nullptr ? peer.connect_sockaddr(role == kReceiver, sockaddr)
                              : peer.connect())) {
        fprintf(stdout, "SKIP: UCP could not connect the two processes (UCX_TLS=%s)\n",
                getenv("UCX_TLS") ? getenv("UCX_TLS") : "");
        return 77;
    }
    unsigned seed = 1;
    for (const Case &c : cases()) {
        if (role == kReceiver) {
            receive_case(peer, c, seed);
        } else {
            send_case(peer, c, seed);
        }
        ++seed;
    }
    /* Done: each side closes its endpoint while the other still progresses. */
    if (role == kSender) {
        peer.close_ep();
        expect(peer.signal(0xff), "sender closed");
        expect(peer.wait_signal(0xfe), "receiver closed");
    } else {
        expect(peer.wait_signal(0xff), "sender closed");
        peer.close_ep();
        expect(peer.signal(0xfe), "receiver closed");
    }
    return failures == 0 ? 0 : 1;
}

int run_receiver(int fd) { return run_peer(kReceiver, fd); }
int run_sender(int fd) { return run_peer(kSender, fd); }

}  // namespace

/* One side of a run between two hosts. */
int run_two_hosts(uint16_t port, const char *host) {
    const double timeout = std::chrono::duration<double>(ucp_test::kTimeout).count();
    const int    fd      = host != nullptr
                                   ? uct_tm::tcp_link_connect("ucp_tag_test", host, port, timeout)
                                   : uct_tm::tcp_link_accept("ucp_tag_test", port, timeout);
    if (fd < 0) {
        return 1;
    }
    const int rc = run_peer(host != nullptr ? kSender : kReceiver, fd);
    if (rc != 77) {
        printf("%s (%s): %zu cases, %d failures\n", failures == 0 ? "PASS" : "FAIL",
               host != nullptr ? "sender" : "receiver", cases().size(), failures);
    }
    close(fd);
    return rc;
}

int usage() {
    fprintf(stderr, "usage: ucp_tag_test [--no-offload-check | --offload-off]\n"
                    "       ucp_tag_test -p PORT        (receiver, on one host)\n"
                    "       ucp_tag_test -p PORT HOST   (sender, on another host)\n");
    return 2;
}

int main(int argc, char **argv) {
    /* --offload-off: UCP was told not to offload; tm_sm must see no posted receive */
    const char *mode          = argc > 1 ? argv[1] : "";
    const bool  offload_check = strcmp(mode, "--no-offload-check") != 0;
    const bool  offload_off   = strcmp(mode, "--offload-off") == 0;
    setvbuf(stdout, nullptr, _IONBF, 0);
    if (strcmp(mode, "-p") == 0) {
        uint16_t port;
        if ((argc < 3) || (argc > 4) || !uct_tm::parse_tcp_port(argv[2], &port)) {
            return usage();
        }
        return run_two_hosts(port, argc == 4 ? argv[3] : nullptr);
    }
    if ((argc > 2) || ((argc == 2) && !offload_off && offload_check)) {
        return usage();
    }
    setenv("UCX_TM_SM_PRINT_STATS", "y", 1);

    std::string                receiver_err;
    const ucp_test::PairResult r = ucp_test::run_pair(run_receiver, run_sender, &receiver_err);
    if (r.receiver_rc == 77 || r.sender_rc == 77) {
        return 77;
    }
    expect(r.receiver_rc == 0, "receiver exit code " + std::to_string(r.receiver_rc));
    expect(r.sender_rc == 0, "sender exit code " + std::to_string(r.sender_rc));

    if (offload_check) {
        unsigned long want_posted = 0;
        for (const Case &c : cases()) {
            want_posted += c.posted ? 1 : 0;
        }
        ucp_test::TagListCounters t = ucp_test::parse_tag_list_counters(receiver_err, r.receiver_pid);
        expect(t.found, "tm_sm printed the receiver's counters (is tm_sm in UCX_TLS?)");
        printf("receiver tm_sm tag list: %lu posted, %lu matched, %lu cancelled "
               "(cases that post: %lu)\n",
               t.posted, t.matched, t.cancelled, want_posted);
        if (offload_off) {
            expect(t.posted == 0, "no receive posted into tm_sm's tag list");
        } else {
            expect(t.posted >= want_posted, "receives posted into tm_sm's tag list");
            expect(t.matched + t.cancelled == t.posted,
                   "every posted receive matched or cancelled in tm_sm");
            expect(t.cancelled >= 2, "cancels reached tm_sm");
        }
    }
    printf("%s: %zu cases, %d failures\n", failures == 0 ? "PASS" : "FAIL", cases().size(),
           failures);
    return failures == 0 ? 0 : 1;
}
