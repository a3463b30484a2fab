/*
 * libuct_tm.so.0: the module UCX loads (its module directory or UCX_PLUGIN_PATH
 * from 1.22 on; LD_PRELOAD or a link before that).
 *
 * uct-tm mirrors UCX's private layouts of exactly one release, the one
 * configure found. Loaded into a process running another release, the
 * component's code would bind to symbols that release may lack (the dynamic
 * linker then kills the program at start) or write structures of another
 * shape. So this library binds to nothing release-specific: from its ELF
 * constructor it finds the running release and, only if it is the one the
 * components were built for, loads them from this file's directory, each
 * registering itself with libuct from its own constructor:
 * libuct_tm_component.so (component "tm": tm_sm), then, when installed,
 * libuct_tm_ib.so (component "tm_ib": tm_rc, tm_dc), the one library that
 * links rdma-core. Where rdma-core is missing the latter does not load: as
 * UCX with its own libuct_ib, that is said only at UCX_LOG_LEVEL=diag and
 * above, and tm_sm goes on alone. Built for another release, this library
 * registers nothing, says so once through UCX's log, and UCX goes on with
 * its own transports.
 *
 * libuct and libucs publish no version call; libucp does (ucp_get_version).
 * The release is read from the libucp this process has loaded (a UCP
 * program's), else from the one installed next to the libuct it runs, else,
 * in UCX's build tree (src/uct/.libs), from src/ucp/.libs.
 * The calls made here (ucp_get_version, ucs_log_dispatch,
 * ucs_global_opts_get_value) have kept their signatures through every
 * supported release, and ucs_log_component_config_t its layout.
 */
#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>
#include <uct/api/version.h>

#include <dlfcn.h>
#include <link.h>

#include <strings.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

/* The release configure built against; a test build names another one to
 * check the refusal (tests/uct/test_ucx_mismatch.sh). */
#ifndef UCT_TM_BUILT_UCX_MAJOR
#define UCT_TM_BUILT_UCX_MAJOR UCT_VERNO_MAJOR
#define UCT_TM_BUILT_UCX_MINOR UCT_VERNO_MINOR
#endif

namespace uct_tm {
namespace {

constexpr unsigned kBuiltMajor = UCT_TM_BUILT_UCX_MAJOR;
constexpr unsigned kBuiltMinor = UCT_TM_BUILT_UCX_MINOR;
constexpr char     kComponentLibrary[] = "libuct_tm_component.so";
/* Component tm_ib, the verbs transports (rdma-core): absent from builds
 * without rdma-core and from installations without its package. */
constexpr char kIbLibrary[] = "libuct_tm_ib.so";

/* The level UCX_LOG_LEVEL sets (UCX's names; "trace_*" as trace); warn if
 * unset or unknown, as UCX's default. */
ucs_log_level_t configured_level() {
    char configured[32] = "";
    if (ucs_global_opts_get_value("LOG_LEVEL", configured, sizeof(configured)) != UCS_OK) {
        return UCS_LOG_LEVEL_WARN;
    }
    static const char *const kNames[] = {"fatal", "error", "warn", "diag", "info", "debug"};
    for (size_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i) {
        if (strcasecmp(configured, kNames[i]) == 0) {
            return static_cast<ucs_log_level_t>(i);
        }
    }
    return (strncasecmp(configured, "trace", 5) == 0) ? UCS_LOG_LEVEL_TRACE : UCS_LOG_LEVEL_WARN;
}

/* Logged as UCX logs its own messages, unless UCX_LOG_LEVEL silences them. */
void log_message(ucs_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void log_message(ucs_log_level_t level, const char *fmt, ...) {
    if (level > configured_level()) {
        return;
    }
    static ucs_log_component_config_t component = {UCS_LOG_LEVEL_TRACE, "UCX", "*"};
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    ucs_log_dispatch(__FILE__, __LINE__, __func__, level, &component, "%s", message);
}

std::string dirname_of(const std::string &path) {
    const size_t slash = path.rfind('/');
    return (slash == std::string::npos) ? std::string(".") : path.substr(0, slash);
}

/* The file of this library, as it was loaded. */
std::string own_path() {
    Dl_info info;
    if ((dladdr(reinterpret_cast<const void *>(&dirname_of), &info) == 0) ||
        (info.dli_fname == nullptr)) {
        return {};
    }
    return info.dli_fname;
}

/* The directory of the libuct this process runs: the libuct.so.0 the dynamic
 * linker gives a library of this process (loaded by now in a UCX program;
 * loaded here otherwise, and kept, as a dependency would be). */
std::string libuct_directory() {
    void *libuct = dlopen("libuct.so.0", RTLD_LAZY | RTLD_NODELETE);
    if (libuct == nullptr) {
        return {};
    }
    struct link_map *map = nullptr;
    if ((dlinfo(libuct, RTLD_DI_LINKMAP, &map) != 0) || (map == nullptr) || (map->l_name == nullptr)) {
        return {};
    }
    return dirname_of(map->l_name);
}

/* The libucp that goes with this process's libuct, opened (and so kept
 * loaded until the caller closes it); on failure, why in `error`. */
void *open_libucp(std::string *error) {
    void *loaded = dlopen("libucp.so.0", RTLD_LAZY | RTLD_NOLOAD);
    if (loaded != nullptr) {
        return loaded;
    }
    const std::string dir = libuct_directory();
    if (dir.empty()) {
        const char *why = dlerror();
        *error = std::string("libuct.so.0: ") + ((why != nullptr) ? why : "not found");
        return nullptr;
    }
    /* installed: libucp beside libuct; UCX's build tree: src/uct/.libs and src/ucp/.libs */
    for (const char *relative : {"/libucp.so.0", "/../../ucp/.libs/libucp.so.0"}) {
        void *libucp = dlopen((dir + relative).c_str(), RTLD_LAZY | RTLD_LOCAL);
        if (libucp != nullptr) {
            return libucp;
        }
    }
    *error = "no libucp.so.0 loaded, none beside " + dir + "/libuct.so.0 nor in ../../ucp/.libs";
    return nullptr;
}

struct Release {
    unsigned major = 0, minor = 0, patch = 0;
};

/* The release of the running UCX, from its libucp; on failure, why in `error`. */
bool running_release(Release *release, std::string *error) {
    void *libucp = open_libucp(error);
    if (libucp == nullptr) {
        return false;
    }
    using GetVersion = void (*)(unsigned *, unsigned *, unsigned *);
    auto get_version = reinterpret_cast<GetVersion>(dlsym(libucp, "ucp_get_version"));
    if (get_version != nullptr) {
        get_version(&release->major, &release->minor, &release->patch);
    } else {
        *error = "libucp.so.0 has no ucp_get_version";
    }
    dlclose(libucp); /* unloaded again unless the program uses it too */
    return get_version != nullptr;
}

int find_component(struct dl_phdr_info *info, size_t, void *found) {
    const char *name  = (info->dlpi_name != nullptr) ? info->dlpi_name : "";
    const char *slash = strrchr(name, '/');
    if (strcmp((slash != nullptr) ? slash + 1 : name, kComponentLibrary) == 0) {
        *static_cast<bool *>(found) = true;
        return 1;
    }
    return 0;
}

/* A second copy of this library (preloaded, and found again in UCX's module
 * directory) must not register the component twice. */
bool component_loaded() {
    bool found = false;
    dl_iterate_phdr(find_component, &found);
    return found;
}

__attribute__((constructor)) void load_component() {
    Release     running;
    std::string error;
    if (!running_release(&running, &error)) {
        log_message(UCS_LOG_LEVEL_WARN,
                    "uct-tm: cannot tell which UCX release this process runs (%s); uct-tm is "
                    "built for UCX %u.%u, its transports are not registered",
                    error.c_str(), kBuiltMajor, kBuiltMinor);
        return;
    }
    if ((running.major != kBuiltMajor) || (running.minor != kBuiltMinor)) {
        log_message(UCS_LOG_LEVEL_WARN,
                    "uct-tm: %s is built for UCX %u.%u, but this process runs UCX %u.%u.%u: "
                    "its transports (tm_sm, tm_rc, tm_dc) are not registered; build uct-tm against "
                    "UCX %u.%u (configure --with-ucx=PREFIX)",
                    own_path().c_str(), kBuiltMajor, kBuiltMinor, running.major, running.minor,
                    running.patch, running.major, running.minor);
        return;
    }
    if (component_loaded()) {
        return;
    }
    const std::string dir  = dirname_of(own_path());
    const std::string path = dir + "/" + kComponentLibrary;
    /* Each constructor registers its component; none is ever unloaded
     * (libuct cannot forget a registered component). */
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) == nullptr) {
        const char *error = dlerror();
        log_message(UCS_LOG_LEVEL_ERROR, "uct-tm: cannot load %s: %s", path.c_str(),
                    (error != nullptr) ? error : "unknown error");
        return;
    }
    const std::string ib = dir + "/" + kIbLibrary;
    if (access(ib.c_str(), F_OK) != 0) {
        log_message(UCS_LOG_LEVEL_DEBUG, "uct-tm: no %s: tm_rc and tm_dc not installed",
                    ib.c_str());
    } else if (dlopen(ib.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) == nullptr) {
        /* rdma-core missing, as UCX says of its own libuct_ib: not an error. */
        const char *error = dlerror();
        log_message(UCS_LOG_LEVEL_DIAG, "uct-tm: tm_rc and tm_dc not loaded (rdma-core?): %s",
                    (error != nullptr) ? error : "unknown error");
    }
}

}  // namespace
}  // namespace uct_tm
