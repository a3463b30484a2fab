#include "hw_tag_engine_impl.h"

#include "tm_model.h"
#ifdef UCT_TM_HAVE_VERBS
#include "tm_verbs_list.h"
#endif

namespace uct_tm {
namespace ib {

template class HwTagEngine<TmModel>;
#ifdef UCT_TM_HAVE_VERBS
template class HwTagEngine<TmVerbsList>;
#endif

}  // namespace ib
}  // namespace uct_tm
