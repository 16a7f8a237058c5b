/* The CUDA plugin's interface (liblockstep_cuda.so): what `lockstep` finds
 * with dlsym after dlopen. Plain C, no CUDA headers, so app/ includes it in a
 * build that links no CUDA library.
 *
 *   const LockstepCudaPlugin* p = lockstep_cuda_plugin();
 *   p->abi_version == LOCKSTEP_CUDA_PLUGIN_ABI, else the plugin is refused.
 *
 * The factories return C++ objects behind opaque pointers (ownership passes
 * to the caller); the plugin and the binary must come from the same lockstep
 * build (lockstep_version equal), since the objects' classes are shared.
 * They throw lockstep::Error like any lockstep function. Everything else
 * never throws. Bump LOCKSTEP_CUDA_PLUGIN_ABI whenever this struct changes. */
#ifndef LOCKSTEP_DISTRIBUTED_CUDA_CUDA_PLUGIN_ABI_H_
#define LOCKSTEP_DISTRIBUTED_CUDA_CUDA_PLUGIN_ABI_H_

#include <stddef.h>
#include <stdint.h>

#define LOCKSTEP_CUDA_PLUGIN_ABI 3
#define LOCKSTEP_CUDA_PLUGIN_ENTRY "lockstep_cuda_plugin"

#ifdef __cplusplus
extern "C" {
#endif

/* Versions of the libraries the plugin loaded, as each library encodes them
 * (runtime/driver 13000 = 13.0, cuDNN 91900 = 9.19.0, NCCL 22803 = 2.28.3,
 * cuBLAS 130100 = 13.1.0); 0: unavailable (driver 0: no driver). Each is
 * read without a GPU. */
typedef struct LockstepCudaVersions {
  int runtime;
  int driver;
  int cudnn;
  int cublas;
  int nccl;
} LockstepCudaVersions;

typedef struct LockstepCudaPlugin {
  uint32_t abi_version;         /* LOCKSTEP_CUDA_PLUGIN_ABI it was built with */
  uint32_t size;                /* sizeof(LockstepCudaPlugin) */
  const char* lockstep_version; /* LOCKSTEP_VERSION it was built with */
  int built_runtime_version;    /* CUDART_VERSION it was built with */
  void (*versions)(LockstepCudaVersions* out);
  /* Visible devices; 0 with the runtime's reason in why (NUL-terminated). */
  int (*device_count)(char* why, size_t why_size);
  /* One line per visible device ("cuda:0 NVIDIA H100 (sm_90, 79.1 GiB, 132
   * SMs)"), NUL-terminated, cut at size. */
  void (*describe_devices)(char* out, size_t size);
  /* Visible device `device`'s PCI bus id ("0000:41:00.0", NUL-terminated,
   * cut at size): what tells two ranks' GPUs apart, whatever each calls
   * them. 1 on success, 0 when the runtime cannot say. */
  int (*device_pci_bus_id)(int device, char* out, size_t size);
  /* new lockstep::nn::Backend on visible device `device`; precision: the
   * integer value of lockstep::nn::Precision (0 fp32, 1 bf16, 2 fp16:
   * nn/precision.h). */
  void* (*make_backend)(int device, int deterministic, int precision);
  /* Copies host memory to device memory of the lockstep::nn::Backend*
   * backend, queued on its stream (nn::cuda_upload). */
  void (*upload)(void* backend, const void* host, void* device, size_t bytes);
  /* new lockstep::distributed::Communicator (NCCL over the
   * lockstep::distributed::Communicator* mpi_comm, collective). */
  void* (*make_nccl_communicator)(void* mpi_comm, int device);
  /* lockstep::nn::DeviceMemory* for nn::set_device_memory. */
  void* device_memory;
} LockstepCudaPlugin;

typedef const LockstepCudaPlugin* (*LockstepCudaPluginEntry)(void);

#ifdef __cplusplus
}
#endif

#endif /* LOCKSTEP_DISTRIBUTED_CUDA_CUDA_PLUGIN_ABI_H_ */
