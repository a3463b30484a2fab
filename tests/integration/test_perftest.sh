#!/usr/bin/env bash
# UCX's own ucx_perftest (UCP tag API) over tm_sm: tag_lat, tag_bw and tag_sync_lat with
# UCX_TLS=tm_sm and tm_sm,self, eager and rendezvous sizes, short runs. Checks that the
# "Final:" line has sane numbers and, from tm_sm's counters (UCX_TM_SM_PRINT_STATS=y),
# that tm_sm carried the messages and that UCP posted receives into its tag list; and, from
# UCX_PROTO_INFO=y, that UCP's protocol engine chose tm_sm's tag-offload protocols.
# PLUGIN: the libuct_tm.so to load (preloaded before UCX 1.22, through UCX_PLUGIN_PATH from
# 1.22: ucx_perftest with no preload at all).
set -u
[ "${INTEGRATION_TESTS:-yes}" != no ] || { echo "SKIP: INTEGRATION_TESTS=no"; exit 77; }
plugin=${PLUGIN:?set PLUGIN to the libuct_tm.so to preload}
command -v ucx_perftest >/dev/null || { echo "SKIP: ucx_perftest not installed (apt-get install ucx-utils)"; exit 77; }
[ -e "$plugin" ] || { echo "FAIL: plugin $plugin not found"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../common/ucx_release.sh"
release=$(ucx_release)
loading=$(plugin_loading "$plugin")
echo "loading the plugin with $loading (UCX $release)"
# UCP selects protocols with its v2 engine by default from 1.16 (UCX_PROTO_ENABLE).
if ucx_release_at_least 1 16; then v2_default=yes; else v2_default=no; fi

# run TLS TEST SIZE ITERS [VAR=VALUE...]: one server + client pair; output in $tmp.
run() {
    local tls=$1 test=$2 size=$3 iters=$4 port
    shift 4
    port=$((20000 + RANDOM % 20000))
    env "$@" "$loading" UCX_TLS="$tls" UCX_TM_SM_PRINT_STATS=y \
        timeout 60 ucx_perftest -p "$port" -t "$test" -s "$size" -n "$iters" >"$tmp/server" 2>&1 &
    local server=$!
    : >"$tmp/client"
    for _ in $(seq 20); do
        sleep 0.2
        env "$@" "$loading" UCX_TLS="$tls" UCX_TM_SM_PRINT_STATS=y \
            timeout 60 ucx_perftest 127.0.0.1 -p "$port" -t "$test" -s "$size" -n "$iters" \
            >"$tmp/client" 2>&1
        grep -q '^Final:' "$tmp/client" && break
        grep -q 'Connection refused\|connect' "$tmp/client" || break
    done
    wait "$server"
    echo "server exit $?" >>"$tmp/server"
}

# check NAME MIN_POSTED [MIN_SPLIT [MAX_POSTED]]: asserts on the last run's output (MIN_SPLIT:
# split copies, matched receives and get_zcopy together).
check() {
    local name=$1 min_posted=$2 min_split=${3:-0} max_posted=${4:-} final stats received posted split_gets split_recvs
    final=$(grep '^Final:' "$tmp/client")
    # Final: iterations lat50 lat_avg lat_overall bw_avg bw_overall rate_avg rate_overall
    # The *_avg columns are of the last report interval, which a loaded machine can leave
    # empty (one round trip per time slice): inf latency, zero rate. The percentile and the
    # overall figures are numbers, the latencies positive (bandwidth and rate of a latency
    # test can print as 0.00 when each round trip takes a time slice).
    if ! awk -v n="$iters" 'NF == 9 && $2 == n {
            for (i = 3; i <= 9; i++) {
                if (i % 2 == 0 && i > 3 && $i == "inf") continue
                if ($i !~ /^[0-9.]+$/ || ((i == 3 || i == 5) && $i + 0 <= 0)) exit 1
            }
            sane = 1 }
            END { exit !sane }' <<<"$final"; then
        echo "FAIL: $name: no sane Final line"; sed 's/^/    /' "$tmp/client" "$tmp/server" | tail -30; fail=1; return
    fi
    grep -q '^server exit 0$' "$tmp/server" || { echo "FAIL: $name: server failed"; tail -20 "$tmp/server"; fail=1; return; }
    # (UCX's log on stdout and the counters on stderr can share a line)
    stats=$(cat "$tmp/client" "$tmp/server" | grep -o 'tm_sm iface [0-9]* (pid.*')
    if [ "$(grep -c . <<<"$stats")" -ne 2 ]; then
        echo "FAIL: $name: expected tm_sm counters from both processes, got: $stats"; fail=1; return
    fi
    received=$(sed -n 's/.*: \([0-9]*\) messages received.*/\1/p' <<<"$stats" | awk '{s += $1} END {print s + 0}')
    posted=$(sed -n 's/.*tag list: \([0-9]*\) posted.*/\1/p' <<<"$stats" | awk '{s += $1} END {print s + 0}')
    if [ "$received" -lt "$iters" ]; then
        echo "FAIL: $name: tm_sm received $received messages for $iters iterations"; fail=1; return
    fi
    if [ "$posted" -lt "$min_posted" ]; then
        echo "FAIL: $name: $posted receives posted into tm_sm, expected at least $min_posted"; fail=1; return
    fi
    if [ -n "$max_posted" ] && [ "$posted" -gt "$max_posted" ]; then
        echo "FAIL: $name: $posted receives posted into tm_sm, expected at most $max_posted"; fail=1; return
    fi
    # shared with the sender: split CMA copies, or pipelined ones (RNDV_COPY=auto)
    split_gets=$(sed -n 's/.*; \([0-9]*\) gets split with their sender, \([0-9]*\) pipelined.*/\1 \2/p' <<<"$stats" | awk '{s += $1 + $2} END {print s + 0}')
    split_recvs=$(sed -n 's/.* cma, \([0-9]*\) split, \([0-9]*\) pipelined.*/\1 \2/p' <<<"$stats" | awk '{s += $1 + $2} END {print s + 0}')
    if [ $((split_gets + split_recvs)) -lt "$min_split" ]; then
        echo "FAIL: $name: $split_recvs receives and $split_gets get_zcopy shared with the sender (split or pipelined), expected at least $min_split"; fail=1; return
    fi
    echo "ok: $name: $(awk '{print "lat50", $3, "us, bw", $6, "MB/s, rate", $9}' <<<"$final"); tm_sm received $received, posted $posted, shared receives $split_recvs, shared gets $split_gets"
}

# tag_bw 1 MiB: UCP's v1 protocols send with tm_sm's tag_rndv_zcopy; a rendezvous that meets
# its posted receive is copied with the sender's help there, one that arrives first is fetched
# with get_zcopy, which tm_sm shares the same way (how many go which way depends on timing).
# RNDV_COPY=pipelined: with auto, whole CMA reads may be measured faster and taken. The v2
# engine sends messages this large as a software RTS over tm_sm's tag_rndv_request and reads
# the registered buffer: no tm_sm rendezvous slot to split.
if [ $v2_default = no ]; then split_1m=10; else split_1m=0; fi
for tls in tm_sm tm_sm,self; do
    for t in "tag_lat 8 2000 0" "tag_lat 16384 1000 500" "tag_lat 1048576 50 25" \
             "tag_bw 8 5000 0" "tag_bw 65536 500 0" \
             "tag_bw 1048576 50 0 $split_1m UCX_TM_SM_RNDV_COPY=pipelined" \
             "tag_sync_lat 8 1000 0" "tag_sync_lat 16384 500 250"; do
        set -- $t
        iters=$3
        run "$tls" "$1" "$2" "$3" ${6:+"$6"}
        check "UCX_TLS=$tls $1 $2 B${6:+ $6}" "$4" "${5:-0}"
    done
done
# UCP posts to tm_sm's tag list only receives of at least max(UCX_TM_THRESH, min_recv):
# tm_sm reports SEG_SIZE + 1 (UCX_TM_SM_RECV_MIN=auto), so a 4 KiB receive stays in UCP's
# queue (a message that fits one descriptor is copied once either way), unless RECV_MIN=0.
iters=1000
run tm_sm tag_lat 4096 1000
check "tag_lat 4 KiB, RECV_MIN=auto: UCP keeps the receives" 0 0 0
run tm_sm tag_lat 4096 1000 UCX_TM_SM_RECV_MIN=0
check "tag_lat 4 KiB, RECV_MIN=0: UCP posts them to tm_sm" 500
# UCP's software rendezvous over tag offload (UCX_TM_SW_RNDV=y): the receiver GETs from
# rndv_cb into a receive it posted to tm_sm (docs/using-with-ucx.md, "Rendezvous paths"),
# with UCP's default scheme and with the PUT scheme.
iters=50
run tm_sm tag_lat 1048576 50 UCX_TM_SW_RNDV=y
check "UCX_TM_SW_RNDV=y tag_lat 1 MiB" 25
run tm_sm tag_lat 1048576 50 UCX_TM_SW_RNDV=y UCX_RNDV_SCHEME=put_zcopy
check "UCX_TM_SW_RNDV=y UCX_RNDV_SCHEME=put_zcopy tag_lat 1 MiB" 25
# The protocols UCP chose for tagged sends over tm_sm (UCX_PROTO_INFO=y, printed by the v2
# engine; before 1.16 it is not the default and UCX_PROTO_ENABLE=y turns it on): only tm_sm's
# tag-offload protocols on tm_sm, and no eager protocol over active messages.
# proto_check NAME DESCRIPTION...: every DESCRIPTION is a row of a tagged-send table with
# tm_sm as its transport.
proto_check() {
    local name=$1 rows desc ok=1
    shift
    # rows "| range | description | transport/device |" of the run's tables (tag_lat
    # prints only the tables of tagged sends)
    rows=$(sed -n 's/^.*| *[0-9][0-9KMG.]*\(\.\.[0-9a-zKMG.]*\)\? *| \(.*[^ ]\) *| *\([^ |]*\) *|$/\2|\3/p' \
           "$tmp/client")
    if [ -z "$rows" ]; then
        echo "FAIL: $name: no protocol table in UCX_PROTO_INFO's output"
        sed 's/^/    /' "$tmp/client" | tail -20; fail=1; return
    fi
    for desc in "$@"; do
        grep -q "^$desc|tm_sm/" <<<"$rows" || { echo "FAIL: $name: no '$desc' over tm_sm"; ok=0; }
    done
    if grep -E "^(eager short|eager copy-in|eager zero-copy${forbid_multi_frag:+|multi-frag eager})" <<<"$rows"; then
        echo "FAIL: $name: UCP chose eager protocols over active messages (above)"; ok=0
    fi
    if grep -v '|tm_sm/' <<<"$rows"; then
        echo "FAIL: $name: a tagged-send protocol on another transport than tm_sm (above)"; ok=0
    fi
    [ $ok = 1 ] || { printf '    %s\n' "$rows"; fail=1; return; }
    echo "ok: $name: $(sort -u <<<"$rows" | cut -d'|' -f1 | paste -sd, -)"
}
# proto_at NAME SIZE DESCRIPTION [TABLES]: in every table (or those whose title, "tagged message
# by ucp_tag_send*(fast-completion) from host memory" and alike, matches the regex TABLES), the
# row whose range holds SIZE is DESCRIPTION.
proto_at() {
    local name=$1 size=$2 want=$3 tables=${4:-.} got which
    got=$(sed -n 's/^[^|]*\(|.*|\) *$/\1/p' "$tmp/client" | awk -v x="$size" -v tables="$tables" '
            function bytes(v) { if (v == "inf") return 2^62; if (v ~ /K$/) return v * 1024
                                if (v ~ /M$/) return v * 2^20; if (v ~ /G$/) return v * 2^30; return v + 0 }
            /tagged message by/ { keep = ($0 ~ tables); next }
            keep && match($0, /^\| *[0-9][0-9KMG]*(\.\.[0-9a-zKMG]*)? *\|/) {
                split($0, f, "|"); range = f[2]; gsub(/ /, "", range); desc = f[3]
                gsub(/^ +| +$/, "", desc); split(range, r, "\\.\\.")
                lo = bytes(r[1]); hi = (r[2] == "") ? lo : bytes(r[2])
                if (x >= lo && x <= hi) print desc }' | sort -u)
    which=$([ "$tables" = . ] && echo "every table" || echo "the tables matching '$tables'")
    if [ "$got" = "$want" ]; then
        echo "ok: $name: $size B goes by '$want' in $which"
    else
        echo "FAIL: $name: $size B goes by '$(paste -sd/ <<<"$got")', expected '$want' in $which"; fail=1
    fi
}
# v1_choice NAME RNDV [VAR=VALUE...]: UCP's protocols v1 (the default before 1.16) print their
# thresholds per endpoint configuration (ucx_info -e); every tagged send (plain, nbr, sync)
# must go rendezvous from RNDV on and be eager below it.
v1_choice() {
    local name=$1 want=$2 out got op
    shift 2
    out=$(env "$@" "$loading" UCX_TLS=tm_sm ucx_info -e -u t 2>&1)
    for op in tag_send tag_send_nbr tag_send_sync; do
        got=$(sed -n "s/^# *$op: .*<egr\/[a-z]*>\.\.\([0-9]*\)\.\.<rndv>.*/\1/p" <<<"$out")
        if [ "$got" != "$want" ]; then
            echo "FAIL: $name: $op eager below '${got:-?}' B, expected $want"
            grep 'tag_send' <<<"$out" | sed 's/^/    /'; fail=1; return
        fi
    done
    echo "ok: $name: eager below $want B, then rendezvous ($(grep -m1 ' tag_send:' <<<"$out" | sed 's/^# *//'))"
}
if [ $v2_default = no ]; then
    # tm_sm's fragmented eager path up to EAGER_MAX (256 KiB) is faster than a rendezvous;
    # v1 puts the threshold no higher than max_bcopy, hence BCOPY_MAX (auto: EAGER_MAX here)
    v1_choice "UCX $release v1 thresholds" 262144
    v1_choice "UCX $release v1 thresholds with BCOPY_MAX=SEG_SIZE" 8192 UCX_TM_SM_BCOPY_MAX=8k
fi
iters=200
if [ $v2_default = yes ]; then
    forbid_multi_frag=yes   # no active-message eager at all: the tag rendezvous follows
    run tm_sm tag_lat 8 200 UCX_PROTO_INFO=y
    check "UCX $release protocol info, tag_lat 8 B" 0
    proto_check "UCX $release v2 protocols" "eager offloaded short" "eager offloaded zero-copy" \
        "rendezvous tag offload"
    # tm_sm's short send is its cheapest: its estimates must make UCP see that
    proto_at "UCX $release v2 protocols" 8 "eager offloaded short"
    # and its eager zero-copy beats UCP's rendezvous over it to 48 KiB (1.7-2.7x at 16-32 KiB
    # on UCX 1.22.0): UCP must not charge the receiver's copy twice. (Sends flagged "multi"
    # are priced by throughput, where UCP's rendezvous from 22 KiB is a fair choice.)
    for size in 16384 32768 49152; do
        proto_at "UCX $release v2 protocols" $size "eager offloaded zero-copy" 'send\*( |\(fast)'
    done
    # fast-completion sends (Open MPI's MPI_Send) price no receiver copy: eager to EAGER_MAX
    proto_at "UCX $release v2 protocols" 131072 "eager offloaded zero-copy" 'send\*\(fast'
    proto_at "UCX $release v2 protocols" 300000 "rendezvous tag offload" 'send\*\(fast'
else
    # Before 1.16 the v2 engine has no tag-offload rendezvous: above tm_sm's eager sizes it may
    # take UCP's multi-fragment eager over active messages (1.15 does).
    forbid_multi_frag=
    run tm_sm tag_lat 8 200 UCX_PROTO_INFO=y UCX_PROTO_ENABLE=y
    check "UCX $release protocol info (UCX_PROTO_ENABLE=y), tag_lat 8 B" 0
    proto_check "UCX $release v2 protocols (UCX_PROTO_ENABLE=y)" "eager offloaded short" \
        "eager offloaded zero-copy"
    proto_at "UCX $release v2 protocols (UCX_PROTO_ENABLE=y)" 8 "eager offloaded short"
    proto_at "UCX $release v2 protocols (UCX_PROTO_ENABLE=y)" 32768 "eager offloaded zero-copy"
fi
exit $fail
