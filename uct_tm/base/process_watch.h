/*
 * Whether another process is still there. One rule for every use: a
 * process that has exited is gone even while it is a zombie (its parent has
 * not reaped it yet), although kill(pid, 0) still finds it then. A watch
 * holds a pidfd opened while the process was known alive, so a later reuse
 * of its pid cannot pass for it.
 */
#ifndef UCT_TM_BASE_PROCESS_WATCH_H_
#define UCT_TM_BASE_PROCESS_WATCH_H_

#include <sys/types.h>

namespace uct_tm {

/* True if process `pid` has exited (zombie included) or never existed. */
bool process_exited(pid_t pid);

/* True if process `pid` is stopped by a signal or a tracer (SIGSTOP, a
 * debugger): alive, but running none of its code. */
bool process_stopped(pid_t pid);

class ProcessWatch {
  public:
    ProcessWatch() = default;
    explicit ProcessWatch(pid_t pid);
    ~ProcessWatch();
    ProcessWatch(ProcessWatch &&other) noexcept;
    ProcessWatch &operator=(ProcessWatch &&other) noexcept;
    ProcessWatch(const ProcessWatch &)            = delete;
    ProcessWatch &operator=(const ProcessWatch &) = delete;

    pid_t pid() const { return pid_; }
    /* The watched process has exited (zombie included). */
    bool exited() const;

  private:
    void reset();

    pid_t pid_   = -1;
    int   pidfd_ = -1;
};

}  // namespace uct_tm

#endif
