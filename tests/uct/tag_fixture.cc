#include "tag_fixture.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstring>
#include <sstream>

namespace uct_tm_test {

std::string transport_param_name(const ::testing::TestParamInfo<std::string> &info) {
    std::string name = info.param;
    for (char &c : name) {
        if (!isalnum(static_cast<unsigned char>(c))) {
            c = '_';
        }
    }
    return name;
}

void TagTest::SetUp() {
    test_seed();
    shm_before_ = shm_leftovers();
    reopen({});
}

void TagTest::TearDown() {
    close();
    for (const std::string &name : shm_leaked_by_this_process(shm_before_)) {
        ADD_FAILURE() << "left in /dev/shm: " << name;
    }
}

void TagTest::close() {
    if (ep_ != nullptr) {
        uct_ep_destroy(ep_);
        ep_ = nullptr;
    }
    if (rx_ep_ != nullptr) {
        uct_ep_destroy(rx_ep_);
        rx_ep_ = nullptr;
    }
    tx_.reset();
    rx_.reset();
    shm_note_held(); /* memory a test allocated from the MD */
    env_.reset();
}

void TagTest::reopen(const Settings &rx_settings, const Settings &tx_settings,
                     size_t rx_headroom) {
    close();
    env_.reset(new UctEnv(GetParam()));
    rx_.reset(new Node(*env_, GetParam(), rx_settings, rx_headroom));
    if (rx_->status == UCS_ERR_NO_ELEM) {
        GTEST_SKIP() << GetParam() << " has no such setting";
    }
    ASSERT_EQ(rx_->status, UCS_OK) << "receiver iface of " << GetParam();
    tx_.reset(new Node(*env_, GetParam(), tx_settings, rx_headroom));
    ASSERT_EQ(tx_->status, UCS_OK) << "sender iface of " << GetParam();
    ASSERT_EQ(tx_->connect_pair(*rx_, &ep_, &rx_ep_), UCS_OK);
    ASSERT_TRUE(wait([&] { return sends_now(ep_); })) << "the endpoint never connected";
}

bool TagTest::sends_now(uct_ep_h ep) {
    uct_pending_req_t req = {};
    req.func              = [](uct_pending_req_t *) { return UCS_OK; };
    const ucs_status_t st = uct_ep_pending_add(ep, &req, 0);
    if (st == UCS_OK) {
        uct_ep_pending_purge(ep, nullptr, nullptr); /* queued: not yet */
        return false;
    }
    return true; /* BUSY: it can send now; an error: the test's own checks will say */
}

uct_ep_h TagTest::reverse_ep() {
    if (rx_ep_ == nullptr) {
        EXPECT_EQ(rx_->connect(tx_->address(), &rx_ep_), UCS_OK);
        EXPECT_TRUE(wait([&] { return sends_now(rx_ep_); })) << "the endpoint never connected";
    }
    return rx_ep_;
}

unsigned TagTest::progress() { return uct_worker_progress(env_->worker()); }

void TagTest::drain(int times) {
    for (int i = 0; i < times; ++i) {
        progress();
    }
}

bool TagTest::wait(const std::function<bool()> &done, double seconds) {
    return wait_for(done, [this] { progress(); }, seconds);
}

ucs_status_t TagTest::post(RecvCtx &r, uct_tag_t tag, uct_tag_t mask, RecvBuffers &b) {
    return uct_iface_tag_recv_zcopy(rx_->iface, tag, mask, b.iov.data(), b.iov.size(), &r.ctx);
}

ucs_status_t TagTest::post_when_room(RecvCtx &r, uct_tag_t tag, RecvBuffers &b) {
    /* A place in the list is free at once in software; on a NIC's list once
     * the list operations of the receive that held it have completed. */
    ucs_status_t status = post(r, tag, ~uct_tag_t{0}, b);
    if ((status == UCS_ERR_EXCEEDS_LIMIT) && hw_tag_list()) {
        wait([&] { return (status = post(r, tag, ~uct_tag_t{0}, b)) != UCS_ERR_EXCEEDS_LIMIT; });
    }
    return status;
}

ucs_status_t TagTest::send(Send &s) {
    ucs_status_t status = UCS_ERR_NO_RESOURCE;
    wait([&] {
        status = s.post(ep_);
        return status != UCS_ERR_NO_RESOURCE;
    });
    return status;
}

bool TagTest::finish(Send &s) {
    return wait([&] { return !s.comp_pending || (s.comp->calls > 0); });
}

void TagTest::expect_rndv_cancel_before_match(uct_tag_t tag, size_t length) {
    if (hw_tag_list()) {
        GTEST_SKIP() << "a NIC's tag matcher reads a matched rendezvous whatever the sender's "
                        "tag_rndv_cancel (UCT's cancel is local, as with rc_mlx5)";
    }
    Send        s(Path::kRndv, tag, 0, tag, length);
    RecvCtx     r;
    RecvBuffers b(length);
    ASSERT_EQ(post(r, s.tag, ~uct_tag_t{0}, b), UCS_OK);
    ASSERT_EQ(s.post(ep_), UCS_OK);
    ASSERT_EQ(uct_ep_tag_rndv_cancel(ep_, s.rndv_op), UCS_OK);
    /* The memory is the sender's again: scribble on it. */
    memset(s.payload.data(), 0, s.payload.size());
    ASSERT_TRUE(wait([&] { return r.done(); }));
    EXPECT_EQ(r.sequence(), "consumed,completed");
    EXPECT_EQ(r.status, UCS_ERR_CANCELED);
    EXPECT_EQ(r.stag, s.tag);
    EXPECT_TRUE(b.untouched()) << "the receiver read a cancelled rendezvous buffer";
    drain();
    EXPECT_EQ(s.comp->calls, 0);
    /* A second cancel of the same operation is an error. */
    EXPECT_NE(uct_ep_tag_rndv_cancel(ep_, s.rndv_op), UCS_OK);
}

std::string TagTest::check_delivery(const RecvCtx &r, const RecvBuffers &b, const Send &s,
                                    ucs_status_t expect) const {
    std::ostringstream err;
    if (r.sequence() != "consumed,completed") {
        err << " callbacks [" << r.sequence() << "] instead of [consumed,completed];";
    }
    if (r.status != expect) {
        err << " status " << ucs_status_string(r.status) << " instead of "
            << ucs_status_string(expect) << ";";
    }
    if (r.stag != s.tag) {
        err << " stag 0x" << std::hex << r.stag << " instead of 0x" << s.tag << std::dec << ";";
    }
    if (r.imm != s.imm) {
        err << " imm " << r.imm << " instead of " << s.imm << ";";
    }
    if (r.length != s.payload.size()) {
        err << " length " << r.length << " instead of " << s.payload.size() << ";";
    }
    if (r.inline_data) {
        err << " completed_cb got inline_data for a zero-copy receive;";
    }
    const std::string data = b.check(s.seed, s.payload.size());
    if (!data.empty()) {
        err << " " << data << ";";
    }
    return err.str();
}

}  // namespace uct_tm_test
