/*
 * This process's pid without a system call per use: getpid() costs about
 * 1 us on a paravirtualized guest (host E), and the one-sided and
 * rendezvous paths asked for it twice per message.
 */
#ifndef UCT_TM_BASE_SELF_PID_H_
#define UCT_TM_BASE_SELF_PID_H_

#include <sys/types.h>

namespace uct_tm {

/* getpid(), cached; a forked child asks again. */
pid_t self_pid();

}  // namespace uct_tm

#endif
