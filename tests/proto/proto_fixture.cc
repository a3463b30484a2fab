#include "proto_fixture.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace uct_tm_test {

void apply_transport(const std::string &param, uct_tm_proto_worker_params_t *params,
                     std::string *tls) {
    const size_t plus = param.find('+');
    *tls              = param.substr(0, plus);
    if (plus != std::string::npos) {
        params->field_mask |= UCT_TM_PROTO_WORKER_FIELD_OFFLOAD;
        params->offload = 0;
    }
    params->field_mask |= UCT_TM_PROTO_WORKER_FIELD_TRANSPORTS;
    params->transports = tls->c_str();
}

ucs_status_t make_pair(const std::string &transports, Pair *pair,
                       const uct_tm_proto_worker_params_t *extra) {
    uct_tm_proto_worker_params_t params = {};
    if (extra != nullptr) {
        params = *extra;
    }
    std::string tls;
    apply_transport(transports, &params, &tls);
    ucs_status_t status = uct_tm_proto_worker_create(&params, &pair->a);
    if (status == UCS_OK) {
        status = uct_tm_proto_worker_create(&params, &pair->b);
    }
    for (int i = 0; (status == UCS_OK) && (i < 2); ++i) {
        uct_tm_proto_worker_h from = i ? pair->b : pair->a;
        uct_tm_proto_worker_h to   = i ? pair->a : pair->b;
        size_t                len  = 0;
        uct_tm_proto_worker_address(to, nullptr, &len);
        std::vector<char> addr(len);
        status = uct_tm_proto_worker_address(to, addr.data(), &len);
        if (status == UCS_OK) {
            status = uct_tm_proto_ep_create(from, addr.data(), len, i ? &pair->ba : &pair->ab);
            if (status == UCS_INPROGRESS) {
                status = UCS_OK; /* connected below */
            }
        }
    }
    if (status == UCS_OK) {
        status = connect_eps(pair->ab, pair->ba);
    }
    return status;
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

std::vector<char> ep_address(uct_tm_proto_ep_h ep) {
    size_t len = 0;
    if (uct_tm_proto_ep_address(ep, nullptr, &len) != UCS_ERR_BUFFER_TOO_SMALL) {
        return {};
    }
    std::vector<char> addr(len);
    if (uct_tm_proto_ep_address(ep, addr.data(), &len) != UCS_OK) {
        return {};
    }
    return addr;
}

ucs_status_t connect_eps(uct_tm_proto_ep_h ab, uct_tm_proto_ep_h ba) {
    const std::vector<char> a = ep_address(ab), b = ep_address(ba);
    if (a.empty() || b.empty()) {
        return UCS_ERR_INVALID_PARAM;
    }
    ucs_status_t status = uct_tm_proto_ep_connect(ab, b.data(), b.size());
    return (status == UCS_OK) ? uct_tm_proto_ep_connect(ba, a.data(), a.size()) : status;
}

void destroy_pair(Pair *pair) {
    if (pair->a != nullptr) {
        uct_tm_proto_worker_destroy(pair->a);
    }
    if (pair->b != nullptr) {
        uct_tm_proto_worker_destroy(pair->b);
    }
    *pair = Pair();
}

bool wait_for(const Pair &pair, const std::function<bool()> &done) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int>(kWaitSeconds * 1000));
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        uct_tm_proto_worker_progress(pair.a);
        uct_tm_proto_worker_progress(pair.b);
    }
    return true;
}

ucs_status_t wait_request(const Pair &pair, uct_tm_proto_worker_h owner,
                          uct_tm_proto_request_t req, uct_tm_proto_info_t *info) {
    ucs_status_t status = UCS_INPROGRESS;
    const bool   ok     = wait_for(pair, [&] {
        status = uct_tm_proto_request_test(owner, req, info);
        return status != UCS_INPROGRESS;
    });
    if (!ok) {
        ADD_FAILURE() << "request did not complete in time";
        return UCS_ERR_TIMED_OUT;
    }
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_release(owner, req));
    return status;
}

uct_tm_proto_stats_t stats_of(uct_tm_proto_worker_h w) {
    uct_tm_proto_stats_t st;
    uct_tm_proto_worker_stats(w, &st);
    return st;
}

ucs_status_t connect_third(const std::string &param, uct_tm_proto_worker_h b, ThirdWorker *t) {
    ucs_status_t st = make_pair(param, &t->q);
    if (st != UCS_OK) {
        return st;
    }
    const auto addr_b = worker_address(b), addr_c = worker_address(t->c());
    st = uct_tm_proto_ep_create(t->c(), addr_b.data(), addr_b.size(), &t->cb);
    if ((st != UCS_OK) && (st != UCS_INPROGRESS)) {
        return st;
    }
    st = uct_tm_proto_ep_create(b, addr_c.data(), addr_c.size(), &t->bc);
    if ((st != UCS_OK) && (st != UCS_INPROGRESS)) {
        return st;
    }
    return connect_eps(t->cb, t->bc);
}

std::vector<char> pattern(size_t length, uint32_t seed) {
    std::vector<char> v(length);
    uint32_t          x = seed * 2654435761u + 1;
    for (size_t i = 0; i < length; ++i) {
        x    = x * 1103515245u + 12345u;
        v[i] = static_cast<char>(x >> 24);
    }
    return v;
}

std::vector<std::string> test_transports(const std::vector<std::string> &defaults) {
    const char *env = getenv("UCT_TM_PROTO_TEST_TRANSPORTS");
    if ((env == nullptr) || (*env == '\0')) {
        return defaults;
    }
    std::vector<std::string> out;
    std::string              item;
    for (const char *c = env;; ++c) {
        if ((*c == ' ') || (*c == '\0')) {
            if (!item.empty()) {
                out.push_back(item);
            }
            item.clear();
            if (*c == '\0') {
                break;
            }
        } else {
            item += *c;
        }
    }
    return out;
}

std::vector<std::string> proto_transports() {
    if (getenv("UCT_TM_PROTO_TEST_TRANSPORTS") != nullptr) {
        /* asked for by name: kept, so that a missing one fails, not skips */
        return test_transports({});
    }
    std::vector<std::string> out;
    for (const char *tl : {"tm_sm", "tm_sm+sw", "posix", "tcp:lo", "tm_sm,posix"}) {
        Pair               pair;
        const ucs_status_t status = make_pair(tl, &pair);
        destroy_pair(&pair);
        if (status == UCS_OK) {
            out.emplace_back(tl);
        }
    }
    return out;
}

std::string transport_name(const ::testing::TestParamInfo<std::string> &info) {
    std::string name = info.param;
    for (char &c : name) {
        if ((c == ':') || (c == '+') || (c == ',')) {
            c = '_';
        }
    }
    return name;
}

void ProtoTest::SetUp() {
    ASSERT_EQ(UCS_OK, make_pair(GetParam(), &p_));
}

void ProtoTest::TearDown() {
    destroy_pair(&p_);
}

void ProtoTest::reopen(const uct_tm_proto_worker_params_t &extra) {
    destroy_pair(&p_);
    ASSERT_EQ(UCS_OK, make_pair(GetParam(), &p_, &extra));
}

ucs_status_t ProtoTest::send(const void *buf, size_t len, uint64_t tag, unsigned flags,
                             std::optional<uint64_t> data, uct_tm_proto_request_t *req_out) {
    uct_tm_proto_op_params_t params = {};
    params.flags = flags | (data ? UCT_TM_PROTO_SEND_REMOTE_DATA : 0);
    params.data  = data.value_or(0);
    uct_tm_proto_request_t req = 0;
    const ucs_status_t status = uct_tm_proto_send(p_.ab, buf, len, tag, &params, &req);
    if (req_out != nullptr) {
        *req_out = (status == UCS_INPROGRESS) ? req : 0;
        return status;
    }
    if (status == UCS_INPROGRESS) {
        return wait_request(p_, p_.a, req);
    }
    return status;
}

uct_tm_proto_request_t ProtoTest::post(void *buf, size_t len, uint64_t tag, uint64_t mask,
                                       uct_tm_proto_ep_h src) {
    uct_tm_proto_request_t req = 0;
    EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, buf, len, tag, mask, src, nullptr, &req));
    return req;
}

bool ProtoTest::wait_unexpected(uint64_t tag) {
    uct_tm_proto_info_t info;
    return wait_for(p_, [&] {
        return uct_tm_proto_probe(p_.b, tag, ~uint64_t{0}, nullptr, UCT_TM_PROTO_PROBE_PEEK, &info,
                                  nullptr) == UCS_OK;
    });
}

void ProtoTest::expect_truncated(const std::vector<char> &buf, size_t cap,
                                 const std::vector<char> &data, const uct_tm_proto_info_t &info) {
    EXPECT_EQ(info.length, data.size());
    EXPECT_TRUE(same_bytes(buf.data(), data.data(), cap));
    for (size_t i = cap; i < buf.size(); ++i) {
        ASSERT_EQ(buf[i], 'g') << "byte " << i << " written past the buffer";
    }
}

void ProtoTest::transfer(size_t len, uint64_t tag, uint32_t seed, uct_tm_proto_ep_h src) {
    const auto        data = pattern(len, seed);
    std::vector<char> buf(len + 16, 'x');
    auto              rreq = post(buf.data(), len, tag, ~uint64_t{0}, src);
    uct_tm_proto_request_t sreq;
    const ucs_status_t st = send(data.data(), len, tag, 0, 77, &sreq);
    ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << len;
    uct_tm_proto_info_t info;
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rreq, &info)) << len;
    if (sreq != 0) {
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, sreq)) << len;
    }
    EXPECT_TRUE(same_bytes(buf.data(), data.data(), len)) << len;
    EXPECT_EQ(buf[len], 'x') << len;
    EXPECT_EQ(info.tag, tag);
    EXPECT_EQ(info.length, len);
    EXPECT_EQ(info.flags, unsigned{UCT_TM_PROTO_INFO_REMOTE_DATA});
    EXPECT_EQ(info.data, 77u);
    EXPECT_EQ(info.source, uct_tm_proto_worker_id(p_.a));
    EXPECT_EQ(info.ep, p_.ba);
}

}  // namespace uct_tm_test
