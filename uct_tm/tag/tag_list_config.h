/*
 * The tag-list settings every tag transport takes (UCX_TM_<TL>_TAG_LIST_SIZE,
 * UCX_TM_<TL>_RECV_MAX_IOV), declared once: a transport embeds the table in
 * its own configuration and gets its TagEngine limits from it.
 */
#ifndef UCT_TM_TAG_TAG_LIST_CONFIG_H_
#define UCT_TM_TAG_TAG_LIST_CONFIG_H_

#include "tag_engine.h"

#include <ucs/config/parser.h>

namespace uct_tm {

struct TagListConfig {
    unsigned list_size;    /* receives posted at once */
    unsigned recv_max_iov; /* iovcnt per receive, 1..kMaxRecvIov */

    /* UCS_ERR_INVALID_PARAM, logged for transport `tl`, if out of range. */
    ucs_status_t check(const char *tl) const;
    /* The software engine's limits. */
    TagEngineLimits limits() const { return TagEngineLimits{list_size, recv_max_iov}; }
};

/* Embedded with UCS_CONFIG_TYPE_TABLE and an empty name: the fields keep
 * the transport's prefix. */
extern ucs_config_field_t tag_list_config_table[];

}  // namespace uct_tm

#endif
