#!/usr/bin/env bash
# tm_proto_perf moves the bytes it claims in every mode: each run below verifies every payload
# byte (--check; with -V also that nothing was written between the elements) over tm_sm (its
# rendezvous reads and writes), tm_sm without offload, posix and tcp (pushed), at sizes that
# take every protocol: empty, short, eager, fragmented eager and rendezvous. So does
# tm_perftest's ping-pong in each order of posting: the next receive one ahead (its default),
# right before the send (--post-on-path), none (-U); and its floor, one cache line passed
# between two processes (-t line_lat). A benchmark mode never run with its data
# checked could report figures for broken transfers.
# TOOLS: the directory holding tm_proto_perf and tm_perftest (default: this build's src/tools).
set -u
[ "${INTEGRATION_TESTS:-yes}" != no ] || { echo "SKIP: INTEGRATION_TESTS=no"; exit 77; }
perf=${TOOLS:?set TOOLS to the directory of tm_proto_perf}/tm_proto_perf
uct_perf=$TOOLS/tm_perftest
for tool in "$perf" "$uct_perf"; do
    [ -x "$tool" ] || { echo "FAIL: $tool not found"; exit 1; }
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fails=0
# run OFFLOAD ARGS...: one run with its data checked, UCX_TM_PROTO_OFFLOAD=OFFLOAD
run() {
    local offload=$1; shift
    if UCX_TM_PROTO_OFFLOAD=$offload timeout 120 "$perf" "$@" --check > "$log" 2>&1; then
        echo "PASS: tm_proto_perf $* (offload $offload)"
    else
        echo "FAIL: tm_proto_perf $* (offload $offload)"; tail -5 "$log"; fails=$((fails + 1))
    fi
}
sizes=0,8,1000,20000,300000
for x in tm_sm tm_sm+sw posix tcp:lo; do
    tl=${x%+sw}
    offload=y; [ "$x" != "$tl" ] && offload=n
    for mode in "" "-V 5" "-V 5:send" "-V 5:recv" "-U" "-U -V 3" "-u"; do
        # shellcheck disable=SC2086 # $mode is a list of options
        run $offload -x "$tl" -t tag_lat -s $sizes -n 20 $mode
        # shellcheck disable=SC2086
        run $offload -x "$tl" -t tag_bw -s $sizes -n 64 -w 8 $mode
    done
    run $offload -x "$tl" -t tag_bw -s 8,1000,20000 -n 64 -w 8 -m
    run $offload -x "$tl" -t tag_bw -s 8,1000,20000 -n 64 -w 8 -M 65536
done
for mode in "" "--post-on-path" "-U"; do
    # shellcheck disable=SC2086 # $mode is one option or none
    if timeout 300 "$uct_perf" -t tag_lat -s 0,8,100,8192,40960,65536,300000 -n 50 $mode --check \
            > "$log" 2>&1 && grep -Eq '^ +300000 +50 ' "$log"; then
        echo "PASS: tm_perftest tag_lat ${mode:-(one ahead)} --check"
    else
        echo "FAIL: tm_perftest tag_lat ${mode:-(one ahead)} --check"; tail -5 "$log"; fails=$((fails + 1))
    fi
done
# tm_sm's sender copying with streaming stores (UCX_TM_SM_COPY=stream): bcopy sizes (up to
# SEG_SIZE, packed aside first) and fragmented zcopy ones, matched and unexpected, every
# byte checked; its counters show the streamed copies happened.
for mode in "" "-U"; do
    # shellcheck disable=SC2086 # $mode is one option or none
    if UCX_TM_SM_COPY=stream UCX_TM_SM_PRINT_STATS=y timeout 120 "$uct_perf" -t tag_lat \
            -s 100,4095,4096,5000,8192,12345,40960,65536 -n 50 $mode --check > "$log" 2>&1 &&
            grep -Eq '^ +65536 +50 ' "$log" &&
            grep -Eq '; [1-9][0-9]* eager messages sent with streaming stores' "$log"; then
        echo "PASS: tm_perftest tag_lat ${mode:-(one ahead)} --check, streaming stores"
    else
        echo "FAIL: tm_perftest tag_lat ${mode:-(one ahead)} --check, streaming stores"
        tail -5 "$log"; fails=$((fails + 1))
    fi
done
if UCX_TM_SM_COPY=stream UCX_TM_PROTO_OFFLOAD=y timeout 120 "$perf" -x tm_sm -t tag_bw \
        -s 1000,5000,20000 -n 64 -w 8 --check > "$log" 2>&1; then
    echo "PASS: tm_proto_perf tag_bw over tm_sm, streaming stores"
else
    echo "FAIL: tm_proto_perf tag_bw over tm_sm, streaming stores"; tail -5 "$log"; fails=$((fails + 1))
fi
# The floor (-t line_lat), the flag alone and with copies: both processes ran every round trip
# of each size and it reports a positive time for each.
if timeout 60 "$uct_perf" -t line_lat -s 8,4k -n 2000 > "$log" 2>&1 &&
        awk 'NF == 6 && ($1 == 8 || $1 == 4096) && $2 == 2000 && $3 > 0 && $4 > 0 {n++}
             END {exit n != 2}' "$log"; then
    echo "PASS: tm_perftest line_lat"
else
    echo "FAIL: tm_perftest line_lat"; tail -5 "$log"; fails=$((fails + 1))
fi
[ $fails -eq 0 ] || { echo "FAIL: $fails runs"; exit 1; }
