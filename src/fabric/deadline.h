/*
 * Deadline: the end of a blocking call's timeout in milliseconds, as
 * libfabric gives them (fi_cq_sread, fi_eq_sread, fi_cntr_wait): negative
 * means none. The calls poll (FI_PROGRESS_MANUAL) until it passes.
 */
#ifndef UCT_TM_FABRIC_DEADLINE_H_
#define UCT_TM_FABRIC_DEADLINE_H_

#include <chrono>

namespace uct_tm {
namespace fabric {

class Deadline {
  public:
    explicit Deadline(int timeout_ms)
        : forever_(timeout_ms < 0),
          end_(std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms)) {}
    bool passed() const { return !forever_ && (std::chrono::steady_clock::now() >= end_); }

  private:
    bool                                  forever_;
    std::chrono::steady_clock::time_point end_;
};

}  // namespace fabric
}  // namespace uct_tm

#endif
