/*
 * Conformance fixtures: a tag-capable iface with its callback recorders
 * (Node), and the gtest fixture parametrized over every tag transport of
 * uct-tm: a receiver and a sender iface on one worker, connected.
 */
#ifndef UCT_TM_TESTS_UCT_TAG_FIXTURE_H_
#define UCT_TM_TESTS_UCT_TAG_FIXTURE_H_

#include "tag_harness.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace uct_tm_test {

/* Transports as gtest parameter names. */
std::string transport_param_name(const ::testing::TestParamInfo<std::string> &info);

/* Receiver `rx` and sender `tx` on one worker, `ep` from tx to rx. */
class TagTest : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override;
    void TearDown() override;

    /* Closes everything and opens again with these UCX_TM_* settings. */
    void reopen(const Settings &rx_settings, const Settings &tx_settings = {},
                size_t rx_headroom = kRxHeadroom);
    void close();

    unsigned progress();
    /* Progress `times` times: lets anything that was going to happen happen. */
    void     drain(int times = 1000);
    bool     wait(const std::function<bool()> &done, double seconds = kWaitSeconds);
    /* The receive side is a NIC's tag-matching engine (tm_rc's device model,
     * UCX_TM_RC_TM_MODEL): matched data is placed and rendezvous are read by
     * the engine, whatever software does meanwhile. */
    bool hw_tag_list() const { return env_->iface_setting(GetParam(), "TM_MODEL") == "y"; }
    /* Skips the test if the transport lacks what `path` needs. */
    bool     lacks(Path path) const { return !tx_->caps.has(path); }

    ucs_status_t post(RecvCtx &r, uct_tag_t tag, uct_tag_t mask, RecvBuffers &b);
    /* post() with the full mask, waiting (progress) while a hardware list is
     * full only because its list operations are still completing. */
    ucs_status_t post_when_room(RecvCtx &r, uct_tag_t tag, RecvBuffers &b);
    /* Sends, retrying UCS_ERR_NO_RESOURCE with progress; the final status. */
    ucs_status_t send(Send &s);
    /* Waits for the sender's completion if one is due (zcopy INPROGRESS, rndv). */
    bool finish(Send &s);

    /* For messages sent with `s` and received into `r`/`b`: a readable
     * description of everything that differs from a correct delivery with
     * status `expect`; empty if correct. */
    std::string check_delivery(const RecvCtx &r, const RecvBuffers &b, const Send &s,
                               ucs_status_t expect) const;

    /* tag_rndv_cancel before the receiver matched: the sender's completion
     * is never called, the receive completes with UCS_ERR_CANCELED and its
     * buffer is not written. */
    void expect_rndv_cancel_before_match(uct_tag_t tag, size_t length);

    /* An endpoint from rx to tx: the one bound to ep_ for CONNECT_TO_EP
     * transports, else one made on first use. Closed by close(). */
    uct_ep_h reverse_ep();
    /* Whether `ep` takes a send now (uct_ep_pending_add answers BUSY): an
     * endpoint that connects on demand (tm_dc) does once its connection is
     * made; tests post into a ready one. */
    static bool sends_now(uct_ep_h ep);

    std::unique_ptr<UctEnv> env_;
    std::unique_ptr<Node>   rx_;
    std::unique_ptr<Node>   tx_;
    uct_ep_h                ep_    = nullptr;
    uct_ep_h                rx_ep_ = nullptr; /* rx -> tx */
    std::vector<std::string> shm_before_;
};

}  // namespace uct_tm_test

#endif
