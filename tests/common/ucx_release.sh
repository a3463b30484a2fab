# Sourced by the test scripts: the release of the UCX whose ucx_info is first
# in PATH (the tests' environment puts the UCX built against there).
#   ucx_release        -> 1.22.0  (1.13 prints "# Version 1.13.1", later
#                                  releases "# Library version: 1.22.0")
#   ucx_release_at_least 1 22  -> true if that release or newer
ucx_release() {
    ucx_info -v 2>/dev/null | sed -n 's/^# \(Library version:\|Version\) *\([0-9.]*\).*/\2/p' | head -1
}

ucx_release_at_least() {
    local release major minor
    release=$(ucx_release)
    major=${release%%.*}
    minor=${release#*.}
    minor=${minor%%.*}
    [ -n "$major" ] && { [ "$major" -gt "$1" ] || { [ "$major" -eq "$1" ] && [ "${minor:-0}" -ge "$2" ]; }; }
}

# plugin_loading PLUGIN -> the VAR=VALUE that loads the plugin the way the
# running release loads modules: UCX_PLUGIN_PATH=<its directory> from 1.22
# (UCX loads lib<framework>_<name>.so.0 from there), LD_PRELOAD before.
plugin_loading() {
    if ucx_release_at_least 1 22; then
        echo "UCX_PLUGIN_PATH=$(cd "$(dirname "$1")" && pwd)"
    else
        echo "LD_PRELOAD=$1"
    fi
}
