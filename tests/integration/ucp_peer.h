/*
 * One process of a two-process UCP test or benchmark: a UCP context and worker with the tag
 * feature, an endpoint to the other process (worker addresses exchanged over a socket), and
 * one-byte signals over that socket that keep the worker progressing while they wait.
 */
#ifndef UCT_TM_TESTS_INTEGRATION_UCP_PEER_H_
#define UCT_TM_TESTS_INTEGRATION_UCP_PEER_H_

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ucp_test {

/* The top 16 bits of a tag name the sender (the context's tag_sender_mask), as MPI does:
 * UCP posts a receive to the transport only when its mask covers them. */
constexpr uint64_t kSenderMask = 0xffff000000000000ull;
constexpr uint64_t kSenderId   = 0x0001000000000000ull;
constexpr auto     kTimeout    = std::chrono::seconds(60);

/* Byte `offset` of test message `seed`. */
inline uint8_t pattern(unsigned seed, size_t offset) {
    return static_cast<uint8_t>(seed * 131u + offset * 7u + (offset >> 9));
}

class Peer {
public:
    explicit Peer(int fd) : fd_(fd) {}
    ~Peer();
    Peer(const Peer &)            = delete;
    Peer &operator=(const Peer &) = delete;

    bool open();    /* context (UCP_FEATURE_TAG) and worker */
    bool connect(); /* exchange worker addresses, create the endpoint */
    /* Through UCP's connection manager instead: the `listen` side listens on `ip` (any
     * port) and sends the port over the socket, the other connects to it. No auxiliary
     * transport is needed (transports that connect endpoint to endpoint, over a
     * network without UD). */
    bool connect_sockaddr(bool listen, const char *ip);
    /* Endpoint to another worker of this process (no socket needed). */
    bool connect_to(const Peer &other);
    void close_ep();

    bool signal(uint8_t value);
    /* Progresses the worker until `expected` arrives on the socket (false on timeout). */
    bool wait_signal(uint8_t expected);
    /* Progresses until the request completes, frees it, returns its status
     * (UCS_ERR_TIMED_OUT if it did not complete in time). */
    ucs_status_t wait(void *req);
    void         progress_for(std::chrono::milliseconds time);

    ucp_worker_h worker() const { return worker_; }
    /* Both workers' progress, for two peers driven by one thread. */
    static void progress_both(Peer &a, Peer &b) {
        ucp_worker_progress(a.worker_);
        ucp_worker_progress(b.worker_);
    }
    ucp_ep_h     ep() const { return ep_; }

private:
    bool create_ep(const ucp_address_t *address);
    static void on_conn_request(ucp_conn_request_h request, void *arg);
    bool write_all(const void *data, size_t length);
    bool read_all(void *data, size_t length);

    int           fd_;
    ucp_context_h context_ = nullptr;
    ucp_worker_h  worker_  = nullptr;
    ucp_ep_h      ep_      = nullptr;
    ucp_conn_request_h conn_request_ = nullptr;
};

/* Forks `receiver` and `sender` (each gets its end of a socketpair and returns an exit code);
 * the receiver's stderr is captured into `receiver_stderr` (tm_sm prints its counters there)
 * and copied to ours. Returns {receiver pid, receiver exit code, sender exit code}. */
struct PairResult {
    int receiver_pid;
    int receiver_rc;
    int sender_rc;
};
PairResult run_pair(int (*receiver)(int fd), int (*sender)(int fd), std::string *receiver_stderr);

/* "tag list: P posted, M matched, C cancelled" from the counter lines tm_sm printed for
 * `pid`, summed over that process's ifaces. */
struct TagListCounters {
    bool          found     = false;
    unsigned long posted    = 0;
    unsigned long matched   = 0;
    unsigned long cancelled = 0;
};
TagListCounters parse_tag_list_counters(const std::string &text, int pid);

}  // namespace ucp_test

#endif
