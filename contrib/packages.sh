#!/usr/bin/env bash
# The packages of a release tarball, built, installed, run and removed:
#   1. Debian: unpack, `dpkg-buildpackage -b -us -uc` (debian/, tests not run),
#      lintian (no error or warning that debian/*.lintian-overrides does not
#      explain), install the .debs with apt-get, then from the installed files
#      only: stock ucx_info lists tm_sm with the plugin preloaded and not
#      without (tests/uct/test_ucx_info.sh), the installed layout and uct-tm.pc
#      (tests/integration/test_installed.sh: with rdma-core hidden too), two
#      processes over tm_sm with every payload byte checked (tm_perftest,
#      tm_proto_perf); the libfabric provider of libfabric-uct-tm1 found by
#      Debian's libfabric in its provider directory (`fi_info -p tm`, no
#      FI_PROVIDER_PATH: FI_EP_RDM on tm_sm); rdma-core only in
#      libuct-tm-ib0's Depends; then purge and check that no file of the
#      packages is left;
#   2. RPM: `rpmbuild -tb` the tarball with verbs and the libfabric provider,
#      and without either, each file list checked, libibverbs required by the
#      subpackage uct-tm-ib only, libtm-fi.so in uct-tm-fabric only (rpm's
#      dependency check is off: this is Debian, rpm's database is empty).
# Prints "PASS: ..." / "FAIL: ..." per check (contrib/test.sh counts them).
# Usage: contrib/packages.sh TARBALL WORKDIR   (root: installs and purges)
set -uo pipefail
tarball=$(cd "$(dirname "${1:?usage: packages.sh TARBALL WORKDIR}")" && pwd)/$(basename "$1")
work=${2:?usage: packages.sh TARBALL WORKDIR}
debs=(libuct-tm0 libuct-tm-ib0 libuct-tm-proto0 libuct-tm-dev uct-tm-tools libfabric-uct-tm1)
rc=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; rc=1; }
# verdict NAME CMD...: PASS or FAIL as CMD succeeds.
verdict() {
    local name=$1
    shift
    if "$@"; then pass "$name"; else fail "$name"; return 1; fi
}
# run NAME LOG CMD...: one check, its output in LOG (shown when it fails).
run() {
    local name=$1 log=$2
    shift 2
    if "$@" >"$log" 2>&1; then pass "$name"; else fail "$name"; tail -40 "$log"; fi
}

rm -rf "$work" && mkdir -p "$work/deb" "$work/rpm"
work=$(cd "$work" && pwd)
tar -C "$work/deb" -xzf "$tarball" || { fail "unpack $tarball"; exit 1; }
tree=$(find "$work/deb" -mindepth 1 -maxdepth 1 -type d -name 'uct-tm-*' | head -1)

# --- Debian packages -------------------------------------------------------------------
DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)"
export DEB_BUILD_OPTIONS
run "dpkg-buildpackage -b -us -uc" "$work/deb/build.log" \
    sh -c "cd '$tree' && dpkg-buildpackage -b -us -uc"
changes=$(find "$work/deb" -maxdepth 1 -name 'uct-tm_*.changes' | head -1)
if [[ -n "$changes" ]]; then
    # Every error and warning lintian finds is either fixed or explained in
    # debian/*.lintian-overrides; the info tags are shown.
    if lintian -I --fail-on error,warning "$changes" >"$work/deb/lintian.log" 2>&1; then
        pass "lintian: no error or warning left unexplained"
    else
        fail "lintian"
    fi
    grep -v '^running with root' "$work/deb/lintian.log" | sed 's/^/    lintian: /'
    for d in "${debs[@]}"; do
        echo "    $d: $(dpkg-deb -f "$work"/deb/"${d}"_*.deb Depends)"
        dpkg-deb -c "$work"/deb/"${d}"_*.deb | awk '$1 !~ /^d/ { print "      " $6, $7, $8 }'
    done
    # rdma-core (libibverbs1; ibverbs-providers for libmlx5) is the verbs
    # package's alone among uct-tm's own dependencies (libfabric-uct-tm1
    # depends on libfabric1, which Debian builds with verbs).
    for d in "${debs[@]}"; do
        depends=$(dpkg-deb -f "$work"/deb/"${d}"_*.deb Depends 2>/dev/null)
        if [[ $d == libuct-tm-ib0 ]]; then
            verdict "$d depends on rdma-core (libibverbs1)" grep -q 'libibverbs1' <<<"$depends"
        else
            verdict "$d does not depend on rdma-core" test -z "$(grep -E 'libibverbs|ibverbs-providers' <<<"$depends")"
        fi
    done

    # Not installed yet: the "before" state, then install.
    apt-get purge -y -qq "${debs[@]}" >/dev/null 2>&1 || true
    files=()
    for d in "${debs[@]}"; do files+=("$work"/deb/"${d}"_*.deb); done
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${files[@]}" >"$work/deb/install.log" 2>&1; then
        pass "apt-get install ${debs[*]}"
        for d in "${debs[@]}"; do dpkg -L "$d"; done | sort -u >"$work/deb/installed-files"
        moduledir=$(pkg-config --variable=libdir ucx)/ucx
        plugin=$(pkg-config --variable=plugin uct-tm)
        verdict "plugin $plugin in UCX's module directory $moduledir" \
            test "$plugin" = "$moduledir/libuct_tm.so" -a -e "$moduledir/libuct_tm.so.0"
        # Installed files only: the tools from PATH, the plugin from the module directory.
        run "installed plugin seen by stock ucx_info (preloaded; not listed without)" "$work/deb/ucx_info.log" \
            env PLUGIN="$plugin" TM_VERBS=yes "$tree/tests/uct/test_ucx_info.sh"
        grep -E '^ok: (UCX .* loads no external modules|not listed without)' "$work/deb/ucx_info.log" | sed 's/^/    /'
        run "installed layout, uct-tm.pc" "$work/deb/layout.log" \
            "$tree/tests/integration/test_installed.sh" /
        for mode in "" "--unexpected"; do
            run "installed tm_perftest: two processes over tm_sm, payload checked ${mode:---posted}" \
                "$work/deb/perftest${mode}.log" \
                env -u LD_PRELOAD tm_perftest -x tm_sm -t tag_lat -s 8,6000,300000,2000000 -n 50 --check $mode --no-header
        done
        run "installed tm_proto_perf: two processes, the protocol layer over tm_sm, payload checked" \
            "$work/deb/proto_perf.log" env -u LD_PRELOAD tm_proto_perf -x tm_sm -s 8,6000,300000 -n 50 --check
        # The provider where Debian's libfabric looks (its default provider
        # directory, no FI_PROVIDER_PATH), listing an FI_EP_RDM domain tm_sm.
        provdir=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/libfabric
        verdict "libfabric-uct-tm1: libtm-fi.so in libfabric's provider directory $provdir" \
            grep -qx "$provdir/libtm-fi.so" "$work/deb/installed-files"
        fi_tm_sm_rdm() {
            env -u FI_PROVIDER_PATH -u FI_PROVIDER -u LD_PRELOAD fi_info -p tm >"$work/deb/fi_info.log" 2>&1 &&
                awk '$1 == "domain:" { d = $2 } $1 == "type:" && d == "tm_sm" && $2 == "FI_EP_RDM" { ok = 1 }
                     END { exit !ok }' "$work/deb/fi_info.log"
        }
        verdict "installed provider: fi_info -p tm (no FI_PROVIDER_PATH) lists tm_sm, FI_EP_RDM" fi_tm_sm_rdm ||
            tail -20 "$work/deb/fi_info.log"
        grep -E '^ *(provider|domain|type):' "$work/deb/fi_info.log" | paste -sd' ' | sed 's/  */ /g; s/^/    /'
    else
        fail "apt-get install ${debs[*]}"; tail -20 "$work/deb/install.log"
        : >"$work/deb/installed-files"
    fi
    if apt-get purge -y -qq "${debs[@]}" >"$work/deb/purge.log" 2>&1; then
        pass "apt-get purge ${debs[*]}"
    else
        fail "apt-get purge"; tail -20 "$work/deb/purge.log"
    fi
    # Nothing left: no file the packages listed (directories shared with
    # other packages stay), no package known to dpkg, nothing of ours under /usr
# (but /usr/local, where `make install` puts a build of the tree).
    left=$(while IFS= read -r f; do [[ -e "$f" && ! -d "$f" ]] && echo "$f"; done <"$work/deb/installed-files")
    left+=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${debs[@]}" 2>/dev/null | grep -v ' un *$' || true)
    left+=$(find /usr -path /usr/local -prune -o \( -name 'libuct_tm*' -o -name 'uct-tm*' -o -name 'uct_tm' \
                -o -name 'libtm-fi.so' -o -name 'tm_perftest' -o -name 'tm_proto_perf' -o -name 'tm_soak' -o -name 'tm_mesh' \) -print \
                2>/dev/null | grep -v "^$work" || true)
    verdict "purged: none of the $(wc -l <"$work/deb/installed-files") paths the packages installed is left" \
        test -s "$work/deb/installed-files" -a -z "$left" || echo "left: $left"
fi

# --- RPM ---------------------------------------------------------------------------------
# subpackage NAME BCOND: the RPM uct-tm-NAME is built exactly when --with
# BCOND; its files and Requires in sub_list and sub_requires (empty, and
# false returned, when it is not built).
subpackage() {
    local file has=without
    file=$(find "$top/RPMS" -name "uct-tm-$1-[0-9]*.rpm" | head -1)
    [[ -n $file ]] && has=with
    verdict "rpm --$variant $2: subpackage uct-tm-$1 $variant" test "$has" = "$variant"
    sub_list= sub_requires=
    [[ -n $file ]] || return 1
    sub_list=$(rpm -qlp "$file" 2>/dev/null)
    sub_requires=$(rpm -qp --requires "$file" 2>/dev/null)
    echo "    uct-tm-$1: $(tr '\n' ' ' <<<"$sub_list")"
}
ib_rpm_ok() { grep -q '/ucx/libuct_tm_ib\.so$' <<<"$sub_list" && grep -q libibverbs <<<"$sub_requires"; }
fabric_rpm_ok() {
    grep -qE '/lib(64)?/libfabric/libtm-fi\.so$' <<<"$sub_list" && grep -q 'libfabric\.so\.1' <<<"$sub_requires"
}
# Two builds for the two optional subpackages: --with verbs and fabric (the
# defaults), --without either.
for variant in with without; do
    top=$work/rpm/$variant-verbs
    mkdir -p "$top"
    if rpmbuild -tb --nodeps --"$variant" verbs --"$variant" fabric --define "_topdir $top" "$tarball" \
        >"$top/build.log" 2>&1; then
        pass "rpmbuild -tb --$variant verbs --$variant fabric"
    else
        fail "rpmbuild -tb --$variant verbs --$variant fabric"; tail -30 "$top/build.log"; continue
    fi
    list=$(find "$top/RPMS" -name '*.rpm' ! -name '*debug*' -print0 | xargs -0 -r rpm -qlp 2>/dev/null)
    requires=$(find "$top/RPMS" -name 'uct-tm-[0-9]*.rpm' -print0 | xargs -0 -r rpm -qp --requires 2>/dev/null)
    while IFS= read -r f; do echo "    $variant verbs: $f"; done <<<"$list"
    missing=()
    for f in /ucx/libuct_tm.so.0 /ucx/libuct_tm_component.so /libuct_tm_proto.so.0 /libuct_tm_proto.so \
             /pkgconfig/uct-tm.pc /include/uct_tm/uct_tm_proto.h /bin/tm_perftest /bin/tm_proto_perf \
             /bin/tm_soak /bin/tm_mesh /README.md; do
        grep -q -- "$f\$" <<<"$list" || missing+=("$f")
    done
    verdict "rpm --$variant verbs: file list complete" test ${#missing[@]} -eq 0 ||
        echo "not in the file list: ${missing[*]}"
    # rdma-core is the subpackage uct-tm-ib's alone (with verbs), as UCX's ucx-ib.
    verdict "rpm --$variant verbs: uct-tm does not require libibverbs" \
        test -z "$(grep 'libibverbs' <<<"$requires")" || echo "Requires: $(tr '\n' ' ' <<<"$requires")"
    if subpackage ib verbs; then
        verdict "rpm uct-tm-ib: libuct_tm_ib.so, libibverbs in Requires" ib_rpm_ok ||
            echo "Requires: $(tr '\n' ' ' <<<"$sub_requires")"
    fi
    if subpackage fabric fabric; then
        verdict "rpm uct-tm-fabric: libtm-fi.so in %{_libdir}/libfabric, libfabric.so.1 in Requires" fabric_rpm_ok ||
            echo "Requires: $(tr '\n' ' ' <<<"$sub_requires")"
    fi
    # sub_list is uct-tm-fabric's (empty without it).
    verdict "rpm --$variant fabric: libtm-fi.so in uct-tm-fabric only" \
        test "$(grep -c 'libtm-fi' <<<"$list")" = "$(grep -c 'libtm-fi' <<<"$sub_list")"
    verdict "rpm --$variant verbs: Requires the UCX release built against ($(grep '^ucx ' <<<"$requires" | tr '\n' ' '))" \
        grep -q '^ucx < ' <<<"$requires"
done
exit $rc
