#!/usr/bin/env bash
# Runs a command against real verbs: boots Debian's stock kernel under QEMU
# (software emulation: KVM here is PVM, which cannot boot it), adds a
# Soft-RoCE device rxe0 on the guest's loopback, and runs the command in a
# chroot of the host's root filesystem (9p, read-only), so the build tree and
# its libraries are used as they are.
#
# With RXE_HOSTS=2 it boots two guests instead, host1 and host2, each a host
# of its own: its own kernel, shared memory and hostname, address 10.9.0.N on
# eth0 and a Soft-RoCE device rxe0 on eth0, the two eths on one virtual
# network (RoCE v2 between them). The command runs on host1; host2 runs
# contrib/rxe_host.sh's agent, through which host1 runs commands there
# (`contrib/rxe_host.sh host2 COMMAND`). Two guests, not two network
# namespaces in one: Soft-RoCE in Debian 12's kernel (6.1) opens its UDP
# socket and routes in the initial namespace only, so a device on a link in
# another namespace neither sends nor receives.
#
#   contrib/rxe_qemu.sh COMMAND [ARGS...]
#
# Exit status: the command's, or 77 (automake's SKIP) with a message when
# QEMU, the kernel package or its modules cannot be had, or 1 when the guest
# never ran the command.
#
# Environment:
#   RXE_WORK=/var/tmp/uct-tm-rxe  cache: unpacked kernel, initramfs, logs
#   RXE_TIMEOUT=900               seconds for one boot, command included
#   RXE_BOOT_TIMEOUT=180          seconds for the guest to reach the command
#   RXE_BOOT_TRIES=2              boots tried when the guest stalls before the
#                                 command starts (slow emulated runs happen)
#   RXE_MEM=2048 RXE_SMP=2        guest size
#   RXE_CPU=qemu64                the guest's CPU model: the x86-64 baseline, which the
#                                 emulation runs 25-35% faster than `max` (the protocol
#                                 layer's suites over tm_rc: 24-26 s against 32-34 s)
#   RXE_VERBOSE=0                 1: print the whole guest console
#   RXE_HOSTS=1                   1, or 2 for two hosts (above)
set -uo pipefail

work=${RXE_WORK:-/var/tmp/uct-tm-rxe}
timeout_s=${RXE_TIMEOUT:-900}
boot_timeout=${RXE_BOOT_TIMEOUT:-180}
tries=${RXE_BOOT_TRIES:-2}
mem=${RXE_MEM:-2048}
smp=${RXE_SMP:-2}
verbose=${RXE_VERBOSE:-0}
hosts=${RXE_HOSTS:-1}
[[ $hosts == 1 || $hosts == 2 ]] || { echo "rxe_qemu: RXE_HOSTS must be 1 or 2" >&2; exit 2; }

skip() { echo "rxe_qemu: SKIP: $*" >&2; exit 77; }
log() { echo "rxe_qemu: $*" >&2; }

[[ $# -gt 0 ]] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
[[ $(uname -m) == x86_64 ]] || skip "needs an x86_64 host"

# ---- host packages (not rdma-core: it drags in udev and systemd) ----------------------
packages=(qemu-system-x86 busybox-static kmod cpio iproute2 ibverbs-providers)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    [[ $(id -u) -eq 0 ]] || skip "not root and missing ${missing[*]}"
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
        >/dev/null 2>&1 || skip "cannot install ${missing[*]}"
fi
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not found"
[[ -x /bin/busybox ]] || skip "busybox-static not found"

# ---- kernel: Debian's current one, unpacked (not installed) ---------------------------
mkdir -p "$work" || skip "cannot create $work"
# Concurrent runs share the cache: one prepares it at a time.
exec 8>"$work/lock"
flock 8
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
if [[ -z $kpkg ]]; then
    apt-get update -qq >/dev/null 2>&1
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
fi
if [[ -z $kpkg ]]; then
    # offline: reuse an unpacked kernel if there is one
    kpkg=$(ls -d "$work"/kroot/boot/vmlinuz-* 2>/dev/null | head -1 | sed 's|.*/vmlinuz-|linux-image-|')
fi
[[ -n $kpkg ]] || skip "no Debian kernel package (apt-cache depends linux-image-amd64 found none)"
kver=${kpkg#linux-image-}
kroot=$work/kroot
if [[ ! -f $kroot/boot/vmlinuz-$kver || ! -f $kroot/lib/modules/$kver/modules.dep ]]; then
    log "unpacking $kpkg"
    rm -rf "$work/kroot" "$work/debs"
    mkdir -p "$work/debs" "$kroot"
    (cd "$work/debs" && apt-get download -q "$kpkg" >/dev/null 2>&1) || skip "cannot download $kpkg"
    dpkg-deb -x "$work"/debs/"$kpkg"_*.deb "$kroot" || skip "cannot unpack $kpkg"
    rm -rf "$work/debs"
    depmod -b "$kroot" "$kver" || skip "depmod failed for $kver"
fi

# ---- initramfs: busybox, rdma_rxe and its dependencies, 9p ------------------------------
initrd=$work/initrd-$kver.cpio.gz
if [[ ! -f $initrd || $0 -nt $initrd ]]; then
    root=$work/initramfs
    rm -rf "$root"
    mkdir -p "$root"/{bin,proc,sys,dev,host,etc}
    cp /bin/busybox "$root/bin/busybox"
    # crc32_generic: rxe allocates the "crc32" hash when a link is added, and the
    # kernel has no modprobe to call in here to load it on demand. rdma_ucm: the
    # rdma_cm device UCX's connection manager opens; veth: links between network
    # namespaces; virtio_net: the link between the guests of RXE_HOSTS=2.
    mods=""
    for m in crc32_generic rdma_rxe rdma_ucm veth virtio_net 9pnet_virtio 9p virtio_pci; do
        deps=$(modprobe -d "$kroot" -S "$kver" --show-depends "$m" 2>/dev/null | awk '/^insmod/{print $2}')
        [[ -n $deps ]] || skip "kernel $kver has no module $m"
        for p in $deps; do
            rel=${p#"$kroot"}
            mkdir -p "$root$(dirname "$rel")"
            cp "$p" "$root$rel"
            case " $mods " in *" $rel "*) ;; *) mods="$mods $rel" ;; esac
        done
    done
    echo "$mods" >"$root/etc/modules.order"
    cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /etc/modules.order); do insmod "$m" || echo "rxe-guest: insmod $m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000 hostroot /host || echo "rxe-guest: 9p mount failed"
# A second view of the host root that the writable tmpfs mounts below do not cover.
mkdir -p /orig; mount -o bind /host /orig
mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -t devtmpfs dev /host/dev
mount -t tmpfs run /host/run; mount -t tmpfs tmp /host/tmp; mkdir -p /host/dev/shm
mount -t tmpfs shm /host/dev/shm; mount -t tmpfs vartmp /host/var/tmp
# A tree under /tmp or /var/tmp (a CI checkout, say) stays visible (read-only)
# inside the guest's own /tmp.
cwd=$(sed -n 's/.*rxe.cwd=\([^ ]*\).*/\1/p' /proc/cmdline)
for base in /tmp /var/tmp; do
    case "$cwd/" in
    "$base"/?*/*)
        rest=${cwd#"$base"/}; top=${rest%%/*}
        mkdir -p "/host$base/$top" && mount -o bind "/orig$base/$top" "/host$base/$top" ||
            echo "rxe-guest: cannot show $base/$top in the guest"
        ;;
    esac
done
cp /guest.sh /host/run/guest.sh
# iproute2's rdma tool comes from the host
host=$(sed -n 's/.*rxe.host=\([0-9]*\).*/\1/p' /proc/cmdline)
if [ -n "$host" ]; then
    hostname "host$host"
    chroot /host /bin/sh -c "ip link set lo up; ip addr add 10.9.0.$host/24 dev eth0 && ip link set eth0 up &&
        rdma link add rxe0 type rxe netdev eth0 || echo 'rxe-guest: network setup failed'"
else
    chroot /host /bin/sh -c 'ip link set lo up; rdma link add rxe0 type rxe netdev lo || echo "rxe-guest: rdma link add failed"'
fi
echo "RXE-GUEST-READY"
chroot /host /bin/sh -c 'cd "$(sed -n "s/.*rxe.cwd=\([^ ]*\).*/\1/p" /proc/cmdline)" 2>/dev/null; exec /bin/bash /run/guest.sh'
echo "RXE-GUEST-EXIT: $?"
poweroff -f
INIT
    chmod +x "$root/init"
    (cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$initrd.tmp" &&
        mv "$initrd.tmp" "$initrd"
    rm -rf "$root"
fi

flock -u 8

# ---- the command, as a script appended to the initramfs ------------------------------------
# (a second cpio archive concatenated to the first is unpacked over it)
run=$(mktemp -d "$work/run.XXXXXX")
trap 'rm -rf "$run"; [[ -n ${qpid:-} ]] && kill "$qpid" 2>/dev/null; [[ -n ${peerpid:-} ]] && kill "$peerpid" 2>/dev/null' EXIT

# initrd_with OUT COMMAND...: the cached initramfs with COMMAND as /guest.sh
initrd_with() {
    local out=$1 dir
    shift
    dir=$(mktemp -d "$run/cmd.XXXXXX")
    {
        # The guest runs in the host's root filesystem: the host's PATH and
        # LD_LIBRARY_PATH name the same programs there (a UCX under test first).
        printf 'export PATH=%q\n' "$PATH:/usr/local/sbin:/usr/sbin:/sbin"
        echo 'export HOME=/tmp'
        for v in $(compgen -e | grep -E '^(UCX_|TM_|GTEST_|PLUGIN$|LD_PRELOAD$|LD_LIBRARY_PATH$)'); do
            printf 'export %s=%q\n' "$v" "${!v}"
        done
        printf '%q ' "$@"
        echo
    } >"$dir/guest.sh"
    (cd "$dir" && echo guest.sh | cpio -o -H newc --quiet | gzip -1 >"$dir/cmd.cpio.gz")
    cat "$initrd" "$dir/cmd.cpio.gz" >"$out"
}

# Without a writable share the guest reports its exit status on the console.
cwd=$(pwd)
[[ $cwd == *' '* ]] && cwd=/

# qemu_guest N CONSOLE INITRD: boots one guest in the background (N=0: the
# single-guest mode, no network); its pid in $!
net_port=$((20000 + RANDOM % 20000 * 2))
qemu_guest() {
    local n=$1 console=$2 image=$3 net=(-nic none) append=""
    if ((n > 0)); then
        local other=$((3 - n))
        net=(-netdev "dgram,id=n0,local.type=inet,local.host=127.0.0.1,local.port=$((net_port + n)),remote.type=inet,remote.host=127.0.0.1,remote.port=$((net_port + other))"
            -device "virtio-net-pci,netdev=n0,mac=52:54:00:00:09:0$n")
        append=" rxe.host=$n"
    fi
    timeout "$timeout_s" qemu-system-x86_64 -machine q35,accel=tcg -cpu "${RXE_CPU:-qemu64}" -m "$mem" -smp "$smp" \
        -kernel "$kroot/boot/vmlinuz-$kver" -initrd "$image" \
        -append "console=ttyS0 panic=-1 loglevel=3 rdinit=/init rxe.cwd=$cwd$append" \
        -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
        "${net[@]}" -display none -serial stdio -monitor none -no-reboot </dev/null >"$console" 2>&1 &
}

initrd_with "$run/initrd.gz" "$@"
self=0
if ((hosts == 2)); then
    # host2 serves host1's commands until host1's command is done
    self=1
    initrd_with "$run/initrd-peer.gz" "$(cd "$(dirname "$0")" && pwd)/rxe_host.sh" serve
    log "booting host2 (agent), console kept in $work/console-host2.log"
    qemu_guest 2 "$run/console-host2.log" "$run/initrd-peer.gz"
    peerpid=$!
fi
peer_log() {
    ((hosts == 2)) || return 0
    cp "$run/console-host2.log" "$work/console-host2.log" 2>/dev/null
    if [[ ${1:-} == tail ]]; then
        log "host2's console, last lines:"
        tr -d '\r' <"$run/console-host2.log" | tail -20 >&2
    fi
}

for ((try = 1; try <= tries; ++try)); do
    console=$run/console.log
    log "booting $kver (try $try/$tries, timeout ${timeout_s}s), console kept in $work/console-last.log"
    start=$(date +%s)
    : >"$console"
    qemu_guest "$self" "$console" "$run/initrd.gz"
    qpid=$!
    # A boot reaches the command in seconds; one that has not after
    # RXE_BOOT_TIMEOUT is a stalled emulation: end it and boot again.
    while kill -0 "$qpid" 2>/dev/null; do
        if ! grep -q 'RXE-GUEST-READY' "$console" && (($(date +%s) - start > boot_timeout)); then
            kill "$qpid" 2>/dev/null
            break
        fi
        sleep 1
    done
    wait "$qpid"
    qrc=$?
    elapsed=$(($(date +%s) - start))
    cp "$console" "$work/console-last.log" 2>/dev/null
    if [[ $verbose == 1 ]]; then cat "$console"; fi
    if grep -q 'RXE-GUEST-EXIT:' "$console"; then
        rc=$(sed -n 's/.*RXE-GUEST-EXIT: \([0-9]*\).*/\1/p' "$console" | tail -1)
        [[ $verbose == 1 ]] || sed -n '/RXE-GUEST-READY/,/RXE-GUEST-EXIT/p' "$console" | sed '1d;$d' | tr -d '\r'
        log "guest command exited $rc after ${elapsed}s"
        if [[ $rc == 0 ]]; then peer_log; else peer_log tail; fi
        exit "$rc"
    fi
    if grep -q 'RXE-GUEST-READY' "$console"; then
        sed -n '/RXE-GUEST-READY/,$p' "$console" | tr -d '\r' | tail -50
        log "the command did not finish within ${timeout_s}s (qemu rc $qrc)"
        peer_log tail
        exit 1
    fi
    log "the guest stalled before the command (qemu rc $qrc after ${elapsed}s); last lines:"
    tail -5 "$console" >&2
done
peer_log tail
exit 1
