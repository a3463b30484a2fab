/* Failing fast when the peer of a two-process tool is gone.
 *
 * A tool whose peer died or stopped must not spin forever in a wait loop: it
 * exits with status 2 and one line "<tool>: <role>: peer lost: <why> while
 * waiting for <what>". Three signs, whichever comes first:
 *   - the transport reported the peer failed (the iface error handler, or an
 *     operation completing with an error: the tool calls lost() itself);
 *   - the control channel (the socket the addresses went over) was closed at
 *     the other end: its process is gone, whatever killed it;
 *   - a wait lasted longer than the timeout: the peer is stopped or hung.
 * And a keepalive, as UCP's: while a wait lasts, the endpoint to the peer is
 * checked (uct_ep_check) every keepalive interval, so that a peer that cannot
 * be reached any more (its link down, its host gone) fails the endpoint after
 * the transport's retries although nothing else is in flight.
 */
#ifndef UCT_TM_TOOLS_PEER_WATCH_H_
#define UCT_TM_TOOLS_PEER_WATCH_H_

#include <ucs/type/status.h>
#include <uct/api/uct.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <poll.h>
#include <unistd.h>

namespace uct_tm {

/* True once the other end of the socket `fd` is closed. A pending byte does
 * not hide the closing: POLLRDHUP/POLLHUP are reported with it. */
inline bool channel_closed(int fd) {
    struct pollfd pfd = {fd, POLLRDHUP, 0};
    int           r;
    do {
        r = poll(&pfd, 1, 0);
    } while ((r < 0) && (errno == EINTR));
    return (r > 0) && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Waits up to `timeout_s` for `fd` to be readable (or closed); false on timeout. */
inline bool wait_readable(int fd, double timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
        const double left =
                std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            return false;
        }
        struct pollfd pfd = {fd, POLLIN, 0};
        const int     r   = poll(&pfd, 1, static_cast<int>(left * 1000) + 1);
        if (r > 0) {
            return true;
        }
        if ((r < 0) && (errno != EINTR)) {
            return true; /* let the read report the error */
        }
    }
}

/* Ends a tool that fails mid-run with `code`, with _exit, not exit: the
 * transport is mid-operation (requests outstanding, UCX's async thread
 * running), and exit() would run the libraries' finalizers against that live
 * state, which they are not written for -- a CI run saw a sender hang for
 * good after its "peer lost" line. What the process holds, the kernel
 * reclaims as it does for a killed process; the tool's output is flushed. */
[[noreturn]] inline void exit_mid_run(int code) {
    fflush(stdout);
    fflush(stderr);
    _exit(code);
}

/* What a tool knows about its peer. */
struct PeerLink {
    const char  *tool      = "";
    const char  *role      = "";
    int          fd        = -1;   /* control channel */
    double       timeout_s = 60;   /* longest wait for one thing */
    ucs_status_t failure   = UCS_OK; /* set by the transport's error handler */
    uct_ep_h     ep          = nullptr; /* UCT tools: the endpoint to the peer */
    double       keepalive_s = 0;       /* 0: no keepalive */

    /* what: what the tool was waiting for, or null */
    [[noreturn]] void lost(const char *why, const char *what) const {
        fprintf(stderr, "%s: %s: peer lost: %s%s%s\n", tool, role, why,
                (what != nullptr) ? " while waiting for " : "", (what != nullptr) ? what : "");
        exit_mid_run(2);
    }
};

/* Bounds one wait loop: call tick() after each progress call. The flag set by
 * the error handler is read on every spin; the channel and the clock (a system
 * call and a clock read) every kCheckEvery spins, about every 0.1 ms. */
class WaitBound {
  public:
    /* The clock is first read at the first check, not here: a bound is
     * built around every send and receive of a ping-pong, and a clock read
     * there (~20 ns in a VM) would sit on the path the benchmark times. The
     * wait is then bounded from its kCheckEvery-th spin on. */
    WaitBound(const PeerLink &link, const char *what) : link_(link), what_(what) {}

    void tick() {
        if (link_.failure != UCS_OK) {
            char why[128];
            snprintf(why, sizeof(why), "the transport reported it failed (%s)",
                     ucs_status_string(link_.failure));
            link_.lost(why, what_);
        }
        if ((++spins_ % kCheckEvery) != 0) {
            return;
        }
        if (channel_closed(link_.fd)) {
            link_.lost("its process is gone (control channel closed)", what_);
        }
        const auto now = std::chrono::steady_clock::now();
        if (!started_) {
            start_   = now;
            started_ = true;
        }
        const double waited = std::chrono::duration<double>(now - start_).count();
        if (waited > link_.timeout_s) {
            char why[128];
            snprintf(why, sizeof(why), "no progress for %.0f s (peer stopped or hung?)", waited);
            link_.lost(why, what_);
        }
        if ((link_.ep != nullptr) && (link_.keepalive_s > 0) && (waited >= next_probe_)) {
            /* NO_RESOURCE or UNSUPPORTED: the timeout above still bounds the wait */
            (void)uct_ep_check(link_.ep, 0, nullptr);
            next_probe_ = waited + link_.keepalive_s;
        }
    }

  private:
    static constexpr unsigned kCheckEvery = 1024;

    const PeerLink                                    &link_;
    const char                                        *what_;
    std::chrono::steady_clock::time_point              start_;
    bool                                               started_ = false;
    unsigned                                           spins_ = 0;
    double                                             next_probe_ = link_.keepalive_s;
};

/* Calls `progress` until `done()` is true, the wait bounded as WaitBound
 * bounds one. A wait that is over before it starts builds no bound, so a
 * benchmark's hot waits (a message already there, room to send) cost one
 * call of `done`. */
template <typename Done, typename Progress>
inline void wait_until(const PeerLink &link, const char *what, Done &&done, Progress &&progress) {
    if (done()) {
        return;
    }
    WaitBound bound(link, what);
    do {
        progress();
        bound.tick();
    } while (!done());
}

}  // namespace uct_tm

#endif
