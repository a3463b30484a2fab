#!/usr/bin/env bash
# The benchmark tools fail fast when their peer dies: tm_perftest (tag_bw, tag_lat, eager and
# rendezvous sizes) and tm_proto_perf run between their two processes (a fork), one of them is
# SIGKILLed mid-run, and the survivor must exit within BOUND seconds, non-zero when we can see
# its status (the parent), with a "peer lost" message naming what happened.
# Also SIGSTOP: a peer that stops answering makes the survivor give up after --timeout.
# TOOLS: the directory holding tm_perftest and tm_proto_perf (default: this build's src/tools).
set -u
[ "${INTEGRATION_TESTS:-yes}" != no ] || { echo "SKIP: INTEGRATION_TESTS=no"; exit 77; }
tools=${TOOLS:?set TOOLS to the directory of tm_perftest and tm_proto_perf}
bound=${BOUND:-30}
for t in tm_perftest tm_proto_perf; do
    [ -x "$tools/$t" ] || { echo "FAIL: $tools/$t not found"; exit 1; }
done
tmp=$(mktemp -d)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail=0

# alive PID: the process exists and is not a zombie.
alive() {
    [ -r "/proc/$1/stat" ] && ! sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | grep -q '^Z'
}

# stacks PID: where a hung process's threads are (when gdb is installed: CI installs it).
stacks() {
    command -v gdb >/dev/null || { echo "    (no gdb: no stacks)"; return; }
    timeout 60 gdb -p "$1" -batch -ex "thread apply all bt" 2>&1 | grep '^#\|^Thread' | sed 's/^/    /'
}

# child_of PID TOOL: the forked peer of TOOL started as PID. PID may still be libtool's
# wrapper script (which runs commands of its own before it execs the program): wait for
# the exec, then for the program's child.
child_of() {
    local c
    for _ in $(seq 200); do
        if [[ $(readlink "/proc/$1/exe") == */"$2" ]]; then
            for c in $(pgrep -P "$1"); do
                [[ $(readlink "/proc/$c/exe") == */"$2" ]] && { echo "$c"; return; }
            done
        fi
        sleep 0.05
    done
}

# case NAME VICTIM SIGNAL TOOL ARGS...: runs TOOL, waits for its first output (both sides
# connected and measuring), sends SIGNAL to VICTIM (sender = the parent, receiver = the
# forked child), and checks that the other process exits within BOUND seconds.
case_() {
    local name=$1 victim=$2 sig=$3 tool=$4 out parent child target survivor t0 elapsed rc=
    shift 4
    out=$tmp/$(tr ' /' '__' <<<"$name").log
    "$tools/$tool" "$@" >"$out" 2>&1 &
    parent=$!
    pids+=("$parent")
    child=$(child_of "$parent" "$tool")
    pids+=("$child")
    if [ -z "$child" ]; then
        echo "FAIL: $name: no forked peer"; sed 's/^/    /' "$out" | tail -5; fail=1
        kill -9 "$parent" 2>/dev/null; wait "$parent" 2>/dev/null; return
    fi
    # the header row comes (flushed) once the two are connected; then let messages flow
    for _ in $(seq 200); do grep -q 'size' "$out" && break; sleep 0.05; done
    grep -q 'size' "$out" || { echo "FAIL: $name: no header in 10 s (not connected?)"; fail=1
        kill -9 "$parent" "$child" 2>/dev/null; wait "$parent" 2>/dev/null; return; }
    sleep 1
    if [ "$victim" = sender ]; then target=$parent survivor=$child; else target=$child survivor=$parent; fi
    if ! alive "$target" || ! alive "$survivor"; then
        echo "FAIL: $name: the run ended before the kill (make it longer)"; sed 's/^/    /' "$out" | tail -5
        fail=1; kill -9 "$parent" "$child" 2>/dev/null; wait "$parent" 2>/dev/null; return
    fi
    kill -s "$sig" "$target"
    t0=$(date +%s.%N)
    while alive "$survivor"; do
        if (( $(date +%s) - ${t0%.*} > bound )); then break; fi
        sleep 0.1
    done
    elapsed=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if alive "$survivor"; then
        echo "FAIL: $name: the surviving $([ "$victim" = sender ] && echo receiver || echo sender)" \
             "still runs ${bound} s after the $sig (hang)"
        sed 's/^/    /' "$out" | tail -5
        stacks "$survivor"
        fail=1
        kill -9 "$parent" "$child" 2>/dev/null; wait "$parent" 2>/dev/null
        return
    fi
    kill -9 "$target" 2>/dev/null   # a stopped victim
    wait "$parent"; rc=$?
    if [ "$victim" = receiver ] && [ "$rc" -eq 0 ]; then
        echo "FAIL: $name: the sender exited 0 after losing its receiver"; fail=1; return
    fi
    if ! grep -q "peer lost" "$out"; then
        echo "FAIL: $name: no 'peer lost' message"; sed 's/^/    /' "$out" | tail -5; fail=1; return
    fi
    echo "ok: $name: survivor exited in $elapsed s$([ "$victim" = receiver ] && echo " with $rc"):" \
         "$(grep -m1 'peer lost' "$out")"
}

long=100000000
for victim in receiver sender; do
    case_ "tm_perftest tag_bw 8 B, $victim killed" $victim KILL tm_perftest -t tag_bw -s 8 -n $long
    case_ "tm_perftest tag_bw 1 MiB, $victim killed" $victim KILL tm_perftest -t tag_bw -s 1m -n $long
    case_ "tm_perftest tag_lat 8 B, $victim killed" $victim KILL tm_perftest -t tag_lat -s 8 -n $long
    case_ "tm_perftest tag_lat 256 KiB unexpected, $victim killed" $victim KILL \
        tm_perftest -t tag_lat -s 256k -U -n $long
    case_ "tm_proto_perf tag_bw 8 B, $victim killed" $victim KILL tm_proto_perf -t tag_bw -s 8 -n $long
    case_ "tm_proto_perf tag_lat 1 MiB, $victim killed" $victim KILL tm_proto_perf -t tag_lat -s 1m -n $long
done
# A stopped peer: the survivor gives up after its --timeout without progress.
case_ "tm_perftest tag_bw 8 B, receiver stopped" receiver STOP \
    tm_perftest -t tag_bw -s 8 -n $long --timeout 3
case_ "tm_proto_perf tag_lat 8 B, receiver stopped" receiver STOP \
    tm_proto_perf -t tag_lat -s 8 -n $long --timeout 3
exit $fail
