/*
 * tm_dc's provider selection (UCX_TM_DC_PROVIDER, uct_tm/ib/dc_provider.h)
 * on the device at hand:
 *   - auto runs the on-demand RC provider on a device without mlx5 DC, and
 *     says why mlx5 DC was not selected (a diag message; the PRINT_STATS
 *     line names the provider and the reason);
 *   - mlx5 forced on such a device fails uct_iface_open with
 *     UCS_ERR_UNSUPPORTED and an error naming the reason;
 *   - ondemand runs on-demand RC without probing;
 *   - a value that is no provider is refused by UCX's config parser;
 *   - an iface address written by the other provider (its provider byte)
 *     is unreachable, and uct_ep_create refuses it with UCS_ERR_UNREACHABLE
 *     and a message; an unknown provider byte with UCS_ERR_INVALID_PARAM.
 * On Soft-RoCE (the guest of tests/ib/test_rxe.sh) the device is no mlx5
 * device. Skipped by transports without a PROVIDER setting.
 */
#include "tag_fixture.h"

#include <gtest/gtest.h>
#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>

#include <cstdarg>
#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

namespace uct_tm_test {
namespace {

/* Records UCX log messages up to DIAG while alive (diag enabled for that
 * time), and lets them through to the usual output as well. */
class LogCapture {
  public:
    LogCapture() : saved_level_(ucs_global_opts.log_component.log_level) {
        active_ = this;
        if (ucs_global_opts.log_component.log_level < UCS_LOG_LEVEL_DIAG) {
            ucs_global_opts.log_component.log_level = UCS_LOG_LEVEL_DIAG;
        }
        ucs_log_push_handler(handler);
    }
    ~LogCapture() {
        ucs_log_pop_handler();
        ucs_global_opts.log_component.log_level = saved_level_;
        active_ = nullptr;
    }
    LogCapture(const LogCapture &)            = delete;
    LogCapture &operator=(const LogCapture &) = delete;

    /* The first message at `level` that contains `text`, or empty. */
    std::string find(ucs_log_level_t level, const std::string &text) const {
        for (const auto &m : messages_) {
            if ((m.first == level) && (m.second.find(text) != std::string::npos)) {
                return m.second;
            }
        }
        return {};
    }
    std::string all() const {
        std::string out;
        for (const auto &m : messages_) {
            out += std::string(ucs_log_level_names[m.first]) + ": " + m.second + "\n";
        }
        return out;
    }

  private:
    static ucs_log_func_rc_t handler(const char *, unsigned, const char *, ucs_log_level_t level,
                                     const ucs_log_component_config_t *, const char *message,
                                     va_list ap) {
        if ((active_ != nullptr) && (level <= UCS_LOG_LEVEL_DIAG)) {
            char    buf[1024];
            va_list copy;
            va_copy(copy, ap);
            vsnprintf(buf, sizeof(buf), message, copy);
            va_end(copy);
            active_->messages_.emplace_back(level, buf);
        }
        return UCS_LOG_FUNC_RC_CONTINUE;
    }

    static LogCapture                                   *active_;
    ucs_log_level_t                                      saved_level_;
    std::vector<std::pair<ucs_log_level_t, std::string>> messages_;
};
LogCapture *LogCapture::active_ = nullptr;

/* The verbs device the MD of `env` offers `tl` on: "rxe0" of "tm_rxe0:1". */
std::string verbs_device(const UctEnv &env, const std::string &tl) {
    uct_tl_resource_desc_t *resources;
    unsigned                count;
    std::string             dev;
    if (uct_md_query_tl_resources(env.md(), &resources, &count) != UCS_OK) {
        return dev;
    }
    for (unsigned i = 0; i < count; ++i) {
        if (tl == resources[i].tl_name) {
            dev = resources[i].dev_name;
        }
    }
    uct_release_tl_resource_list(resources);
    if (dev.rfind("tm_", 0) == 0) {
        dev.erase(0, 3);
    }
    return dev.substr(0, dev.rfind(':'));
}

/* What the probe says of a device that is no mlx5 device. */
std::string not_mlx5_reason(const std::string &dev) {
#ifdef UCT_TM_HAVE_MLX5DV
    return dev + " is not an mlx5 device";
#else
    (void)dev; /* the reason does not name the device */
    return "uct-tm was built without mlx5dv";
#endif
}

/* Byte of IfaceAddress that names the provider (uct_tm/ib/rc_wire.h). */
constexpr size_t kProviderByte = 4;

class DcProviderTest : public TagTest {
  protected:
    void SetUp() override {
        TagTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        const std::string setting = env_->iface_setting(GetParam(), "PROVIDER");
        if (setting.empty()) {
            GTEST_SKIP() << GetParam() << " has no PROVIDER setting";
        }
        if (setting != "auto") {
            GTEST_SKIP() << "the environment sets PROVIDER=" << setting;
        }
        dev_ = verbs_device(*env_, GetParam());
        ASSERT_FALSE(dev_.empty());
        if (dev_.rfind("mlx5", 0) == 0) {
            GTEST_SKIP() << dev_ << " is an mlx5 device: these tests are for devices without DC";
        }
    }

    /* An iface of the transport with `settings` and PRINT_STATS: its open
     * status, the log while it opened, and what it printed when it closed. */
    struct Opened {
        ucs_status_t status;
        std::string  log;
        std::string  error;  /* the ucs_error about the provider, if any */
        std::string  diag;   /* the ucs_diag about the provider, if any */
        std::string  stats;
    };
    Opened open(Settings settings) {
        settings.emplace_back("PRINT_STATS", "y");
        Opened                o;
        std::unique_ptr<Node> node;
        {
            LogCapture log;
            node.reset(new Node(*env_, GetParam(), settings));
            o.status = node->status;
            o.log    = log.all();
            o.error  = log.find(UCS_LOG_LEVEL_ERROR, "tm_dc:");
            o.diag   = log.find(UCS_LOG_LEVEL_DIAG, "tm_dc: mlx5 DC not selected");
        }
        o.stats = capture_stderr([&] { node.reset(); });
        return o;
    }

    std::string dev_;
};

TEST_P(DcProviderTest, AutoRunsOnDemandAndSaysWhyNotMlx5) {
    const Opened o = open({});
    ASSERT_EQ(o.status, UCS_OK) << o.log;
    const std::string reason = not_mlx5_reason(dev_);
    EXPECT_NE(o.diag.find("mlx5 DC not selected on " + dev_ + ": " + reason), std::string::npos)
            << "diag: " << o.diag << "\nlog:\n" << o.log;
    EXPECT_NE(o.diag.find("on-demand RC"), std::string::npos) << o.diag;
    EXPECT_NE(o.stats.find("provider ondemand: on-demand RC (auto; mlx5 DC not selected on " + dev_ +
                           ": " + reason),
              std::string::npos)
            << o.stats;
    EXPECT_TRUE(o.error.empty()) << o.error;
}

TEST_P(DcProviderTest, OnDemandForcedRunsWithoutProbing) {
    const Opened o = open({{"PROVIDER", "ondemand"}});
    ASSERT_EQ(o.status, UCS_OK) << o.log;
    EXPECT_TRUE(o.diag.empty()) << o.diag;
    EXPECT_NE(o.stats.find("provider ondemand: on-demand RC (UCX_TM_DC_PROVIDER=ondemand)"),
              std::string::npos)
            << o.stats;
}

TEST_P(DcProviderTest, Mlx5ForcedWithoutDcFailsWithTheReason) {
    const Opened o = open({{"PROVIDER", "mlx5"}});
    EXPECT_EQ(o.status, UCS_ERR_UNSUPPORTED) << ucs_status_string(o.status);
    EXPECT_NE(o.error.find("UCX_TM_DC_PROVIDER=mlx5, but mlx5 DC is not usable on " + dev_ + ": " +
                           not_mlx5_reason(dev_)),
              std::string::npos)
            << "error: " << o.error << "\nlog:\n" << o.log;
}

TEST_P(DcProviderTest, ConfigParserRefusesAnUnknownProvider) {
    uct_iface_params_t params = {};
    params.field_mask         = UCT_IFACE_PARAM_FIELD_FEATURES;
    params.features           = UCT_IFACE_FEATURE_AM;
    uct_iface_h iface         = nullptr;
    for (const char *value : {"dc", "mlx4", ""}) {
        const ucs_status_t status =
                env_->open_iface(GetParam(), params, &iface, {{"PROVIDER", value}});
        EXPECT_EQ(status, UCS_ERR_INVALID_PARAM) << "PROVIDER=\"" << value << "\": "
                                                 << ucs_status_string(status);
        if (status == UCS_OK) {
            uct_iface_close(iface);
        }
    }
}

TEST_P(DcProviderTest, AddressOfTheOtherProviderIsRefused) {
    const std::string good = rx_->address();
    const size_t      at   = tx_->attr.device_addr_len + kProviderByte;
    ASSERT_GT(good.size(), at);
    ASSERT_EQ(good[at], 0) << "an on-demand iface's provider byte";

    std::string mlx5 = good;
    mlx5[at]         = 1; /* DcProvider::kMlx5 */
    const auto *dev  = reinterpret_cast<const uct_device_addr_t *>(mlx5.data());
    const auto *ifa  = reinterpret_cast<const uct_iface_addr_t *>(mlx5.data() +
                                                                 tx_->attr.device_addr_len);
    EXPECT_EQ(uct_iface_is_reachable(tx_->iface, dev, ifa), 0);
    uct_ep_h ep = nullptr;
    {
        LogCapture log;
        EXPECT_EQ(tx_->connect(mlx5, &ep), UCS_ERR_UNREACHABLE);
        EXPECT_NE(log.find(UCS_LOG_LEVEL_ERROR, "is one of an mlx5 DC iface"), "") << log.all();
    }

    std::string unknown = good;
    unknown[at]         = 7;
    {
        LogCapture log;
        EXPECT_EQ(tx_->connect(unknown, &ep), UCS_ERR_INVALID_PARAM);
        EXPECT_NE(log.find(UCS_LOG_LEVEL_ERROR, "unknown provider (7)"), "") << log.all();
    }

    /* the address as written still connects */
    ASSERT_EQ(tx_->connect(good, &ep), UCS_OK);
    uct_ep_destroy(ep);
}

INSTANTIATE_TEST_SUITE_P(tm, DcProviderTest, ::testing::ValuesIn(tag_transports()),
                         transport_param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DcProviderTest);

}  // namespace
}  // namespace uct_tm_test
