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
 * component was built for, loads the component (libuct_tm_component.so, next
 * to this file), whose own constructor registers uct-tm's components and
 * their transports with libuct. Otherwise it registers nothing, says so once
 * through UCX's log, and UCX goes on with its own transports.
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

/* Logged as UCX logs its own warnings, unless UCX_LOG_LEVEL silences them. */
void log_message(ucs_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void log_message(ucs_log_level_t level, const char *fmt, ...) {
    char configured[32] = "";
    if (ucs_global_opts_get_value("LOG_LEVEL", configured, sizeof(configured)) == UCS_OK) {
        const bool quiet = (strcmp(configured, "fatal") == 0) ||
                           ((strcmp(configured, "error") == 0) && (level > UCS_LOG_LEVEL_ERROR));
        if (quiet) {
            return;
        }
    }
    static ucs_log_component_config_t component = {UCS_LOG_LEVEL_WARN, "UCX", "*"};
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
                    "its transports (tm_sm, tm_rc) are not registered; build uct-tm against "
                    "UCX %u.%u (configure --with-ucx=PREFIX)",
                    own_path().c_str(), kBuiltMajor, kBuiltMinor, running.major, running.minor,
                    running.patch, running.major, running.minor);
        return;
    }
    if (component_loaded()) {
        return;
    }
    const std::string path = dirname_of(own_path()) + "/" + kComponentLibrary;
    /* Its constructor registers the component; it is never unloaded (libuct
     * cannot forget a registered component). */
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) == nullptr) {
        const char *error = dlerror();
        log_message(UCS_LOG_LEVEL_ERROR, "uct-tm: cannot load %s: %s", path.c_str(),
                    (error != nullptr) ? error : "unknown error");
    }
}

}  // namespace
}  // namespace uct_tm
