#!/usr/bin/env python3
"""The Spack package (contrib/spack/packages/uct-tm/package.py), loaded with
stubs of Spack's package API, against configure.ac and the tree: its version
is AC_INIT's (and debian/changelog's); its UCX range the compat headers'
(uct_tm/compat/ucx_<major>_<minor>.h); hwloc, GoogleTest and Google Benchmark
the minimums configure checks; variant verbs the --with-verbs option and
rdma-core; variant fabric the libfabric provider (--with-libfabric,
libfabric, FI_PROVIDER_PATH); every configure option it passes one
configure.ac declares; and setup_run_environment sets UCX_PLUGIN_PATH for
UCX 1.22 only."""
import os
import re
import sys
import types

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def read(*parts):
    with open(os.path.join(SRC, *parts)) as f:
        return f.read()


# --- stubs of spack.package: directives record what the class declares ---------
declared = {"version": [], "variant": [], "depends_on": []}


def directive(name):
    def record(*args, **kwargs):
        declared[name].append((args, kwargs))
    return record


class Spec:
    """Just enough of a concrete spec: satisfies('^ucx@M.m:') and spec['ucx']."""

    def __init__(self, ucx, variants):
        self.ucx = ucx
        self.variants = variants
        self.prefix = "/opt/uct-tm"

    def satisfies(self, constraint):
        m = re.fullmatch(r"\^ucx@(\d+)\.(\d+):", constraint)
        if m:
            return self.ucx >= (int(m.group(1)), int(m.group(2)))
        m = re.fullmatch(r"\+(\w+)", constraint)
        if m:
            return self.variants.get(m.group(1), False)
        raise AssertionError("constraint the stub does not know: " + constraint)

    def __getitem__(self, name):
        return types.SimpleNamespace(prefix="/opt/" + name)

    def __contains__(self, name):
        return name == "ucx"


class Prefix(str):
    @property
    def lib(self):
        return Prefix(os.path.join(self, "lib"))


class AutotoolsPackage:
    def __init__(self, spec):
        self.spec = spec
        self.prefix = Prefix(spec.prefix)

    def with_or_without(self, name):
        return ["--with-" + name if self.spec.variants.get(name) else "--without-" + name]


class Env:
    def __init__(self):
        self.prepended = []

    def prepend_path(self, var, path):
        self.prepended.append((var, path))


api = types.ModuleType("spack.package")
api.AutotoolsPackage = AutotoolsPackage
api.version = directive("version")
api.variant = directive("variant")
api.depends_on = directive("depends_on")
api.join_path = os.path.join
api.Executable = lambda path: (lambda *a, **k: None)
api.__all__ = ["AutotoolsPackage", "version", "variant", "depends_on", "join_path", "Executable"]
sys.modules["spack"] = types.ModuleType("spack")
sys.modules["spack.package"] = api

path = os.path.join(SRC, "contrib", "spack", "packages", "uct-tm", "package.py")
namespace = {"__name__": "spack_pkg_uct_tm", "__file__": path}
exec(compile(read("contrib", "spack", "packages", "uct-tm", "package.py"), path, "exec"), namespace)
UctTm = namespace["UctTm"]
check(issubclass(UctTm, AutotoolsPackage), "UctTm is an AutotoolsPackage")

# --- versions --------------------------------------------------------------------
configure_ac = read("configure.ac")
ac_version = re.search(r"AC_INIT\(\[uct-tm\],\s*\[([^\]]+)\]", configure_ac).group(1)
versions = [args[0] for args, _ in declared["version"]]
check(ac_version in versions, "package version %s is AC_INIT's (%s)" % (versions, ac_version))
deb_version = re.match(r"uct-tm \(([^-)]+)", read("debian", "changelog")).group(1)
check(deb_version == ac_version, "debian/changelog's upstream version %s is AC_INIT's" % deb_version)
check("Version:        @PACKAGE_VERSION@" in read("uct-tm.spec.in"), "uct-tm.spec.in takes configure's version")

# --- dependencies ------------------------------------------------------------------
deps = {}
for args, kwargs in declared["depends_on"]:
    name = re.match(r"[\w-]+", args[0]).group(0)
    deps[name] = (args[0], kwargs)


def dep_range(name):
    spec = deps.get(name, ("", {}))[0]
    m = re.fullmatch(r"[\w-]+@([\d.]*):([\d.]*)", spec)
    return m.groups() if m else None


compat = sorted(tuple(map(int, m.groups()))
                for m in (re.fullmatch(r"ucx_(\d+)_(\d+)\.h", f)
                          for f in os.listdir(os.path.join(SRC, "uct_tm", "compat"))) if m)
want_ucx = ("%d.%d" % compat[0], "%d.%d" % compat[-1])
check(dep_range("ucx") == want_ucx,
      "depends_on ucx@%s:%s, the compat headers' range (got %s)" % (want_ucx + (deps.get("ucx", ("none",))[0],)))
check("uct-tm supports UCX %s to %s" % want_ucx in configure_ac, "configure.ac states the same UCX range")
check(want_ucx[0] == "1.13", "the issue's floor: ucx@1.13:")
for name, pc in (("hwloc", "hwloc"), ("googletest", "gtest_main"), ("benchmark", "benchmark")):
    m = re.search(r"PKG_CHECK_MODULES\(\[\w+\],\s*\[%s >= ([\d.]+)\]" % re.escape(pc), configure_ac)
    want = m.group(1) if m else None
    got = dep_range(name)
    check(want is not None and got is not None and got[0] == want,
          "depends_on %s@%s: as configure checks %s >= %s" % (name, got and got[0], pc, want))
for name in ("googletest", "benchmark"):
    types_ = deps.get(name, ("", {}))[1].get("type", ())
    check("test" in types_, "%s is a test dependency (type %s)" % (name, types_))
check(deps.get("rdma-core", ("", {}))[1].get("when") == "+verbs", "rdma-core only with +verbs")
check("PKG_CHECK_MODULES([VERBS], [libibverbs]" in configure_ac, "configure's verbs are rdma-core's libibverbs")

# --- variants and configure options -------------------------------------------------
variants = [args[0] for args, _ in declared["variant"]]
check(variants == ["verbs", "fabric"], "variants %s: verbs, fabric" % variants)
check(deps.get("libfabric", ("", {}))[1].get("when") == "+fabric", "libfabric only with +fabric")
ac_with = set(re.findall(r"AC_ARG_WITH\(\[([\w-]+)\]", configure_ac))
ac_enable = set(re.findall(r"AC_ARG_ENABLE\(\[([\w-]+)\]", configure_ac))
for verbs, fabric in ((True, True), (False, False), (True, False)):
    for ucx in ((1, 13), (1, 22)):
        pkg = UctTm(Spec(ucx, {"verbs": verbs, "fabric": fabric}))
        args = pkg.configure_args()
        for arg in args:
            m = re.match(r"--(with|without|enable|disable)-([\w-]+)", arg)
            known = m and (m.group(2) in (ac_with if m.group(1) in ("with", "without") else ac_enable))
            check(bool(known), "configure_args %s is a configure.ac option" % arg)
        check(("--with-verbs" if verbs else "--without-verbs") in args,
              "%sverbs passes %s" % ("+" if verbs else "~", "--with-verbs" if verbs else "--without-verbs"))
        env = Env()
        pkg.setup_run_environment(env)
        moduledir = os.path.join(pkg.prefix, "lib", "ucx")
        check("--with-ucx-moduledir=" + moduledir in args, "the plugin goes to %s" % moduledir)
        provdir = os.path.join(pkg.prefix, "lib", "libfabric")
        if fabric:
            check("--with-libfabric=/opt/libfabric" in args and "--with-libfabric-provdir=" + provdir in args,
                  "+fabric: --with-libfabric=<libfabric>, the provider goes to %s" % provdir)
        else:
            check("--without-libfabric" in args, "~fabric passes --without-libfabric")
        fabric_env = [("FI_PROVIDER_PATH", provdir)] if fabric else []
        check([e for e in env.prepended if e[0] == "FI_PROVIDER_PATH"] == fabric_env,
              "%sfabric: FI_PROVIDER_PATH %s" % ("+" if fabric else "~", fabric_env or "left alone"))
        ucx_env = [e for e in env.prepended if e[0] == "UCX_PLUGIN_PATH"]
        if ucx >= (1, 22):
            check(ucx_env == [("UCX_PLUGIN_PATH", moduledir)],
                  "UCX %d.%d: UCX_PLUGIN_PATH gets %s" % (ucx + (moduledir,)))
        else:
            check(ucx_env == [], "UCX %d.%d reads no UCX_PLUGIN_PATH: left alone" % ucx)

print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
