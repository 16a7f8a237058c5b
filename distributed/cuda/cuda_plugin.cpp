// The entry point of liblockstep_cuda.so (distributed/cuda/cuda_plugin_abi.h):
// the CUDA backend and the NCCL communicator behind a versioned C struct.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <cstring>
#include <string>

#include "common/error.h"
#include "distributed/cuda/cuda_plugin_abi.h"
#include "distributed/cuda/nccl_communicator.h"
#include "nn/cuda/cuda_backend.h"
#include "nn/cuda/cuda_device_memory.h"
#include "nn/cuda/precision.h"

namespace {

using namespace lockstep;

void copy_out(const std::string& text, char* out, size_t size) {
  if (out == nullptr || size == 0) return;
  const size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

void versions(LockstepCudaVersions* out) {
  *out = LockstepCudaVersions{};
  if (cudaRuntimeGetVersion(&out->runtime) != cudaSuccess) out->runtime = 0;
  if (cudaDriverGetVersion(&out->driver) != cudaSuccess) out->driver = 0;
  out->cudnn = static_cast<int>(cudnnGetVersion());
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS) {
    out->cublas = major * 10000 + minor * 100 + patch;
  }
  if (ncclGetVersion(&out->nccl) != ncclSuccess) out->nccl = 0;
  cudaGetLastError();  // clear what a missing driver left behind
}

int device_count(char* why, size_t why_size) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();
    copy_out(status != cudaSuccess ? cudaGetErrorString(status) : "the runtime reports 0 devices",
             why, why_size);
    return 0;
  }
  return count;
}

void describe_devices(char* out, size_t size) {
  std::string text = nn::cuda_devices_description();
  // The first line repeats the versions lockstep prints itself.
  if (const size_t eol = text.find('\n'); eol != std::string::npos) {
    text.erase(0, eol + 1);
  } else {
    text.clear();
  }
  copy_out(text, out, size);
}

void* make_backend(int device, int deterministic, const char* precision) {
  const auto parsed = nn::cuda::parse_precision(precision);
  LOCKSTEP_CHECK(parsed.has_value(), "precision ", precision, " passed validation");
  return nn::make_cuda_backend(device, deterministic != 0, *parsed).release();
}

void upload(void* backend, const void* host, void* device, size_t bytes) {
  nn::cuda_upload(*static_cast<nn::Backend*>(backend), host, device, bytes);
}

void* make_nccl_communicator(void* mpi_comm, int device) {
  auto* comm = static_cast<distributed::Communicator*>(mpi_comm);
  return distributed::make_nccl_communicator(*comm, device).release();
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const LockstepCudaPlugin* lockstep_cuda_plugin() {
  static const LockstepCudaPlugin plugin = {
      LOCKSTEP_CUDA_PLUGIN_ABI,
      sizeof(LockstepCudaPlugin),
      LOCKSTEP_VERSION,
      CUDART_VERSION,
      versions,
      device_count,
      describe_devices,
      make_backend,
      upload,
      make_nccl_communicator,
      &nn::cuda_device_memory(),
  };
  return &plugin;
}
