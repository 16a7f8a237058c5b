# Spack package recipe for lockstep (see packaging/README.md).
from spack.package import *


class Lockstep(CMakePackage, CudaPackage):
    """Data-parallel training of convolutional networks across MPI ranks,
    native C++, with a CPU backend and an optional CUDA/cuDNN/NCCL plugin."""

    # lockstep has no public release yet: point `git` at the repository your
    # site builds from (or use `spack dev-build` in a checkout).
    homepage = "https://example.org/lockstep"
    git = "https://example.org/lockstep.git"

    version("main", branch="main")

    variant("native", default=False,
            description="Compile for the build machine's CPU (-march=native)")
    variant("tests", default=False, description="Build the GoogleTest suites")

    depends_on("cmake@3.22:", type="build")
    depends_on("mpi")
    depends_on("eigen@3.3:")
    depends_on("cli11")
    depends_on("nlohmann-json@3:")
    depends_on("zlib-api")
    depends_on("stb")
    depends_on("tomlplusplus")
    depends_on("googletest", type="build", when="+tests")

    # The CUDA plugin (liblockstep_cuda.so): cuDNN for the layers, NCCL for
    # the gradient allreduce, both on the same CUDA.
    depends_on("cudnn@9:", when="+cuda")
    depends_on("nccl", when="+cuda")
    conflicts("cuda_arch=none", when="+cuda",
              msg="name the GPUs to build for, e.g. cuda_arch=80 (A100) or 90 (H100)")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("LOCKSTEP_CUDA", "cuda"),
            self.define_from_variant("LOCKSTEP_NATIVE", "native"),
            self.define_from_variant("LOCKSTEP_TESTS", "tests"),
            self.define("STB_INCLUDE_DIR", spec["stb"].prefix.include),
        ]
        if spec.satisfies("+cuda"):
            args += [
                self.define("CMAKE_CUDA_ARCHITECTURES", spec.variants["cuda_arch"].value),
                self.define("CUDNN_LIBRARY", spec["cudnn"].libs[0]),
                self.define("CUDNN_INCLUDE_DIR", spec["cudnn"].prefix.include),
                self.define("NCCL_LIBRARY", spec["nccl"].libs[0]),
                self.define("NCCL_INCLUDE_DIR", spec["nccl"].prefix.include),
            ]
        return args
