/*
 * The hardware tag engine over the tag lists of this folder: the device
 * model, and the verbs TM SRQ when rdma-core is present. Instantiated once
 * here (the template lives in uct_tm/tag/ and knows no list).
 */
#include "tag/hw_tag_engine_impl.h"

#include "tm_model.h"
#ifdef UCT_TM_HAVE_VERBS
#include "tm_verbs_list.h"
#endif

namespace uct_tm {

template class HwTagEngine<ib::TmModel>;
#ifdef UCT_TM_HAVE_VERBS
template class HwTagEngine<ib::TmVerbsList>;
#endif

}  // namespace uct_tm
