/*
 * The provider's entry point: libfabric dlopen()s libtm-fi.so from its
 * provider directory (or FI_PROVIDER_PATH) and calls fi_prov_ini().
 */
#include "getinfo.h"
#include "objects.h"

#include <cstring>

namespace uct_tm {
namespace fabric {

namespace {

/* Nothing is cached across fabrics but the transport list (getinfo.cc),
 * which stays valid for the process. */
void cleanup() {}

fi_provider make_provider() {
    fi_provider p{};
    p.version    = kProviderVersion;
    p.fi_version = kApiVersion;
    p.name       = kProviderName;
    p.getinfo    = getinfo;
    p.fabric     = open_fabric;
    p.cleanup    = cleanup;
    return p;
}

}  // namespace

fi_provider &provider() {
    static fi_provider p = make_provider();
    return p;
}

fi_ops make_fid_ops(int (*close)(fid *), int (*bind)(fid *, fid *, uint64_t),
                    int (*control)(fid *, int, void *)) {
    fi_ops o{};
    o.size     = sizeof(o);
    o.close    = close;
    o.bind     = (bind != nullptr) ? bind : TM_FI_NOSYS(fi_ops, bind);
    o.control  = (control != nullptr) ? control : TM_FI_NOSYS(fi_ops, control);
    o.ops_open = TM_FI_NOSYS(fi_ops, ops_open);
    o.tostr    = TM_FI_NOSYS(fi_ops, tostr);
    o.ops_set  = TM_FI_NOSYS(fi_ops, ops_set);
    return o;
}

int fi_error(ucs_status_t status) {
    switch (status) {
    case UCS_OK: return 0;
    case UCS_INPROGRESS: return -FI_EINPROGRESS;
    case UCS_ERR_INVALID_PARAM: return -FI_EINVAL;
    case UCS_ERR_NO_MEMORY: return -FI_ENOMEM;
    case UCS_ERR_NO_RESOURCE: return -FI_EAGAIN;
    case UCS_ERR_BUSY: return -FI_EBUSY;
    case UCS_ERR_CANCELED: return -FI_ECANCELED;
    case UCS_ERR_MESSAGE_TRUNCATED: return -FI_ETRUNC;
    case UCS_ERR_NO_ELEM: return -FI_ENOMSG;
    case UCS_ERR_NOT_CONNECTED: return -FI_ENOTCONN;
    case UCS_ERR_UNREACHABLE: return -FI_EHOSTUNREACH;
    case UCS_ERR_EXCEEDS_LIMIT: return -FI_ENOSPC;
    case UCS_ERR_ENDPOINT_TIMEOUT: return -FI_ETIMEDOUT;
    case UCS_ERR_CONNECTION_RESET: return -FI_ECONNRESET;
    case UCS_ERR_UNSUPPORTED: return -FI_EOPNOTSUPP;
    default: return -FI_EOTHER;
    }
}

bool name_valid(const Name &name) {
    return (name.magic == kNameMagic) && (name.length > 0) && (name.length <= sizeof(name.address));
}

}  // namespace fabric
}  // namespace uct_tm

extern "C" FI_EXT_INI {
    fi_provider *p = &uct_tm::fabric::provider();
    fi_param_define(p, "remote", FI_PARAM_STRING,
                    "The transport of the listed combined domain to other hosts: tm_dc or "
                    "tcp (default: tm_dc where it opens, else tcp). Either domain can also "
                    "be named in hints (\"tm_sm,tm_dc\", \"tm_sm,tcp\").");
    return p;
}
