# Spack package for uct-tm. From the top of the tree or an unpacked release
# tarball:  spack repo add contrib/spack && spack dev-build uct-tm@0.1.0
# (tests/integration/test_spack_package.py checks this file against
# configure.ac.)

import os

from spack.package import *


class UctTm(AutotoolsPackage):
    """UCT tag-matching transports for UCX: tm_sm (shared memory, software
    tag matching) and, with rdma-core, tm_rc and tm_dc (verbs), loaded into
    UCX as components tm (libuct_tm_component.so) and tm_ib
    (libuct_tm_ib.so, +verbs: the one library linking rdma-core); the
    protocol layer libuct_tm_proto and the tools (tm_perftest,
    tm_proto_perf); with +fabric, the libfabric provider tm (libtm-fi.so)."""

    # Not published yet: build from the tree or an unpacked release tarball
    # with `spack dev-build uct-tm@0.1.0` run there.
    version("0.1.0")

    variant(
        "verbs",
        default=False,
        description="Build the verbs transports tm_rc and tm_dc (rdma-core): libuct_tm_ib.so",
    )

    variant(
        "fabric",
        default=False,
        description="Build the libfabric provider tm (libtm-fi.so, FI_EP_RDM over the protocol layer)",
    )

    # The release tarball carries configure; a git tree runs autogen.sh.
    depends_on("autoconf", type="build")
    depends_on("automake", type="build")
    depends_on("libtool", type="build")
    depends_on("pkgconfig", type="build")

    # uct-tm mirrors UCX's private layouts, one compat header per release
    # (uct_tm/compat/ucx_1_13.h .. ucx_1_22.h).
    depends_on("ucx@1.13:1.22")
    # NUMA placement (configure builds without it too, with no placement).
    depends_on("hwloc@2.0:")
    depends_on("rdma-core", when="+verbs")
    # Needs 1.17's headers (fi_ops_domain.endpoint2); built and tested
    # against 1.17 only, so no newer release is promised.
    depends_on("libfabric@1.17", when="+fabric")
    # The suite only (`spack install --test=root`): configure builds the
    # package without them.
    depends_on("googletest@1.10:", type=("build", "test"))
    depends_on("benchmark@1.5:", type=("build", "test"))

    def autoreconf(self, spec, prefix):
        if not os.path.exists("configure"):
            Executable("./autogen.sh")()

    def configure_args(self):
        spec = self.spec
        args = [
            "--with-ucx={0}".format(spec["ucx"].prefix),
            "--without-fuzzer",
            # the plugin next to the package's own libraries, found through
            # UCX_PLUGIN_PATH (setup_run_environment)
            "--with-ucx-moduledir={0}".format(join_path(self.prefix.lib, "ucx")),
        ]
        args += self.with_or_without("verbs")
        if spec.satisfies("+fabric"):
            # the provider in the package's lib/libfabric, found through
            # FI_PROVIDER_PATH (setup_run_environment): Spack's libfabric
            # looks in its own prefix only
            args += [
                "--with-libfabric={0}".format(spec["libfabric"].prefix),
                "--with-libfabric-provdir={0}".format(join_path(self.prefix.lib, "libfabric")),
            ]
        else:
            args.append("--without-libfabric")
        return args

    def setup_run_environment(self, env):
        # UCX 1.22 loads lib<framework>_<name>.so.0 from each UCX_PLUGIN_PATH
        # directory; earlier releases read no such variable and take the
        # plugin by LD_PRELOAD or a link (pkg-config uct-tm).
        if self.spec.satisfies("^ucx@1.22:"):
            env.prepend_path("UCX_PLUGIN_PATH", join_path(self.prefix.lib, "ucx"))
        # FI_PROVIDER_PATH, once set, replaces libfabric's default provider
        # directory: providers built into libfabric itself (not as -dl
        # plugins) are unaffected.
        if self.spec.satisfies("+fabric"):
            env.prepend_path("FI_PROVIDER_PATH", join_path(self.prefix.lib, "libfabric"))
