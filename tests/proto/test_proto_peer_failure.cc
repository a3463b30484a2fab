/*
 * A peer that dies: a forked process with a worker and endpoints to ours is
 * killed while our sends to it wait on it -- a rendezvous send (waiting for
 * the receiver to take the data) and a synchronous one (waiting for the
 * match). Both must complete with an error, not wait forever; a send after
 * that fails at once; the worker's error handler is called once, with the
 * endpoint; the endpoint and the worker are then destroyed cleanly. The
 * transport reports the dead peer through the iface error handler, found by
 * the layer's keepalive (uct_ep_check) if not sooner. Receives directed at
 * the dead peer fail too (DirectedReceivesFromADeadPeerFail).
 */
#include "fd_io.h"
#include "proto_fixture.h"
#include "raw_iface.h"

#include <poll.h>
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

/* One side's worker and its endpoint to the other side, connected over the
 * socket `fd`; false on any failure. */
bool connect_over(int fd, const std::string &param, uct_tm_proto_worker_h *w, uct_tm_proto_ep_h *ep,
                  const uct_tm_proto_worker_params_t &extra = {},
                  std::vector<char> *peer_address = nullptr) {
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
    if (peer_address != nullptr) {
        *peer_address = peer;
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

/* A forked peer running `run` over a socket, and our worker (its error
 * handler counting into `failures`) with an endpoint to it. */
class ForkedPeer {
  public:
    using Run = void (*)(int fd, const std::string &param);
    ForkedPeer() = default;
    ForkedPeer(const ForkedPeer &) = delete;
    ForkedPeer &operator=(const ForkedPeer &) = delete;
    ~ForkedPeer() {
        kill_peer();
        if (ep != nullptr) uct_tm_proto_ep_destroy(ep);
        if (w != nullptr) uct_tm_proto_worker_destroy(w);
    }

    /* Forks the peer and connects to it; false if that failed. */
    bool start(const std::string &param, Run run) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
            return false;
        }
        fflush(nullptr);
        pid_ = fork();
        if (pid_ == 0) {
            close(sv[0]);
            run(sv[1], param);
            _exit(1);
        }
        close(sv[1]);
        fd = sv[0];
        if (pid_ < 0) {
            return false;
        }
        uct_tm_proto_worker_params_t extra = {};
        extra.field_mask      = UCT_TM_PROTO_WORKER_FIELD_ERR_HANDLER;
        extra.err_handler     = on_ep_error;
        extra.err_handler_arg = &failures;
        char peer_ok          = 0;
        return connect_over(fd, param, &w, &ep, extra) && uct_tm::fd_transfer(fd, &peer_ok, 1, false) &&
               peer_ok;
    }

    void kill_peer() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
            pid_ = -1;
        }
        if (fd >= 0) {
            close(fd);
            fd = -1;
        }
    }

    int                   fd = -1; /* our end of the socket */
    uct_tm_proto_worker_h w  = nullptr;
    uct_tm_proto_ep_h     ep = nullptr;
    Failures              failures;

  private:
    pid_t pid_ = -1;
};

class ProtoPeerFailureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ProtoPeerFailureTest, SendsWaitingOnADeadPeerFail) {
    ForkedPeer peer;
    ASSERT_TRUE(peer.start(GetParam(), run_peer)) << "the two workers did not connect over " << GetParam();
    uct_tm_proto_worker_h w        = peer.w;
    uct_tm_proto_ep_h     ep       = peer.ep;
    const Failures       &failures = peer.failures;

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

    peer.kill_peer();

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
}

/* The peer: connects and says so, sends one message tagged
 * kTagBeforeDeath, says so once it went out, and progresses until it is
 * killed. */
constexpr uint64_t kTagBeforeDeath = 11;
constexpr size_t   kDirected       = 12; /* more than a source's ring holds: its matcher too */

[[noreturn]] void run_sending_peer(int fd, const std::string &param) {
    alarm(60);
    uct_tm_proto_worker_h   w   = nullptr;
    uct_tm_proto_ep_h       ep  = nullptr;
    const std::vector<char> msg = pattern(64, 3);
    uct_tm_proto_request_t  req = 0;
    char                    ok  = connect_over(fd, param, &w, &ep) ? 1 : 0;
    if (!uct_tm::fd_transfer(fd, &ok, 1, true) || !ok) {
        _exit(1);
    }
    ucs_status_t st = uct_tm_proto_send(ep, msg.data(), msg.size(), kTagBeforeDeath, nullptr, &req);
    for (int i = 0; (st == UCS_INPROGRESS) && (i < 10000000); ++i) {
        uct_tm_proto_worker_progress(w);
        st = uct_tm_proto_request_test(w, req, nullptr);
    }
    char reply = (st == UCS_OK) ? 1 : 0;
    uct_tm::fd_transfer(fd, &reply, 1, true);
    for (;;) {
        uct_tm_proto_worker_progress(w);
    }
}

/* Receives directed at a peer that dies wait for a message that cannot
 * come: those posted complete with the endpoint's failure (a spilled deep
 * queue of them, a tagged and an untagged one), a later one is refused
 * with it, and one for a message that arrived before the death still takes
 * it. Receives from any source stay posted. */
TEST_P(ProtoPeerFailureTest, DirectedReceivesFromADeadPeerFail) {
    ForkedPeer peer;
    ASSERT_TRUE(peer.start(GetParam(), run_sending_peer))
        << "the two workers did not connect over " << GetParam();
    uct_tm_proto_worker_h w        = peer.w;
    uct_tm_proto_ep_h     ep       = peer.ep;
    const Failures       &failures = peer.failures;

    std::vector<char>                   buf(64);
    std::vector<uct_tm_proto_request_t> directed(kDirected + 1);
    for (size_t i = 0; i < kDirected; ++i) {
        ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(w, buf.data(), buf.size(), 100 + i,
                                                    ~uint64_t{0}, ep, nullptr, &directed[i]));
    }
    uct_tm_proto_op_params_t untagged = {};
    untagged.flags                    = UCT_TM_PROTO_OP_UNTAGGED;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(w, buf.data(), buf.size(), 0, 0, ep, &untagged,
                                                &directed[kDirected]));
    uct_tm_proto_request_t any = 0;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(w, buf.data(), buf.size(), 200, ~uint64_t{0},
                                                nullptr, nullptr, &any));
    char   sent = 0;
    pollfd p    = {peer.fd, POLLIN, 0};
    for (int i = 0; (i < 10000000) && (poll(&p, 1, 0) == 0); ++i) {
        uct_tm_proto_worker_progress(w); /* the peer's send may wait on us */
    }
    ASSERT_TRUE(uct_tm::fd_transfer(peer.fd, &sent, 1, false) && sent)
        << "the peer's message did not go out";
    uct_tm_proto_info_t info;
    ucs_status_t        seen = UCS_ERR_NO_ELEM;
    for (int i = 0; (seen != UCS_OK) && (i < 1000000); ++i) {
        uct_tm_proto_worker_progress(w);
        seen = uct_tm_proto_probe(w, kTagBeforeDeath, ~uint64_t{0}, ep, UCT_TM_PROTO_PROBE_PEEK,
                                  &info, nullptr);
    }
    ASSERT_EQ(UCS_OK, seen) << "the peer's message did not arrive";

    peer.kill_peer();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while ((failures.calls == 0) && (std::chrono::steady_clock::now() < deadline)) {
        uct_tm_proto_worker_progress(w);
    }
    ASSERT_EQ(1, failures.calls) << "the dead peer was not found";
    for (size_t i = 0; i < directed.size(); ++i) {
        EXPECT_EQ(failures.status, uct_tm_proto_request_test(w, directed[i], nullptr))
            << "directed receive " << i;
        uct_tm_proto_request_release(w, directed[i]);
    }
    EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(w, any, nullptr))
        << "a receive from any source";

    /* later: refused with the failure, nothing posted -- unless what it
     * asks for arrived before the death */
    uct_tm_proto_request_t late = 0;
    EXPECT_EQ(failures.status,
              uct_tm_proto_recv(w, buf.data(), buf.size(), 300, ~uint64_t{0}, ep, nullptr, &late));
    EXPECT_EQ(failures.status,
              uct_tm_proto_recv(w, buf.data(), buf.size(), 0, 0, ep, &untagged, &late));
    std::vector<char>      got(64);
    uct_tm_proto_request_t before = 0;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(w, got.data(), got.size(), kTagBeforeDeath,
                                                ~uint64_t{0}, ep, nullptr, &before));
    ucs_status_t st = UCS_INPROGRESS;
    for (int i = 0; (st == UCS_INPROGRESS) && (i < 1000); ++i) {
        uct_tm_proto_worker_progress(w);
        st = uct_tm_proto_request_test(w, before, nullptr);
    }
    EXPECT_EQ(UCS_OK, st) << ucs_status_string(st);
    EXPECT_EQ(pattern(64, 3), got);
    uct_tm_proto_request_release(w, before);
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(w, any));
    st = UCS_INPROGRESS;
    for (int i = 0; (st == UCS_INPROGRESS) && (i < 100000); ++i) {
        uct_tm_proto_worker_progress(w); /* a transport's tag list may cancel later */
        st = uct_tm_proto_request_test(w, any, nullptr);
    }
    EXPECT_EQ(UCS_ERR_CANCELED, st) << ucs_status_string(st);
    uct_tm_proto_request_release(w, any);
}

/* Messages a peer begins and never finishes (written by hand through a raw
 * posix iface of the peer's process, claiming its worker): a fragmented
 * eager message and a rendezvous request whose data the peer is to push
 * (no read offered), each matched by a receive; then the same two
 * unexpected. When the peer dies, the two matched receives complete with an
 * error, and a receive that takes one of the unexpected ones later does too
 * -- none waits forever for data that cannot come. */
enum : uint64_t { kTagFragmented = 1, kTagPushed, kTagFragmentedLate, kTagPushedLate };

[[noreturn]] void run_raw_peer(int fd, const std::string &) {
    alarm(60);
    uct_tm_proto_worker_h w  = nullptr;
    uct_tm_proto_ep_h     ep = nullptr;
    std::vector<char>     parent;
    RawIface              raw;
    char                  ok = (connect_over(fd, "posix", &w, &ep, {}, &parent) &&
                                (raw.open(parent) == UCS_OK)) ? 1 : 0;
    char                  go = 0;
    if (!uct_tm::fd_transfer(fd, &ok, 1, true) || !ok || !uct_tm::fd_transfer(fd, &go, 1, false)) {
        _exit(1);
    }
    using uct_tm::proto::Kind;
    const uint32_t me = uct_tm_proto_worker_id(w);
    raw.send(uct_tm::proto::kAmId, eager_message(me, kTagFragmented, 100, Kind::kFirst, 1000, 1), w);
    raw.send(uct_tm::proto::kAmId, eager_message(me, kTagPushed, 0, Kind::kRts, 100000), w);
    raw.send(uct_tm::proto::kAmId, eager_message(me, kTagFragmentedLate, 100, Kind::kFirst, 1000, 2), w);
    raw.send(uct_tm::proto::kAmId, eager_message(me, kTagPushedLate, 0, Kind::kRts, 100000), w);
    uct_tm::fd_transfer(fd, &go, 1, true);
    for (;;) {
        uct_tm_proto_worker_progress(w); /* drops the CTS it gets */
        uct_worker_progress(raw.worker);
    }
}

TEST(ProtoPeerFailure, ArrivalsFromADeadPeerFail) {
    ForkedPeer peer;
    ASSERT_TRUE(peer.start("posix", run_raw_peer)) << "the two workers did not connect over posix";
    uct_tm_proto_worker_h w        = peer.w;
    const int             fd       = peer.fd;
    const Failures       &failures = peer.failures;

    std::vector<char>      fragmented(1000), pushed(100000);
    uct_tm_proto_request_t rf = 0, rp = 0;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(w, fragmented.data(), fragmented.size(), kTagFragmented,
                                                ~uint64_t{0}, nullptr, nullptr, &rf));
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(w, pushed.data(), pushed.size(), kTagPushed,
                                                ~uint64_t{0}, nullptr, nullptr, &rp));
    char go = 1;
    bool sent = uct_tm::fd_transfer(fd, &go, 1, true);
    /* the peer's raw sends need our progress to leave its posix FIFO */
    sent = sent && [&] {
        pollfd p = {fd, POLLIN, 0};
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (std::chrono::steady_clock::now() < deadline) {
            uct_tm_proto_worker_progress(w);
            if (poll(&p, 1, 0) == 1) {
                return uct_tm::fd_transfer(fd, &go, 1, false);
            }
        }
        return false;
    }();
    uct_tm_proto_info_t info;
    const auto          arrived = [&](uint64_t tag) {
        return uct_tm_proto_probe(w, tag, ~uint64_t{0}, nullptr, UCT_TM_PROTO_PROBE_PEEK, &info,
                                  nullptr) == UCS_OK;
    };
    for (int i = 0; sent && (i < 100000) && !(arrived(kTagFragmentedLate) && arrived(kTagPushedLate)); ++i) {
        uct_tm_proto_worker_progress(w);
    }
    if (!sent || !arrived(kTagFragmentedLate) || !arrived(kTagPushedLate)) {
        FAIL() << "the peer's messages did not arrive";
    }
    EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(w, rf, nullptr)) << "the rest is still to come";
    EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(w, rp, nullptr)) << "the data is still to come";

    peer.kill_peer();
    ucs_status_t sf = UCS_INPROGRESS, sp = UCS_INPROGRESS;
    const auto   deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (((sf == UCS_INPROGRESS) || (sp == UCS_INPROGRESS) || (failures.calls == 0)) &&
           (std::chrono::steady_clock::now() < deadline)) {
        uct_tm_proto_worker_progress(w);
        sf = uct_tm_proto_request_test(w, rf, nullptr);
        sp = uct_tm_proto_request_test(w, rp, nullptr);
    }
    EXPECT_EQ(1, failures.calls) << "the error handler, once";
    EXPECT_LT(sf, UCS_OK) << "the fragmented message's receive: " << ucs_status_string(sf);
    EXPECT_LT(sp, UCS_OK) << "the pushed rendezvous receive: " << ucs_status_string(sp);
    if (sf != UCS_INPROGRESS) uct_tm_proto_request_release(w, rf);
    if (sp != UCS_INPROGRESS) uct_tm_proto_request_release(w, rp);

    /* the unexpected ones: a receive that takes one fails at once */
    for (uint64_t tag : {kTagFragmentedLate, kTagPushedLate}) {
        std::vector<char>      buf(100000);
        uct_tm_proto_request_t r = 0;
        const ucs_status_t     st = uct_tm_proto_recv(w, buf.data(), buf.size(), tag, ~uint64_t{0},
                                                      nullptr, nullptr, &r);
        ucs_status_t done = st;
        for (int i = 0; (done == UCS_INPROGRESS) && (i < 1000); ++i) {
            uct_tm_proto_worker_progress(w);
            done = uct_tm_proto_request_test(w, r, nullptr);
        }
        EXPECT_LT(done, UCS_OK) << "tag " << tag << ": " << ucs_status_string(done);
        if (st == UCS_INPROGRESS) uct_tm_proto_request_release(w, r);
    }
    EXPECT_FALSE(arrived(kTagFragmentedLate) || arrived(kTagPushedLate));
}

/* Transports whose ifaces report a dead peer: tm_sm and posix watch the
 * peer's process, tcp its connection; tm_rc (UCT_TM_PROTO_TEST_TRANSPORTS=
 * tm_rc, in the guest: tests/ib/test_rxe_proto.sh) the retries of its probe. */
INSTANTIATE_TEST_SUITE_P(peer_failure, ProtoPeerFailureTest,
                         ::testing::ValuesIn(test_transports({"tm_sm", "tm_sm+sw", "posix", "tcp"})),
                         transport_name);

}  // namespace
}  // namespace uct_tm_test
