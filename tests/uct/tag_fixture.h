/*
 * Conformance fixtures: a tag-capable iface with its callback recorders
 * (Node), and the gtest fixture parametrized over every tag transport of
 * component "tm": a receiver and a sender iface on one worker, connected.
 */
#ifndef UCT_TM_TESTS_UCT_TAG_FIXTURE_H_
#define UCT_TM_TESTS_UCT_TAG_FIXTURE_H_

#include "tag_harness.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace uct_tm_test {

/* Receive headroom asked for by default; odd on purpose (UCP asks for
 * sizeof(ucp_recv_desc_t) + 32). */
inline constexpr size_t kRxHeadroom = 88;

/* One iface opened with tag offload, unexpected callbacks, an error handler
 * and `rx_headroom`. */
class Node {
  public:
    Node(UctEnv &env, const std::string &tl, const Settings &settings = {},
         size_t rx_headroom = kRxHeadroom);
    ~Node();
    Node(const Node &)            = delete;
    Node &operator=(const Node &) = delete;

    ucs_status_t     status = UCS_ERR_NO_ELEM; /* of uct_iface_open */
    uct_iface_h      iface  = nullptr;
    uct_iface_attr_t attr{};
    Caps             caps;
    Unexpected       unexp;
    ErrorLog         errors;

    /* Device address followed by iface address. */
    std::string address() const;
    /* An endpoint to the iface whose address() is `remote`. */
    ucs_status_t connect(const std::string &remote, uct_ep_h *ep) const;
    /* uct_iface_set_am_handler(id) recording payloads into `log`. */
    ucs_status_t set_am_log(uint8_t id, std::vector<std::string> *log);
    /* uct_iface_release_desc() of descriptors the recorder kept. */
    void release_held_descs();
};

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
    /* Skips the test if the transport lacks what `path` needs. */
    bool     lacks(Path path) const { return !tx_->caps.has(path); }

    ucs_status_t post(RecvCtx &r, uct_tag_t tag, uct_tag_t mask, RecvBuffers &b);
    /* Sends, retrying UCS_ERR_NO_RESOURCE with progress; the final status. */
    ucs_status_t send(Send &s);
    /* Waits for the sender's completion if one is due (zcopy INPROGRESS, rndv). */
    bool finish(Send &s);

    /* For messages sent with `s` and received into `r`/`b`: a readable
     * description of everything that differs from a correct delivery with
     * status `expect`; empty if correct. */
    std::string check_delivery(const RecvCtx &r, const RecvBuffers &b, const Send &s,
                               ucs_status_t expect) const;

    std::unique_ptr<UctEnv> env_;
    std::unique_ptr<Node>   rx_;
    std::unique_ptr<Node>   tx_;
    uct_ep_h                ep_ = nullptr;
    std::vector<std::string> shm_before_;
};

}  // namespace uct_tm_test

#endif
