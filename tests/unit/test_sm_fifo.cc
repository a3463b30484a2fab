/*
 * tm_sm's receive FIFO (sm_fifo.h) in one process: elements published by a
 * plain store are read in sequence order, and a sender whose element the
 * reader skipped (it took the sender for dead) cannot publish over the skip,
 * while a sender that claims after the skip publishes normally again.
 */
#include "sm/sm_fifo.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

namespace {

using namespace uct_tm::sm;

class SmFifo : public ::testing::Test {
  protected:
    static constexpr uint32_t kElems = 8;
    static constexpr uint32_t kElemSize = 128;

    void SetUp() override {
        geometry_.fifo_elems  = kElems;
        geometry_.elem_size   = kElemSize;
        geometry_.fifo_offset = align_up(sizeof(SegmentHeader), kCacheLine);
        geometry_.descs_offset = geometry_.fifo_offset + kElems * kElemSize;
        geometry_.num_descs    = 0;
        const size_t size      = geometry_.descs_offset;
        memory_.reset(static_cast<char *>(std::aligned_alloc(kCacheLine, size)));
        header_ = new (memory_.get()) SegmentHeader();
        reader_.init(header_, geometry_);
        writer_.init(header_, geometry_);
    }

    /* Claims and fills one element; returns its sequence. */
    uint64_t claim(uint64_t tag) {
        uint64_t seq = 0;
        EXPECT_TRUE(writer_.claim(1, &seq));
        writer_.elem(seq)->tag = tag;
        return seq;
    }

    struct Free {
        void operator()(char *p) const { std::free(p); }
    };
    std::unique_ptr<char, Free> memory_;
    SegmentHeader              *header_ = nullptr;
    Geometry                    geometry_{};
    FifoReader                  reader_;
    FifoWriter                  writer_;
};

TEST_F(SmFifo, StorePublishedElementsAreReadInSequenceOrder) {
    /* Several laps, each element published out of claim order. */
    for (uint64_t lap = 0; lap < 3; ++lap) {
        const uint64_t a = claim(10 * lap + 1);
        const uint64_t b = claim(10 * lap + 2);
        ASSERT_TRUE(writer_.publish(writer_.elem(b), b));
        EXPECT_EQ(reader_.poll(), nullptr) << "an element ahead of an unpublished one was read";
        ASSERT_TRUE(writer_.publish(writer_.elem(a), a));
        for (uint64_t want : {10 * lap + 1, 10 * lap + 2}) {
            ElemHeader *e = reader_.poll();
            ASSERT_NE(e, nullptr);
            EXPECT_FALSE(FifoReader::skipped(e));
            EXPECT_EQ(e->tag, want);
            reader_.release();
        }
        for (uint32_t i = 2; i < kElems; ++i) { /* the rest of the lap */
            const uint64_t s = claim(0);
            ASSERT_TRUE(writer_.publish(writer_.elem(s), s));
            ASSERT_NE(reader_.poll(), nullptr);
            reader_.release();
        }
    }
}

TEST_F(SmFifo, SkippedElementRefusesALatePublish) {
    const uint64_t slow = claim(1); /* a sender that stalls after claiming */
    ASSERT_TRUE(reader_.stalled());
    ASSERT_TRUE(reader_.skip_stalled());
    EXPECT_FALSE(writer_.publish(writer_.elem(slow), slow)) << "published over a skipped element";
    ElemHeader *e = reader_.poll();
    ASSERT_NE(e, nullptr);
    EXPECT_TRUE(FifoReader::skipped(e));
    reader_.release();

    /* Claims after the skip publish by store again, including a full lap
     * later on the skipped element itself. */
    for (uint32_t i = 0; i < kElems; ++i) {
        const uint64_t s = claim(100 + i);
        ASSERT_TRUE(writer_.publish(writer_.elem(s), s));
        ElemHeader *next = reader_.poll();
        ASSERT_NE(next, nullptr);
        EXPECT_FALSE(FifoReader::skipped(next));
        EXPECT_EQ(next->tag, 100 + i);
        reader_.release();
    }
    EXPECT_EQ(writer_.elem(slow + kElems), writer_.elem(slow));
}

TEST_F(SmFifo, PublishedElementIsNotSkipped) {
    const uint64_t s = claim(7);
    ASSERT_TRUE(writer_.publish(writer_.elem(s), s));
    EXPECT_FALSE(reader_.stalled());
    EXPECT_FALSE(reader_.skip_stalled()) << "skipped an element that was published";
    ElemHeader *e = reader_.poll();
    ASSERT_NE(e, nullptr);
    EXPECT_FALSE(FifoReader::skipped(e));
    EXPECT_EQ(e->tag, 7u);
}

}  // namespace
