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
#include "distributed/cuda/plugin_text.h"
#include "nn/cuda/cuda_backend.h"
#include "nn/cuda/cuda_device_memory.h"
#include "nn/cuda/math_types.h"

namespace {

using namespace lockstep;

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
    distributed::copy_c_string(
        status != cudaSuccess ? cudaGetErrorString(status) : "the runtime reports 0 devices", why,
        why_size);
    return 0;
  }
  return count;
}

void describe_devices(char* out, size_t size) {
  distributed::copy_c_string(distributed::device_lines(nn::cuda_devices_description()), out, size);
}

int device_pci_bus_id(int device, char* out, size_t size) {
  char id[64] = {};
  if (cudaDeviceGetPCIBusId(id, static_cast<int>(sizeof(id)), device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  distributed::copy_c_string(id, out, size);
  return 1;
}

void* make_backend(int device, int deterministic, int precision) {
  const auto p = static_cast<nn::Precision>(precision);
  LOCKSTEP_CHECK(nn::value_of(nn::kPrecisionNames, p).has_value(), "precision ", precision,
                 " is not an nn::Precision");
  return nn::make_cuda_backend(device, deterministic != 0, p).release();
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
      device_pci_bus_id,
      make_backend,
      upload,
      make_nccl_communicator,
      &nn::cuda_device_memory(),
  };
  return &plugin;
}
