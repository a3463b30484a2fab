/*
 * ucp_queue_depth: what a deep queue of posted receives costs UCP over tm_sm with tag
 * offload active (issue 4, must-show 3).
 *
 * One thread drives two UCP workers of this process, connected through tm_sm (run it with
 * UCX_TLS=tm_sm: with self in the list UCP would bypass tm_sm inside a process). One thread
 * and its CPU clock make the figure immune to the scheduler, which on a loaded 2-vCPU
 * machine otherwise decides two-process timings. In each round, for a shallow and a deep
 * queue alternately:
 *
 *   the receiving worker posts DEPTH receives for tags that are never sent and STREAM
 *   receives for tags 0..STREAM-1 (SIZE bytes, at least UCX_TM_THRESH and tm_sm's RECV_MIN,
 *   so UCP posts every one into tm_sm's tag list): with -o newest (default) the stream receives are the newest
 *   (posted after the deep ones) and are matched newest first; with -o oldest they are
 *   posted first and matched in posting order;
 *   the sending worker sends them, and both workers are progressed until every receive
 *   completed (timed: thread CPU time);
 *   the DEPTH receives are cancelled (not timed).
 *
 * Per-message cost = timed CPU / STREAM, sender and receiver together. Shallow = DEPTH 0;
 * deep = DEPTH (default 65536), so 64 Ki + STREAM receives are posted. Prints
 * "round <r> depth <n> per_msg_ns <cpu> wall_ns <wall>" per measurement, then tm_sm's
 * tag-list counters; exits 1 if fewer receives were posted into tm_sm than the rounds need.
 *
 * The order matters to UCP itself: UCP 1.13 keeps every posted receive also in its own
 * expected queue (1021 hash buckets of singly-linked lists), and tm_sm's tag_consumed_cb
 * makes UCP unlink the request from its bucket, walking it from the head. With 64 Ki deep
 * receives ahead of it in the bucket (-o newest) that walk dominates (perf: 38 % of cycles in
 * ucp_tag_offload_tag_consumed); with -o oldest it is short.
 *
 * Usage: ucp_queue_depth [-d DEPTH] [-m STREAM] [-s SIZE] [-r ROUNDS] [-o newest|oldest]
 */
#include "ucp_peer.h"

#include <time.h>
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
    bool     newest = true; /* stream receives posted after the deep ones (else before) */
};
Options options;

constexpr uint64_t kDepthTagBase = 0x100000000ull; /* tags of receives nobody sends to */

double thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

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

/* Progresses both workers until the send request completes. */
bool finish_send(Peer &rx, Peer &tx, void *req) {
    if (req == nullptr) {
        return true;
    }
    if (UCS_PTR_IS_ERR(req)) {
        return false;
    }
    ucs_status_t status;
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        Peer::progress_both(rx, tx);
    }
    ucp_request_free(req);
    return status == UCS_OK;
}

/* One unexpected message of at least UCX_TM_THRESH: UCP activates tag offload on rx. */
bool activate(Peer &rx, Peer &tx) {
    std::vector<char>   buffer(4096);
    ucp_request_param_t param{};
    if (!finish_send(rx, tx, ucp_tag_send_nbx(tx.ep(), buffer.data(), buffer.size(), kSenderId,
                                              &param))) {
        return false;
    }
    for (int i = 0; i < 100; ++i) {
        Peer::progress_both(rx, tx); /* let it arrive unexpected */
    }
    return rx.wait(ucp_tag_recv_nbx(rx.worker(), buffer.data(), buffer.size(), kSenderId, ~0ull,
                                    &param)) == UCS_OK;
}

struct Cost {
    double cpu_ns;
    double wall_ns;
};

Cost round_trip(Peer &rx, Peer &tx, size_t depth, std::vector<char> &depth_bufs,
                std::vector<char> &stream_bufs, std::vector<void *> &send_reqs) {
    size_t              cancelled = 0, received = 0;
    ucp_request_param_t dparam    = counting_param(&cancelled);
    ucp_request_param_t rparam    = counting_param(&received);
    ucp_request_param_t sparam{};
    std::vector<void *> depth_reqs(depth);
    auto                post_depth = [&] {
        for (size_t i = 0; i < depth; ++i) {
            depth_reqs[i] = ucp_tag_recv_nbx(rx.worker(), &depth_bufs[i * options.size],
                                             options.size, kSenderId | (kDepthTagBase + i), ~0ull,
                                             &dparam);
        }
    };
    if (options.newest) {
        post_depth();
    }
    for (size_t i = 0; i < options.stream; ++i) {
        ucp_tag_recv_nbx(rx.worker(), &stream_bufs[i * options.size], options.size,
                         kSenderId | i, ~0ull, &rparam);
    }
    if (!options.newest) {
        post_depth();
    }
    std::vector<char> data(options.size, 'x');
    const double      cpu0  = thread_cpu_ns();
    const auto        wall0 = std::chrono::steady_clock::now();
    for (size_t n = 0; n < options.stream; ++n) {
        const size_t i = options.newest ? options.stream - 1 - n : n;
        send_reqs[i] = ucp_tag_send_nbx(tx.ep(), data.data(), options.size, kSenderId | i, &sparam);
        Peer::progress_both(rx, tx);
    }
    while (received < options.stream) {
        Peer::progress_both(rx, tx);
    }
    const double cpu1  = thread_cpu_ns();
    const auto   wall1 = std::chrono::steady_clock::now();
    for (void *req : send_reqs) {
        finish_send(rx, tx, req);
    }
    for (void *req : depth_reqs) {
        ucp_request_cancel(rx.worker(), req);
    }
    while (cancelled < depth) {
        Peer::progress_both(rx, tx);
    }
    const double n = static_cast<double>(options.stream);
    return {(cpu1 - cpu0) / n, std::chrono::duration<double, std::nano>(wall1 - wall0).count() / n};
}

/* Runs the rounds; tm_sm prints its counters to stderr when the workers close. */
bool run() {
    Peer rx(-1), tx(-1);
    if (!rx.open() || !tx.open() || !tx.connect_to(rx) || !activate(rx, tx)) {
        fprintf(stderr, "ucp_queue_depth: could not set up two workers (UCX_TLS=tm_sm?)\n");
        return false;
    }
    std::vector<char>   depth_bufs(options.depth * options.size);
    std::vector<char>   stream_bufs(options.stream * options.size);
    std::vector<void *> send_reqs(options.stream);
    round_trip(rx, tx, 0, depth_bufs, stream_bufs, send_reqs); /* warm-up: pages, registrations */
    for (unsigned r = 0; r < options.rounds; ++r) {
        for (size_t depth : {size_t(0), options.depth}) {
            const Cost c = round_trip(rx, tx, depth, depth_bufs, stream_bufs, send_reqs);
            printf("round %u depth %zu per_msg_ns %.1f wall_ns %.1f\n", r, depth, c.cpu_ns,
                   c.wall_ns);
        }
    }
    ucp_request_param_t param{};
    tx.wait(ucp_ep_close_nbx(tx.ep(), &param));
    return true;
}

}  // namespace

int main(int argc, char **argv) {
    for (int opt; (opt = getopt(argc, argv, "d:m:s:r:o:")) != -1;) {
        switch (opt) {
        case 'd': options.depth = strtoul(optarg, nullptr, 0); break;
        case 'm': options.stream = strtoul(optarg, nullptr, 0); break;
        case 's': options.size = strtoul(optarg, nullptr, 0); break;
        case 'r': options.rounds = static_cast<unsigned>(strtoul(optarg, nullptr, 0)); break;
        case 'o': options.newest = std::string(optarg) != "oldest"; break;
        default:
            fprintf(stderr, "usage: %s [-d depth] [-m stream] [-s size] [-r rounds] [-o newest|oldest]\n",
                    argv[0]);
            return 2;
        }
    }
    if (options.stream == 0 || options.size == 0 || options.rounds == 0) {
        fprintf(stderr, "stream, size and rounds must be positive\n");
        return 2;
    }
    setenv("UCX_TM_SM_PRINT_STATS", "y", 1);
    setvbuf(stdout, nullptr, _IONBF, 0);

    /* Capture our own stderr while the workers close: that is where tm_sm prints. */
    fflush(stderr);
    FILE     *capture = tmpfile();
    const int saved   = dup(STDERR_FILENO);
    if (capture == nullptr || saved < 0 || dup2(fileno(capture), STDERR_FILENO) < 0) {
        perror("ucp_queue_depth: capturing stderr");
        return 1;
    }
    const bool ok = run();
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    std::string text;
    rewind(capture);
    for (int ch; (ch = fgetc(capture)) != EOF;) {
        text.push_back(static_cast<char>(ch));
    }
    fclose(capture);
    fputs(text.c_str(), stderr);
    if (!ok) {
        return 1;
    }
    const ucp_test::TagListCounters t = ucp_test::parse_tag_list_counters(text, getpid());
    const unsigned long need =
            options.rounds * (options.depth + 2 * options.stream) + options.stream;
    printf("tm_sm tag list: %lu posted, %lu matched, %lu cancelled (rounds need %lu posted)\n",
           t.posted, t.matched, t.cancelled, need);
    if (!t.found || t.posted < need) {
        fprintf(stderr, "ucp_queue_depth: receives were not all posted into tm_sm (offload "
                        "inactive, tm_sm not used, or UCX_TM_SM_TAG_LIST_SIZE too small)\n");
        return 1;
    }
    return 0;
}
