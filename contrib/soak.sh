#!/usr/bin/env bash
# Soak of tm_sm under hostile peers: PAIRS pairs of tm_soak processes move checked tagged
# traffic (eager short / bcopy / zcopy and rendezvous, posted and unexpected, cancelled
# receives, decoy receives cancelled with and without force, every byte verified) while
# this driver SIGKILLs, SIGSTOPs and SIGCONTs processes at random and restarts the killed
# ones, for DURATION seconds. Then it resumes everything, lets the pairs reconnect for
# QUIET seconds, asks every process to finish (SIGTERM: each drains, checks that every
# message its partner sent arrived exactly once) and prints the report:
#   messages moved, errors reported (peers killed: expected),
#   and the fields due to be zero: hangs, lost and duplicated completions, corrupt
#   payloads, cancel anomalies, unfinished drains, crashes, leaked /dev/shm entries, fds.
# Exit status 1 if any of those is not zero.
#
#   contrib/soak.sh [DURATION]          (default 60 s)
# Environment:
#   PAIRS=8            process pairs (16 processes)
#   TOOLS=DIR          where tm_soak is (default: build/src/tools of this tree)
#   STOP_MAX=2         longest SIGSTOP, seconds (each stop lasts 0.1 s .. STOP_MAX)
#   EVENT_EVERY=0.5    mean seconds between two random events (kill or stop)
#   KILL_SHARE=40      percent of events that are SIGKILLs (the rest SIGSTOPs)
#   HANG_S=20          a process that delivers nothing for this long while it and its
#                      partner run (neither stopped, killed or restarted) hangs
#   QUIET=8            seconds at the end without events, before the finish
#   FINISH_S=30        a process not gone this long after SIGTERM hangs
#   NAMED=mixed        UCX_TM_SM_NAMED_SEGMENTS for the pairs: mixed (even pairs y),
#                      y or n
#   SOAK_DIR=DIR       keep the processes' logs there (default: a temporary directory,
#                      kept when the soak fails)
#   SEED=N             the driver's random seed
#   HOSTILE=1          also run tm_soak_hostile: a same-user process that tries to
#                      truncate the pairs' memfd segments and writes forged rendezvous
#                      answers (FIN, RTR, pull requests, NACKs) into their FIFOs,
#                      HOSTILE_RATE=50 attacks a second; HOSTILE=0: no hostile process.
#                      Reported: forged answers, truncations refused; truncated must be 0,
#                      and with memfd pairs (NAMED other than y) some attack must have run.
#                      It also spoils split copies in progress (claim storms, withheld
#                      pieces): tm_soak --attacked then counts a transfer failed with
#                      UCS_ERR_IO_ERROR or UCS_ERR_TIMED_OUT on both sides as attacked, not lost
set -u
duration=${1:-${DURATION:-60}}
pairs=${PAIRS:-8}
src=$(cd "$(dirname "$0")/.." && pwd)
tools=${TOOLS:-$src/build/src/tools}
stop_max=${STOP_MAX:-2}
event_every=${EVENT_EVERY:-0.5}
kill_share=${KILL_SHARE:-40}
hang_s=${HANG_S:-20}
quiet=${QUIET:-8}
finish_s=${FINISH_S:-30}
named=${NAMED:-mixed}
hostile=${HOSTILE:-1}
hostile_rate=${HOSTILE_RATE:-50}
hostile_pid=
RANDOM=${SEED:-$$}
soak=$tools/tm_soak
[ -x "$soak" ] || { echo "soak: $soak not found (build first, or set TOOLS)"; exit 2; }
(( pairs >= 1 && duration > quiet )) || { echo "soak: need PAIRS >= 1 and DURATION > QUIET ($quiet)"; exit 2; }
dir=${SOAK_DIR:-$(mktemp -d /tmp/tm_soak.XXXXXX)}
mkdir -p "$dir"
uid=$(id -u)
slots=$((2 * pairs))

now() { echo "${EPOCHREALTIME/[.,]/}"; }            # microseconds
us() { awk -v s="$1" 'BEGIN { printf "%d", s * 1000000 }'; }
hang_us=$(us "$hang_s") stop_max_us=$(us "$stop_max") finish_us=$(us "$finish_s")
event_every_us=$(us "$event_every")

declare -a pid state since stop_until last_val last_change incarnation
kills=0 stops=0 restarts=0 hangs=0 crashes=0
killed_delivered=0 killed_sent=0 killed_errors=0
: >"$dir/pids"
log() { printf '%s %s\n' "$(date +%T.%N | cut -c1-12)" "$*" >>"$dir/events"; }

shm_list() { ls /dev/shm 2>/dev/null | grep "^uct_tm\.$uid\." | sort; }
shm_list >"$dir/shm.before"

# alive PID: exists and is not a zombie (no fork: the driver competes with 2 * PAIRS
# spinning processes for the CPU)
alive() {
    local st
    read -r st 2>/dev/null <"/proc/$1/stat" || return 1
    [[ ${st##*) } != Z* ]]
}

start() {
    local s=$1 env=()
    case $named in
        y) env=(UCX_TM_SM_NAMED_SEGMENTS=y) ;;
        n) env=(UCX_TM_SM_NAMED_SEGMENTS=n) ;;
        *) (( (s / 2) % 2 == 0 )) && env=(UCX_TM_SM_NAMED_SEGMENTS=y) || env=(UCX_TM_SM_NAMED_SEGMENTS=n) ;;
    esac
    incarnation[s]=$(( ${incarnation[s]:-0} + 1 ))
    rm -f "$dir/prog.$s"
    local attacked=()
    [ "$hostile" = 1 ] && attacked=(--attacked)
    env "${env[@]}" nice -n 5 "$soak" --slot "$s" --partner $((s ^ 1)) --dir "$dir" "${attacked[@]}" \
        >>"$dir/out.$s" 2>>"$dir/err.$s" &
    pid[s]=$!
    echo "${pid[s]}" >>"$dir/pids"
    state[s]=run
    last_val[s]=-1
    touch_pair "$s"
    log "start slot $s pid ${pid[s]} (incarnation ${incarnation[s]})"
}

# An event on slot S or its partner: the stall clock of both starts again.
touch_pair() {
    local t
    t=$(now)
    last_change[$1]=$t
    last_change[$(($1 ^ 1))]=$t
}

# The counters of an incarnation that will not print its final line.
bank() {
    local d=0 snt=0 e=0
    [ -r "$dir/prog.$1" ] && read -r d snt e <"$dir/prog.$1"
    killed_delivered=$((killed_delivered + ${d:-0}))
    killed_sent=$((killed_sent + ${snt:-0}))
    killed_errors=$((killed_errors + ${e:-0}))
}

# A process that exited on its own (not killed by us) crashed.
reap_crashed() {
    local s rc
    for ((s = 0; s < slots; s++)); do
        [ "${state[s]}" = dead ] && continue
        alive "${pid[s]}" && continue
        wait "${pid[s]}"; rc=$?
        crashes=$((crashes + 1))
        echo "soak: CRASH: slot $s pid ${pid[s]} exited with status $rc on its own; its stderr:" | tee -a "$dir/events"
        tail -5 "$dir/err.$s" | sed 's/^/    /'
        bank "$s"
        state[s]=dead since[s]=$(now)
    done
}

check_stalls() {
    local s t v p
    t=$(now)
    for ((s = 0; s < slots; s++)); do
        v=
        [ -r "$dir/prog.$s" ] && read -r v _ <"$dir/prog.$s"
        if [ -n "$v" ] && [ "$v" != "${last_val[s]}" ]; then
            last_val[s]=$v last_change[s]=$t
            continue
        fi
        p=$((s ^ 1))
        [ "${state[s]}" = run ] && [ "${state[p]}" = run ] || continue
        if (( t - last_change[s] > hang_us )); then
            hangs=$((hangs + 1))
            echo "soak: HANG: slot $s (pid ${pid[s]}) delivered nothing for $hang_s s while it and its partner" \
                 "(slot $p, pid ${pid[p]}) ran; delivered ${v:-?}" | tee -a "$dir/events"
            last_change[s]=$t
        fi
    done
}

event() {
    local s=$((RANDOM % slots)) t
    t=$(now)
    [ "${state[s]}" = run ] || return
    if (( RANDOM % 100 < kill_share )); then
        kill -KILL "${pid[s]}" 2>/dev/null
        wait "${pid[s]}" 2>/dev/null
        bank "$s"
        state[s]=dead since[s]=$t
        kills=$((kills + 1))
        log "kill slot $s pid ${pid[s]}"
    else
        kill -STOP "${pid[s]}" 2>/dev/null
        state[s]=stop
        stop_until[s]=$((t + 100000 + RANDOM * (stop_max_us - 100000) / 32768))
        stops=$((stops + 1))
        log "stop slot $s pid ${pid[s]} for $(( (stop_until[s] - t) / 1000 )) ms"
    fi
    touch_pair "$s"
}

# Resumes stopped processes whose time came (all with "all"), restarts the killed ones.
resume() {
    local s t
    t=$(now)
    for ((s = 0; s < slots; s++)); do
        if [ "${state[s]}" = stop ] && { [ "${1:-}" = all ] || (( t >= stop_until[s] )); }; then
            kill -CONT "${pid[s]}" 2>/dev/null
            state[s]=run
            touch_pair "$s"
            log "cont slot $s pid ${pid[s]}"
        elif [ "${state[s]}" = dead ] && { [ "${1:-}" = all ] || (( t - since[s] >= 300000 )); }; then
            restarts=$((restarts + 1))
            start "$s"
        fi
    done
}

cleanup() {
    local s
    for ((s = 0; s < slots; s++)); do
        [ -n "${pid[s]:-}" ] && { kill -CONT "${pid[s]}"; kill -KILL "${pid[s]}"; } 2>/dev/null
    done
    [ -n "$hostile_pid" ] && kill -KILL "$hostile_pid" 2>/dev/null
}
trap 'cleanup; exit 130' INT TERM HUP

echo "soak: $pairs pairs, ${duration} s (events every ${event_every} s on average, ${kill_share}% kills," \
     "stops up to ${stop_max} s; quiet ${quiet} s), NAMED_SEGMENTS=$named, logs in $dir"
for ((s = 0; s < slots; s++)); do start "$s"; done
if [ "$hostile" = 1 ]; then
    [ -x "$tools/tm_soak_hostile" ] || { echo "soak: $tools/tm_soak_hostile not found"; cleanup; exit 2; }
    "$tools/tm_soak_hostile" "$dir" "$slots" "$hostile_rate" "$RANDOM" >"$dir/out.hostile" 2>"$dir/err.hostile" &
    hostile_pid=$!
    log "hostile pid $hostile_pid"
fi
t0=$(now)
chaos_end=$((t0 + $(us "$duration") - $(us "$quiet")))
next_event=$((t0 + RANDOM * 2 * event_every_us / 32768))
while (( $(now) < chaos_end )); do
    sleep 0.1
    reap_crashed
    # events at uniformly random intervals of mean EVENT_EVERY, however late this loop runs
    while (( $(now) >= next_event )); do
        event
        next_event=$((next_event + RANDOM * 2 * event_every_us / 32768))
    done
    resume
    check_stalls
done
log "quiet"
resume all
# QUIET seconds from now, however late the chaos loop ended: on a loaded host
# its catch-up once left half a second, and a process started in it was
# told to finish before it had set up its handlers.
quiet_end=$(($(now) + $(us "$quiet")))
while (( $(now) < quiet_end )); do
    sleep 0.1
    reap_crashed
    resume
    check_stalls
done

# The finish: every process drains and reports.
log "finish"
hostile_line="not run" hostile_truncated=0
if [ -n "$hostile_pid" ]; then
    kill -TERM "$hostile_pid" 2>/dev/null
    wait "$hostile_pid" 2>/dev/null
    hostile_line=$(grep '^tm_soak_hostile ' "$dir/out.hostile" || echo "no report (crashed?)")
    hostile_truncated=$(sed -n 's/.* truncated=\([0-9]*\).*/\1/p' <<<"$hostile_line")
    hostile_truncated=${hostile_truncated:-1}
    # It attacks the memfd pairs only: with some of those, an attack-free run
    # means it saw no segment (no addresses, /proc closed), not that all held.
    if [ "$named" != y ] && ! grep -Eq 'forged=[1-9]|truncations_refused=[1-9]' <<<"$hostile_line"; then
        echo "soak: the hostile neighbour attacked nothing: $hostile_line"
        hostile_truncated=$((hostile_truncated + 1))
    fi
fi
for ((s = 0; s < slots; s++)); do
    [ "${state[s]}" = run ] && kill -TERM "${pid[s]}" 2>/dev/null
done
deadline=$(($(now) + finish_us))
for ((s = 0; s < slots; s++)); do
    [ "${state[s]}" = run ] || continue
    while alive "${pid[s]}" && (( $(now) < deadline )); do sleep 0.1; done
    if alive "${pid[s]}"; then
        hangs=$((hangs + 1))
        echo "soak: HANG: slot $s (pid ${pid[s]}) still runs $finish_s s after SIGTERM" | tee -a "$dir/events"
        kill -KILL "${pid[s]}" 2>/dev/null
        wait "${pid[s]}" 2>/dev/null
        bank "$s"
    else
        wait "${pid[s]}"; rc=$?
        if [ "$rc" -ne 0 ]; then
            crashes=$((crashes + 1))
            echo "soak: CRASH: slot $s pid ${pid[s]} exited with status $rc at the finish" | tee -a "$dir/events"
            tail -5 "$dir/err.$s" | sed 's/^/    /'
        fi
    fi
    state[s]=done
done

# /dev/shm entries of our processes left behind (named segments: uct_tm.<uid>.<pid>.<n>)
shm_list >"$dir/shm.after"
leaked_shm=0
while read -r f; do
    p=$(cut -d. -f3 <<<"$f")
    grep -qx "$p" "$dir/pids" && { leaked_shm=$((leaked_shm + 1)); echo "soak: LEAKED /dev/shm/$f"; }
done < <(comm -13 "$dir/shm.before" "$dir/shm.after")

# the final lines: key=value
cat "$dir"/out.* 2>/dev/null | grep '^tm_soak ' >"$dir/final"
sum() { awk -v k="$1" '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) s += kv[2] } } END { print s + 0 }' "$dir/final"; }
reports=$(grep -c . "$dir/final")
delivered=$(($(sum delivered) + killed_delivered))
sent=$(($(sum sent) + killed_sent))
errors=$(($(sum errors_reported) + killed_errors))
lost=$(sum lost) dups=$(sum duplicates) corrupt=$(sum corrupt) cancel_bad=$(sum decoy_bad)
unfinished=$(sum unfinished) fds=$(sum fd_leak) stale=$(sum stale) sessions=$(sum sessions)
bytes=$(sum bytes) attacked_recvs=$(sum attacked_recvs) attacked_sends=$(sum attacked_sends)
# every process's stderr lines that name a problem
grep -h 'CORRUPT\|DUPLICATE\|LOST\|DECOY\|CANCEL\|MISSED\|UNFINISHED\|FD \|CONNECT' "$dir"/err.* 2>/dev/null | sort | uniq -c | sort -rn | head -20

cat <<EOF
soak report: $pairs pairs ($slots processes), ${duration} s, NAMED_SEGMENTS=$named
  events:                        $kills kills, $stops stops, $restarts restarts; $reports final reports
  messages moved:                $delivered delivered and checked ($sent sent; final reports: $(awk -v b="$bytes" 'BEGIN { printf "%.1f GB", b / 1e9 }'))
  how (final reports):           $(sum expected) posted, $(sum unexp_eager) unexpected eager, $(sum unexp_rndv) unexpected rendezvous;
                                 receives cancelled: $(sum cancelled) CANCELED, $(sum cancel_late) matched first;
                                 decoys cancelled: $(sum decoy_cancel) non-forced, $(sum decoy_force) forced
  sessions (incarnation pairs):  $sessions; stale messages dropped: $stale
  errors reported:               $errors (peers killed: expected)
  hangs:                         $hangs
  lost completions:              $lost
  duplicated completions:        $dups
  corrupt payloads:              $corrupt
  cancel anomalies:              $cancel_bad
  unfinished drains:             $unfinished
  crashes:                       $crashes
  leaked /dev/shm entries:       $leaked_shm
  leaked fds:                    $fds
  hostile neighbour:             ${hostile_line#tm_soak_hostile }
  segments it truncated or idle: $hostile_truncated
  transfers its split attacks failed (errors on both sides, not losses): $attacked_recvs receives, $attacked_sends sends
EOF
bad=$((hangs + lost + dups + corrupt + cancel_bad + unfinished + crashes + leaked_shm + fds + hostile_truncated))
if [ "$bad" -ne 0 ]; then
    echo "soak: FAIL (logs kept in $dir)"
    exit 1
fi
echo "soak: PASS"
[ -z "${SOAK_DIR:-}" ] && rm -rf "$dir"
exit 0
