/*
 * A peer that dies: a forked process with a worker and endpoints to ours is
 * killed while our sends to it wait on it -- a rendezvous send (waiting for
 * the receiver to take the data) and a synchronous one (waiting for the
 * match). Both must complete with an error, not wait forever; a send after
 * that fails at once; the worker's error handler is called once, with the
 * endpoint; the endpoint and the worker are then destroyed cleanly. The transport reports the dead peer through the iface error
 * handler, found by the layer's keepalive (uct_ep_check) if not sooner.
 */
#include "fd_io.h"
#include "proto_fixture.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <vector>

namespace uct_tm_test {
namespace {

constexpr size_t kRndvLength = 1 << 20; /* above the default rendezvous threshold */

bool send_blob(int fd, const std::vector<char> &blob) {
    uint64_t len = blob.size();
    return uct_tm::fd_transfer(fd, &len, sizeof(len), true) &&
           uct_tm::fd_transfer(fd, const_cast<char *>(blob.data()), blob.size(), true);
}

bool recv_blob(int fd, std::vector<char> *blob) {
    uint64_t len = 0;
    if (!uct_tm::fd_transfer(fd, &len, sizeof(len), false) || (len > 65536)) {
        return false;
    }
    blob->resize(len);
    return uct_tm::fd_transfer(fd, blob->data(), len, false);
}

std::vector<char> worker_address(uct_tm_proto_worker_h w) {
    size_t len = 0;
    uct_tm_proto_worker_address(w, nullptr, &len);
    std::vector<char> addr(len);
    if (uct_tm_proto_worker_address(w, addr.data(), &len) != UCS_OK) {
        addr.clear();
    }
    return addr;
}

/* One side's worker and its endpoint to the other side, connected over the
 * socket `fd`; false on any failure. */
bool connect_over(int fd, const std::string &param, uct_tm_proto_worker_h *w, uct_tm_proto_ep_h *ep,
                  const uct_tm_proto_worker_params_t &extra = {}) {
    uct_tm_proto_worker_params_t params = extra;
    std::string                  tls;
    apply_transport(param, &params, &tls);
    if (uct_tm_proto_worker_create(&params, w) != UCS_OK) {
        return false;
    }
    std::vector<char> peer;
    if (!send_blob(fd, worker_address(*w)) || !recv_blob(fd, &peer)) {
        return false;
    }
    const ucs_status_t st = uct_tm_proto_ep_create(*w, peer.data(), peer.size(), ep);
    if ((st != UCS_OK) && (st != UCS_INPROGRESS)) {
        return false;
    }
    std::vector<char> peer_ep;
    if (!send_blob(fd, ep_address(*ep)) || !recv_blob(fd, &peer_ep)) {
        return false;
    }
    return uct_tm_proto_ep_connect(*ep, peer_ep.data(), peer_ep.size()) == UCS_OK;
}

/* The peer: connects, says so, and progresses until it is killed. */
[[noreturn]] void run_peer(int fd, const std::string &param) {
    alarm(60);
    uct_tm_proto_worker_h w  = nullptr;
    uct_tm_proto_ep_h     ep = nullptr;
    char                  ok = connect_over(fd, param, &w, &ep) ? 1 : 0;
    uct_tm::fd_transfer(fd, &ok, 1, true);
    for (;;) {
        uct_tm_proto_worker_progress(w);
    }
}

/* What the worker's error handler was told. */
struct Failures {
    int                calls  = 0;
    uct_tm_proto_ep_h  ep     = nullptr;
    ucs_status_t       status = UCS_OK;
};

void on_ep_error(void *arg, uct_tm_proto_ep_h ep, ucs_status_t status) {
    auto *f = static_cast<Failures *>(arg);
    ++f->calls;
    f->ep     = ep;
    f->status = status;
}

class ProtoPeerFailureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ProtoPeerFailureTest, SendsWaitingOnADeadPeerFail) {
    int sv[2];
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    fflush(nullptr);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(sv[0]);
        run_peer(sv[1], GetParam());
    }
    close(sv[1]);
    uct_tm_proto_worker_h w  = nullptr;
    uct_tm_proto_ep_h     ep = nullptr;
    char                  peer_ok = 0;
    Failures              failures;
    uct_tm_proto_worker_params_t extra = {};
    extra.field_mask      = UCT_TM_PROTO_WORKER_FIELD_ERR_HANDLER;
    extra.err_handler     = on_ep_error;
    extra.err_handler_arg = &failures;
    const bool ok = connect_over(sv[0], GetParam(), &w, &ep, extra) &&
                    uct_tm::fd_transfer(sv[0], &peer_ok, 1, false);
    if (!ok || !peer_ok) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        close(sv[0]);
        if (w != nullptr) uct_tm_proto_worker_destroy(w);
        FAIL() << "the two workers did not connect over " << GetParam();
    }

    /* no receive is posted on the peer: both sends wait on it */
    const std::vector<char> big = pattern(kRndvLength, 1), small = pattern(64, 2);
    uct_tm_proto_request_t  rndv = 0, sync = 0;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_send(ep, big.data(), big.size(), 7, nullptr, &rndv));
    uct_tm_proto_op_params_t sp = {};
    sp.flags                    = UCT_TM_PROTO_SEND_SYNC;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_send(ep, small.data(), small.size(), 8, &sp, &sync));
    for (int i = 0; i < 1000; ++i) {
        uct_tm_proto_worker_progress(w); /* the messages are out */
    }

    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close(sv[0]);

    ucs_status_t rs = UCS_INPROGRESS, ss = UCS_INPROGRESS;
    const auto   deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (((rs == UCS_INPROGRESS) || (ss == UCS_INPROGRESS)) &&
           (std::chrono::steady_clock::now() < deadline)) {
        uct_tm_proto_worker_progress(w);
        rs = uct_tm_proto_request_test(w, rndv, nullptr);
        ss = uct_tm_proto_request_test(w, sync, nullptr);
    }
    EXPECT_NE(UCS_INPROGRESS, rs) << "the rendezvous send still waits on the dead peer";
    EXPECT_NE(UCS_INPROGRESS, ss) << "the synchronous send still waits on the dead peer";
    EXPECT_LT(rs, UCS_OK) << ucs_status_string(rs);
    EXPECT_LT(ss, UCS_OK) << ucs_status_string(ss);
    EXPECT_EQ(1, failures.calls) << "the error handler, once";
    EXPECT_EQ(ep, failures.ep);
    EXPECT_LT(failures.status, UCS_OK) << ucs_status_string(failures.status);
    if (rs != UCS_INPROGRESS) uct_tm_proto_request_release(w, rndv);
    if (ss != UCS_INPROGRESS) uct_tm_proto_request_release(w, sync);

    /* a send after the failure fails at once, with the endpoint's status */
    uct_tm_proto_request_t later = 0;
    const ucs_status_t     s     = uct_tm_proto_send(ep, small.data(), small.size(), 9, nullptr, &later);
    EXPECT_LT(s, UCS_OK) << ucs_status_string(s);
    uct_tm_proto_ep_destroy(ep);
    uct_tm_proto_worker_destroy(w);
}

/* Transports whose ifaces report a dead peer: tm_sm and posix watch the
 * peer's process, tcp its connection. Not tm_rc yet: in the guest, a peer
 * killed with nothing in flight to it went unreported for 60 s (the layer's
 * uct_ep_check probes; under investigation), though a peer behind a dead
 * link is reported (tests/integration/test_hosts_rxe.sh). */
INSTANTIATE_TEST_SUITE_P(peer_failure, ProtoPeerFailureTest,
                         ::testing::Values("tm_sm", "tm_sm+sw", "posix", "tcp"), transport_name);

}  // namespace
}  // namespace uct_tm_test
