#!/usr/bin/env bash
# Runs a command on another host of a multi-host `contrib/rxe_qemu.sh` run
# (RXE_HOSTS=2): each host there is a QEMU guest with its own kernel,
# address 10.9.0.N on eth0 and Soft-RoCE device rxe0 on it. This is the
# remote shell between them, used the way ssh is (also as Open MPI's rsh
# agent): the words of COMMAND are joined by spaces and run by bash on HOST.
#
#   contrib/rxe_host.sh [-OPTIONS...] HOST COMMAND [ARGS...]
#   contrib/rxe_host.sh wait HOST [SECONDS]   until HOST's agent answers (default 300 s)
#   contrib/rxe_host.sh serve                 the agent itself (rxe_qemu.sh starts it)
#
# HOST is hostN or an address. Unlike ssh, the caller's working directory and
# its PATH, LD_LIBRARY_PATH, LD_PRELOAD, UCX_*, TM_*, OMPI_MCA_* and GTEST_*
# variables are carried over. Output (stdout and stderr, merged) comes back
# as it is written; the exit status is the command's, 255 when the host could
# not be reached or the connection was lost. Leading options (ssh's -x, -n, ...)
# are accepted and ignored. There is no authentication: it serves the emulated
# guests' private network and nothing else.
set -uo pipefail

port=${RXE_HOST_PORT:-7000}
marker=$'\001rxe-host-rc'

address_of() {
    case $1 in
    host[0-9]*) echo "10.9.0.${1#host}" ;;
    *) echo "$1" ;;
    esac
}

serve_one() {
    # One connection: header lines up to "end", then the command runs with the
    # connection as stdin and stdout.
    local line script="" magic
    IFS= read -r magic || exit 1
    [[ $magic == "rxe-host 1" ]] || { echo "rxe_host: bad request" >&2; exit 1; }
    while IFS= read -r line && [[ $line != end ]]; do
        script+="$line"$'\n'
    done
    bash -c "$script" 2>&1
    printf '%s %d\n' "$marker" "$?"
}

remote() {
    local host=$1
    shift
    local addr v
    addr=$(address_of "$host")
    {
        echo "rxe-host 1"
        for v in $(compgen -e | grep -E '^(UCX_|TM_|OMPI_MCA_|GTEST_|PATH$|LD_PRELOAD$|LD_LIBRARY_PATH$)'); do
            printf 'export %s=%q\n' "$v" "${!v}"
        done
        printf 'cd %q || exit 1\n' "$PWD"
        # ssh semantics: the words joined by spaces, one line for the remote shell
        local cmd="$*"
        printf '%s\n' "${cmd//$'\n'/ }"
        echo end
    } | busybox nc "$addr" "$port" 2>/dev/null |
        awk -v m="$marker" '
            { i = index($0, m)
              if (i == 0) { print; fflush(); next }
              if (i > 1) { printf "%s\n", substr($0, 1, i - 1); fflush() }
              rc = substr($0, i + length(m) + 1) + 0; got = 1 }
            END { exit got ? rc : 255 }'
}

case ${1:-} in
serve)
    exec busybox nc -ll -p "$port" -e "$0" serve-one
    ;;
serve-one)
    serve_one
    ;;
wait)
    [[ $# -ge 2 ]] || { echo "usage: $0 wait HOST [SECONDS]" >&2; exit 2; }
    deadline=$((SECONDS + ${3:-300}))
    until remote "$2" true; do
        ((SECONDS < deadline)) || { echo "rxe_host: $2 does not answer" >&2; exit 1; }
        sleep 1
    done
    ;;
*)
    while [[ ${1:-} == -* ]]; do shift; done
    [[ $# -ge 2 ]] || { echo "usage: $0 HOST COMMAND [ARGS...]" >&2; exit 2; }
    remote "$@"
    ;;
esac
