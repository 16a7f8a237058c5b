// Helpers of the CUDA backend tests (test_cuda_*.cpp): device copies of
// host tensors and labels, the CPU-vs-CUDA comparison, long work to queue
// ahead of what must not wait for it, and a fixture that skips, saying why,
// when no GPU is visible. CUDA builds only.
#pragma once

#include <gtest/gtest.h>

#include "support/gpu_skip.h"

#if LOCKSTEP_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/backend.h"
#include "nn/cuda/cuda_backend.h"
#include "nn/tensor.h"
#include "support/backend_checks.h"

namespace lockstep::nn::cuda_test {

// |gpu - cpu| <= abs + rel * |cpu| + rms * rms(cpu tensor); all zero: equal
// (NaN matches NaN, -0 matches +0).
struct Tolerance {
  double abs = 0.0, rel = 0.0, rms = 0.0;
};
constexpr Tolerance kExact{};

using testing::random_tensor;

// Queues long work on the backend's stream: eight 4096^3 GEMMs (1.1 TFLOP,
// tens of milliseconds even on an H100 in float32), reading a and b and
// writing c (each 4096 * 4096 floats on the device). What the backend queues
// after it runs long after the host has gone on, unless something waits.
inline void queue_long_work(Backend& backend, Tensor& a, Tensor& b, Tensor& c) {
  const int64_t n = 4096;
  for (int i = 0; i < 8; ++i)
    backend.gemm(false, false, n, n, n, 1.0f, a.data(), b.data(), 0.0f, c.data());
}

inline Tensor to_device(const Tensor& host) {
  Tensor t(host.shape(), Device::kCuda);
  t.copy_from(host);
  return t;
}

inline Tensor to_host(const Tensor& device) {
  Tensor t(device.shape());
  t.copy_from(device);
  return t;
}

// Reports the first five elements out of tolerance, naming index and values.
inline void expect_close(const Tensor& cpu, const Tensor& gpu, Tolerance tol,
                         const std::string& what) {
  ASSERT_EQ(cpu.device(), Device::kCpu);
  ASSERT_EQ(gpu.device(), Device::kCuda);
  ASSERT_EQ(cpu.numel(), gpu.numel()) << what;
  cudaDeviceSynchronize();
  const Tensor got = to_host(gpu);
  double sum_squares = 0.0;
  for (float v : cpu.span()) sum_squares += std::isfinite(v) ? double{v} * v : 0.0;
  const double rms = cpu.numel() ? std::sqrt(sum_squares / static_cast<double>(cpu.numel())) : 0;
  int failures = 0;
  for (int64_t i = 0; i < cpu.numel() && failures < 5; ++i) {
    const double ref = cpu.data()[i], value = got.data()[i];
    const bool both_nan = std::isnan(ref) && std::isnan(value);
    const double bound = tol.abs + tol.rel * std::abs(ref) + tol.rms * rms;
    if (!both_nan && !(std::abs(value - ref) <= bound)) {
      ADD_FAILURE() << what << "[" << i << "]: cuda " << value << ", cpu " << ref << " (|diff| "
                    << std::abs(value - ref) << " > " << bound << ")";
      ++failures;
    }
  }
}

// Convolution g forward (with the bias when bias), backward filter (and
// bias) and backward data on cpu and on gpu from the same random inputs;
// the results agree within tol (the bias gradient within bias_tol).
inline void expect_conv_matches(Backend& cpu, Backend& gpu, const Conv2dGeometry& g, bool bias,
                                Tolerance tol, Tolerance bias_tol) {
  const Shape xs{g.batch, g.in_channels, g.in_h, g.in_w};
  const Shape ws{g.out_channels, g.in_channels, g.kernel_h, g.kernel_w};
  const Shape ys{g.batch, g.out_channels, g.out_h(), g.out_w()};
  const Tensor x = random_tensor(xs, 1), w = random_tensor(ws, 2), b = random_tensor({ws[0]}, 3);
  const Tensor dy = random_tensor(ys, 4);
  const Tensor xd = to_device(x), wd = to_device(w), bd = to_device(b), dyd = to_device(dy);
  const std::string with = bias ? " (with bias)" : " (no bias)";

  Tensor y(ys), yd(ys, Device::kCuda);
  cpu.conv2d_forward(g, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
  gpu.conv2d_forward(g, xd.data(), wd.data(), bias ? bd.data() : nullptr, yd.data());
  expect_close(y, yd, tol, "y" + with);

  Tensor dw(ws), db({ws[0]}), dwd(ws, Device::kCuda), dbd({ws[0]}, Device::kCuda);
  cpu.conv2d_backward_filter(g, x.data(), dy.data(), dw.data(), bias ? db.data() : nullptr);
  gpu.conv2d_backward_filter(g, xd.data(), dyd.data(), dwd.data(), bias ? dbd.data() : nullptr);
  expect_close(dw, dwd, tol, "dw" + with);
  if (bias) expect_close(db, dbd, bias_tol, "db");

  Tensor dx(xs), dxd(xs, Device::kCuda);
  cpu.conv2d_backward_data(g, w.data(), dy.data(), dx.data());
  gpu.conv2d_backward_data(g, wd.data(), dyd.data(), dxd.data());
  expect_close(dx, dxd, tol, "dx");
}

// int32 labels on the device.
class DeviceLabels {
 public:
  explicit DeviceLabels(const std::vector<int32_t>& host) : count_(host.size()) {
    if (count_ == 0) return;
    EXPECT_EQ(cudaMalloc(&data_, count_ * sizeof(int32_t)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data_, host.data(), count_ * sizeof(int32_t), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceLabels() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceLabels(const DeviceLabels&) = delete;
  DeviceLabels& operator=(const DeviceLabels&) = delete;
  const int32_t* data() const { return static_cast<const int32_t*>(data_); }

 private:
  size_t count_;
  void* data_ = nullptr;
};

// A CPU backend (2 threads; direct convolutions, whose rounding the
// tolerances against cuDNN were set for: Winograd's is looser) and the CUDA
// backend on device 0 (deterministic); skips when no device is visible.
class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) {
      LOCKSTEP_SKIP_NO_DEVICE(cuda_devices_description());
    }
    cpu_ = make_cpu_backend({.threads = 2, .winograd = false});
    gpu_ = make_cuda_backend(0, true);
  }
  Backend& cpu() { return *cpu_; }
  Backend& gpu() { return *gpu_; }

 private:
  std::unique_ptr<Backend> cpu_, gpu_;
};

}  // namespace lockstep::nn::cuda_test

#endif  // LOCKSTEP_HAVE_CUDA
