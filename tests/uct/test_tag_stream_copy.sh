#!/usr/bin/env bash
# The UCT tag conformance suite and the multi-process suite again, with every tm_sm sender
# writing eager messages of 4 KiB and more with streaming stores (UCX_TM_SM_COPY=stream):
# the path `auto` takes in the host's slow mode must keep the whole contract (matched and
# unexpected, bcopy packed aside, fragments, receivers with smaller descriptors, peers
# killed). tm_sm's counters (UCX_TM_SM_PRINT_STATS) show the streamed sends happened.
set -u
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail=0
for t in test_tag_conformance test_tag_multiproc; do
    if UCX_TM_SM_COPY=stream UCX_TM_SM_PRINT_STATS=y "./$t" --gtest_brief=1 >"$log" 2>&1; then
        echo "PASS: $t with streaming stores"
    else
        echo "FAIL: $t with streaming stores"; grep -v '^tm_sm iface' "$log" | tail -20; fail=1
    fi
    if ! grep -Eq '; [1-9][0-9]* eager messages sent with streaming stores' "$log"; then
        echo "FAIL: $t: no tm_sm interface sent a message with streaming stores"; fail=1
    fi
done
exit $fail
