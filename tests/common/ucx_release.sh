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
