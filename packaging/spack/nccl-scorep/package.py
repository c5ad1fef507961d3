# Spack recipe of nccl-scorep. To use it before it is in Spack's builtin repository:
#
#   spack repo create site-repo            # once, if the site has no repository of its own
#   cp -r packaging/spack/nccl-scorep site-repo/packages/
#   spack repo add site-repo
#   spack install nccl-scorep
#
# Fill in the sha256 of a release with `spack checksum nccl-scorep <version>`.

from spack.package import *


class NcclScorep(CMakePackage):
    """NCCL profiler plugin that writes NCCL's communication events (groups,
    collectives, point-to-point, GPU kernel channels, proxy and network activity) as
    OTF2 traces for Vampir, CUBE4 profiles for Cube, and Score-P regions; with the
    nccl-scorep command-line tool (run, merge, summary, validate, compare)."""

    homepage = "https://github.com/nccl-scorep/nccl-scorep"
    url = "https://github.com/nccl-scorep/nccl-scorep/archive/refs/tags/v0.1.0.tar.gz"
    git = "https://github.com/nccl-scorep/nccl-scorep.git"

    license("Apache-2.0", checked_by="nccl-scorep")

    version("main", branch="main")
    # Replace with the release tarball's checksum (`spack checksum nccl-scorep 0.1.0`).
    version("0.1.0", sha256="0000000000000000000000000000000000000000000000000000000000000000")

    variant(
        "sim",
        default=False,
        description="Build nccl-sim, the CPU-only NCCL stand-in, to run the smoke tests "
        "(spack install --test=root)",
    )
    variant(
        "split_debug",
        default=True,
        description="Install the plugin and the tool stripped, their debug information "
        "in lib/.debug and bin/.debug",
    )
    variant(
        "otf2_link",
        default="static",
        values=("static", "dynamic"),
        multi=False,
        description="Link OTF2 into the plugin (static: isolated from Score-P's OTF2) or "
        "against its shared library",
    )

    depends_on("c", type="build")  # the OTF2 error shim and bindgen's checks
    depends_on("cmake@3.16:", type="build")
    depends_on("rust@1.85:", type="build")
    depends_on("llvm+clang", type="build")  # libclang for bindgen
    depends_on("pkgconfig", type="build")
    depends_on("binutils", type="build", when="+split_debug")  # objcopy
    # OTF2 3.x. Linked statically by default, so it is needed only to build; its
    # libotf2.a must be installed (Spack's otf2 installs it).
    depends_on("otf2@3", type="build", when="otf2_link=static")
    depends_on("otf2@3", type=("build", "link", "run"), when="otf2_link=dynamic")

    def cmake_args(self):
        return [
            self.define("NCCL_SCOREP_OTF2_ROOT", self.spec["otf2"].prefix),
            self.define("NCCL_SCOREP_OTF2_LINK", self.spec.variants["otf2_link"].value),
            self.define_from_variant("NCCL_SCOREP_BUILD_SIM", "sim"),
            self.define_from_variant("NCCL_SCOREP_SPLIT_DEBUG", "split_debug"),
            self.define("BUILD_TESTING", self.spec.satisfies("+sim")),
            self.define(
                "NCCL_SCOREP_CARGO_TARGET_DIR", join_path(self.build_directory, "cargo-target")
            ),
        ]

    def setup_build_environment(self, env):
        # Cargo's downloads stay in the stage, not in the builder's home.
        env.set("CARGO_HOME", join_path(self.stage.path, "cargo-home"))
        env.set("LIBCLANG_PATH", self.spec["llvm"].prefix.lib)

    def setup_run_environment(self, env):
        # What the installed modulefiles set too: NCCL loads the plugin by its path.
        env.set("NCCL_PROFILER_PLUGIN", join_path(self.prefix.lib, "libnccl-profiler-scorep.so"))
        env.prepend_path("LD_LIBRARY_PATH", self.prefix.lib)

    def check(self):
        # The ctest smoke tests need nccl-sim.
        if self.spec.satisfies("+sim"):
            with working_dir(self.build_directory):
                ctest("--output-on-failure")

    def test_version(self):
        """nccl-scorep --version names this version"""
        nccl_scorep = which(join_path(self.prefix.bin, "nccl-scorep"))
        out = nccl_scorep("--version", output=str.split, error=str.split)
        assert f"nccl-scorep {self.spec.version}" in out or self.spec.satisfies("@main")

    def test_doctor(self):
        """nccl-scorep doctor finds the installed plugin through NCCL_PROFILER_PLUGIN"""
        nccl_scorep = which(join_path(self.prefix.bin, "nccl-scorep"))
        plugin = join_path(self.prefix.lib, "libnccl-profiler-scorep.so")
        out = nccl_scorep(
            "doctor",
            output=str.split,
            error=str.split,
            extra_env={"NCCL_PROFILER_PLUGIN": plugin},
        )
        assert plugin in out
