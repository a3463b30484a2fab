/*
 * ucp_queue_depth: what a deep queue of posted receives costs UCP over tm_sm with tag
 * offload active (issue 4, must-show 3). Two processes; in each round, for a shallow and a
 * deep queue alternately:
 *
 *   receiver: posts DEPTH receives for tags that are never sent, then STREAM receives for
 *             tags 0..STREAM-1 (SIZE bytes each, at least UCX_TM_THRESH so UCP posts them all
 *             into tm_sm's tag list), signals, and times until all STREAM have completed;
 *   sender:   sends tags STREAM-1..0 (newest posted receive first) back to back.
 *
 * Per-message cost = that time / STREAM. Shallow = DEPTH 0; deep = DEPTH (default 65536), so
 * 64 Ki + STREAM receives are posted. The depth receives are cancelled after each round.
 * Prints one line per measurement, "depth <n> per_msg_ns <x>", then tm_sm's tag-list counters
 * for the receiver and exits 1 if fewer receives were posted into tm_sm than the rounds need.
 *
 * Usage: ucp_queue_depth [-d DEPTH] [-m STREAM] [-s SIZE] [-r ROUNDS]
 */
#include "ucp_peer.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using ucp_test::kSenderId;
using ucp_test::Peer;

struct Options {
    size_t   depth  = 65536;
    size_t   stream = 4096;
    size_t   size   = 1024;
    unsigned rounds = 3;
};
Options options;

constexpr uint64_t kDepthTagBase = 0x100000000ull; /* tags of receives nobody sends to */
constexpr uint8_t  kGo           = 1;
constexpr uint8_t  kDone         = 2;

void count_completion(void *request, ucs_status_t, const ucp_tag_recv_info_t *, void *counter) {
    ++*static_cast<size_t *>(counter);
    ucp_request_free(request);
}

ucp_request_param_t counting_param(size_t *counter) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_DATATYPE;
    param.cb.recv   = count_completion;
    param.user_data = counter;
    param.datatype  = ucp_dt_make_contig(1);
    return param;
}

/* Receives one unexpected message of at least UCX_TM_THRESH: UCP activates tag offload. */
bool activate(Peer &peer, bool receiver) {
    std::vector<char>   buffer(4096);
    ucp_request_param_t param{};
    if (receiver) {
        if (!peer.wait_signal(kGo)) {
            return false;
        }
        peer.progress_for(std::chrono::milliseconds(2));
        return peer.wait(ucp_tag_recv_nbx(peer.worker(), buffer.data(), buffer.size(),
                                          kSenderId, ~0ull, &param)) == UCS_OK;
    }
    void *req = ucp_tag_send_nbx(peer.ep(), buffer.data(), buffer.size(), kSenderId, &param);
    return peer.signal(kGo) && peer.wait(req) == UCS_OK;
}

double receive_round(Peer &peer, size_t depth, std::vector<char> &depth_bufs,
                     std::vector<char> &stream_bufs) {
    size_t              cancelled = 0, received = 0;
    ucp_request_param_t dparam    = counting_param(&cancelled);
    ucp_request_param_t sparam    = counting_param(&received);
    std::vector<void *> depth_reqs(depth);
    for (size_t i = 0; i < depth; ++i) {
        depth_reqs[i] = ucp_tag_recv_nbx(peer.worker(), &depth_bufs[i * options.size],
                                         options.size, kSenderId | (kDepthTagBase + i), ~0ull,
                                         &dparam);
    }
    for (size_t i = 0; i < options.stream; ++i) {
        ucp_tag_recv_nbx(peer.worker(), &stream_bufs[i * options.size], options.size,
                         kSenderId | i, ~0ull, &sparam);
    }
    const auto start = std::chrono::steady_clock::now();
    peer.signal(kGo);
    while (received < options.stream) {
        ucp_worker_progress(peer.worker());
    }
    const auto end = std::chrono::steady_clock::now();
    for (void *req : depth_reqs) {
        ucp_request_cancel(peer.worker(), req);
    }
    while (cancelled < depth) {
        ucp_worker_progress(peer.worker());
    }
    peer.signal(kDone);
    return std::chrono::duration<double, std::nano>(end - start).count() /
           static_cast<double>(options.stream);
}

int run_receiver(int fd) {
    Peer peer(fd);
    if (!peer.open() || !peer.connect() || !activate(peer, true)) {
        return 77;
    }
    std::vector<char> depth_bufs(options.depth * options.size);
    std::vector<char> stream_bufs(options.stream * options.size);
    receive_round(peer, 0, depth_bufs, stream_bufs); /* warm-up: pages, registrations */
    for (unsigned r = 0; r < options.rounds; ++r) {
        for (size_t depth : {size_t(0), options.depth}) {
            const double ns = receive_round(peer, depth, depth_bufs, stream_bufs);
            printf("round %u depth %zu per_msg_ns %.1f\n", r, depth, ns);
            fflush(stdout);
        }
    }
    peer.wait_signal(kDone);
    peer.close_ep();
    peer.signal(kDone);
    return 0;
}

int run_sender(int fd) {
    Peer peer(fd);
    if (!peer.open() || !peer.connect() || !activate(peer, false)) {
        return 77;
    }
    std::vector<char>   data(options.size, 'x');
    std::vector<void *> reqs(options.stream);
    ucp_request_param_t param{};
    for (unsigned r = 0; r < 2 * options.rounds + 1; ++r) { /* + the warm-up round */
        if (!peer.wait_signal(kGo)) {
            return 1;
        }
        for (size_t i = options.stream; i-- > 0;) {
            reqs[i] = ucp_tag_send_nbx(peer.ep(), data.data(), options.size, kSenderId | i, &param);
        }
        for (void *req : reqs) {
            if (peer.wait(req) != UCS_OK) {
                return 1;
            }
        }
        if (!peer.wait_signal(kDone)) {
            return 1;
        }
    }
    peer.close_ep();
    peer.signal(kDone);
    peer.wait_signal(kDone);
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    for (int opt; (opt = getopt(argc, argv, "d:m:s:r:")) != -1;) {
        switch (opt) {
        case 'd': options.depth = strtoul(optarg, nullptr, 0); break;
        case 'm': options.stream = strtoul(optarg, nullptr, 0); break;
        case 's': options.size = strtoul(optarg, nullptr, 0); break;
        case 'r': options.rounds = static_cast<unsigned>(strtoul(optarg, nullptr, 0)); break;
        default:
            fprintf(stderr, "usage: %s [-d depth] [-m stream] [-s size] [-r rounds]\n", argv[0]);
            return 2;
        }
    }
    if (options.stream == 0 || options.size == 0 || options.rounds == 0) {
        fprintf(stderr, "stream, size and rounds must be positive\n");
        return 2;
    }
    setenv("UCX_TM_SM_PRINT_STATS", "y", 1);
    setvbuf(stdout, nullptr, _IONBF, 0);
    std::string                receiver_err;
    const ucp_test::PairResult r = ucp_test::run_pair(run_receiver, run_sender, &receiver_err);
    if (r.receiver_rc != 0 || r.sender_rc != 0) {
        fprintf(stderr, "ucp_queue_depth: receiver exit %d, sender exit %d\n", r.receiver_rc,
                r.sender_rc);
        return r.receiver_rc == 77 ? 77 : 1;
    }
    const ucp_test::TagListCounters t =
            ucp_test::parse_tag_list_counters(receiver_err, r.receiver_pid);
    const unsigned long need = options.rounds * (options.depth + 2 * options.stream) + options.stream;
    printf("receiver tm_sm tag list: %lu posted, %lu matched, %lu cancelled (rounds need %lu "
           "posted)\n",
           t.posted, t.matched, t.cancelled, need);
    if (!t.found || t.posted < need) {
        fprintf(stderr, "ucp_queue_depth: receives were not all posted into tm_sm (offload "
                        "inactive, tm_sm not used, or UCX_TM_SM_TAG_LIST_SIZE too small)\n");
        return 1;
    }
    return 0;
}
