/* The tools' -s size lists (src/tools/size_list.h): one syntax for
 * tm_perftest and tm_proto_perf, and a reason for every list it refuses. */
#include "size_list.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

std::vector<size_t> parse_ok(const std::string &text) {
    std::vector<size_t> sizes;
    std::string         error;
    EXPECT_TRUE(uct_tm::parse_size_list(text, &sizes, &error)) << text << ": " << error;
    return sizes;
}

std::string parse_error(const std::string &text) {
    std::vector<size_t> sizes = {42};
    std::string         error;
    EXPECT_FALSE(uct_tm::parse_size_list(text, &sizes, &error)) << text;
    EXPECT_EQ(sizes, std::vector<size_t>{42}) << text << ": untouched on error";
    return error;
}

}  // namespace

TEST(SizeList, SuffixesAreBinaryAndEitherCase) {
    EXPECT_EQ(parse_ok("8,1k,64k,1m"), (std::vector<size_t>{8, 1024, 65536, 1048576}));
    EXPECT_EQ(parse_ok("1K,2M,1g,3G"),
              (std::vector<size_t>{1024, 2u << 20, size_t{1} << 30, size_t{3} << 30}));
    EXPECT_EQ(parse_ok("0"), std::vector<size_t>{0});
    EXPECT_EQ(parse_ok("8,8"), (std::vector<size_t>{8, 8}));
}

TEST(SizeList, EmptyItemsAreRefused) {
    EXPECT_NE(parse_error("").find("item 1 '': empty"), std::string::npos);
    EXPECT_NE(parse_error("8,,1k").find("item 2 '': empty"), std::string::npos);
    EXPECT_NE(parse_error("8,").find("item 2"), std::string::npos);
    EXPECT_NE(parse_error(",8").find("item 1"), std::string::npos);
}

TEST(SizeList, UnknownSuffixesAndNonNumbersAreRefused) {
    EXPECT_NE(parse_error("1kb").find("unknown suffix 'kb'"), std::string::npos);
    EXPECT_NE(parse_error("8,1x").find("item 2 '1x': unknown suffix 'x'"), std::string::npos);
    EXPECT_NE(parse_error("1.5k").find("unknown suffix '.5k'"), std::string::npos);
    EXPECT_NE(parse_error("-1").find("not a whole number"), std::string::npos);
    EXPECT_NE(parse_error(" 8").find("not a whole number"), std::string::npos);
    EXPECT_NE(parse_error("k").find("not a whole number"), std::string::npos);
}

TEST(SizeList, OverflowIsRefused) {
    const std::string max = std::to_string(SIZE_MAX);
    EXPECT_EQ(parse_ok(max), std::vector<size_t>{SIZE_MAX});
    EXPECT_NE(parse_error(max + "0").find("too large"), std::string::npos);
    EXPECT_NE(parse_error("99999999999999999999").find("too large"), std::string::npos);
    EXPECT_EQ(parse_ok(std::to_string(SIZE_MAX >> 30) + "g"),
              std::vector<size_t>{(SIZE_MAX >> 30) << 30});
    EXPECT_NE(parse_error(std::to_string((SIZE_MAX >> 30) + 1) + "g").find("too large"),
              std::string::npos);
}
