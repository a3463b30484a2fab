#!/bin/sh
# test_fabric again over the provider's other domains on this host: posix,
# tcp, and the combined tm_sm,tcp (the default run is over tm_sm; the
# Soft-RoCE guest runs it over tm_dc, tests/ib/test_rxe_proto.sh). The
# suites that name their own domains (FabricInfo, FabricFork, FabricPeerDeath) ran already;
# FabricPeerDeath's env/ cases run here over posix and tcp.
status=0
for domain in posix tcp tm_sm,tcp; do
    echo "== test_fabric over $domain"
    TEST_FABRIC_DOMAIN=$domain ./test_fabric --gtest_brief=1 \
        --gtest_filter='-FabricInfo.*:domains/FabricFork.*:domains/FabricPeerDeath.*' || status=1
done
exit $status
