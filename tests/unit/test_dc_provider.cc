/*
 * tm_dc's provider selection (uct_tm/ib/dc_provider.h): every setting
 * against a device with and without usable mlx5 DC, without hardware. The
 * probe is compiled here without mlx5dv, so its answer is that of a build
 * without it.
 */
#include "ib/dc_provider.h"

#include <gtest/gtest.h>

#include <cstring>

namespace uct_tm {
namespace ib {
namespace {

const Mlx5DcSupport kNoDc{false, "rxe0 is not an mlx5 device"};
const Mlx5DcSupport kDc{true, ""};

TEST(DcProviderChoice, AutoPicksMlx5WhereUsable) {
    const DcChoice c = choose_dc_provider(DcProviderSetting::kAuto, kDc, "mlx5_0");
    EXPECT_EQ(c.status, UCS_OK);
    EXPECT_EQ(c.provider, DcProvider::kMlx5);
    EXPECT_EQ(c.note, "mlx5 DC (auto)");
}

TEST(DcProviderChoice, AutoFallsBackToOnDemandWithTheReason) {
    const DcChoice c = choose_dc_provider(DcProviderSetting::kAuto, kNoDc, "rxe0");
    EXPECT_EQ(c.status, UCS_OK);
    EXPECT_EQ(c.provider, DcProvider::kOnDemand);
    EXPECT_EQ(c.note, "on-demand RC (auto; mlx5 DC not selected on rxe0: rxe0 is not an mlx5 device)");
}

TEST(DcProviderChoice, Mlx5ForcedWhereUnusableIsUnsupported) {
    const DcChoice c = choose_dc_provider(DcProviderSetting::kMlx5, kNoDc, "rxe0");
    EXPECT_EQ(c.status, UCS_ERR_UNSUPPORTED);
    EXPECT_EQ(c.note, "tm_dc: UCX_TM_DC_PROVIDER=mlx5, but mlx5 DC is not usable on rxe0: "
                      "rxe0 is not an mlx5 device");
}

TEST(DcProviderChoice, Mlx5ForcedWhereUsable) {
    const DcChoice c = choose_dc_provider(DcProviderSetting::kMlx5, kDc, "mlx5_0");
    EXPECT_EQ(c.status, UCS_OK);
    EXPECT_EQ(c.provider, DcProvider::kMlx5);
}

TEST(DcProviderChoice, OnDemandForcedEvenWhereMlx5IsUsable) {
    for (const Mlx5DcSupport &s : {kDc, kNoDc}) {
        const DcChoice c = choose_dc_provider(DcProviderSetting::kOnDemand, s, "mlx5_0");
        EXPECT_EQ(c.status, UCS_OK);
        EXPECT_EQ(c.provider, DcProvider::kOnDemand);
        EXPECT_EQ(c.note, "on-demand RC (UCX_TM_DC_PROVIDER=ondemand)");
    }
}

TEST(DcProviderChoice, SettingNamesMatchTheEnum) {
    EXPECT_STREQ(dc_provider_names[static_cast<unsigned>(DcProviderSetting::kAuto)], "auto");
    EXPECT_STREQ(dc_provider_names[static_cast<unsigned>(DcProviderSetting::kMlx5)], "mlx5");
    EXPECT_STREQ(dc_provider_names[static_cast<unsigned>(DcProviderSetting::kOnDemand)], "ondemand");
    EXPECT_EQ(dc_provider_names[3], nullptr);
    EXPECT_STREQ(dc_provider_name(DcProvider::kMlx5), "mlx5");
    EXPECT_STREQ(dc_provider_name(DcProvider::kOnDemand), "ondemand");
}

TEST(DcProviderProbe, WithoutMlx5dvSaysSo) {
    const Mlx5DcSupport s = probe_mlx5_dc(nullptr, "mlx5_0", nullptr, nullptr, nullptr, {});
    EXPECT_FALSE(s.usable);
    EXPECT_NE(s.reason.find("built without mlx5dv"), std::string::npos) << s.reason;
    EXPECT_NE(s.reason.find("mlx5_0"), std::string::npos) << s.reason;
}

}  // namespace
}  // namespace ib
}  // namespace uct_tm
