// The host-side rules of the CUDA backend, as pure functions without CUDA
// headers, so that every build tests them (tests/test_cuda_host_rules.cpp):
// the launch-size clamp, the loss rows' sums and collection, the cuDNN workspace
// limit and the upload ring's slot order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common/error.h"
#include "nn/backend.h"
#include "nn/host_device.h"

namespace lockstep::nn::cuda {

// --- Launch size (nn/cuda/launch.cuh) ---------------------------------------------
constexpr int kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 16;

// Blocks for n work items of a grid-stride kernel: ceil(n / 256) clamped to
// [1, 65536] (n <= 0 gives 1; launch() does not launch those).
inline unsigned blocks_for(int64_t n) {
  const int64_t blocks = n <= 0 ? 1 : 1 + (n - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kMaxBlocks));
}

// --- Loss rows (nn/cuda/softmax_loss.cu) ----------------------------------------------
// What one row of a loss kernel sends back to the host.
struct RowResult {
  float lse;     // log-sum-exp of the row (cross-entropy; 0 for NLL)
  float picked;  // x[label], with label smoothing e (1 - e) x[label] + e mean(x) (0 when
                 // the label is out of range)
  int32_t top;   // argmax of the row (first maximum)
  int32_t label;
};

// loss_sum = sum_i (lse_i - picked_i) in double, in row order, and correct
// = rows whose argmax is their label, over the rows with a label in
// [0, cols); *bad_labels counts the others. The CPU backend's sums, on the
// host (collect_rows) or in a one-thread kernel (the accumulating losses).
LOCKSTEP_HOST_DEVICE inline LossStats sum_rows(int64_t rows, int64_t cols, const RowResult* r,
                                               int64_t* bad_labels) {
  LossStats stats;
  *bad_labels = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (r[i].label < 0 || r[i].label >= cols) {
      ++*bad_labels;
      continue;
    }
    stats.loss_sum += static_cast<double>(r[i].lse) - static_cast<double>(r[i].picked);
    stats.correct += r[i].top == r[i].label ? 1 : 0;
    ++stats.count;
  }
  return stats;
}

// The rows' records on the host, checked and summed as the CPU backend does:
// a label outside [0, cols) is an InputError naming op and row; otherwise
// sum_rows().
inline LossStats collect_rows(const char* op, int64_t rows, int64_t cols, const RowResult* host) {
  for (int64_t i = 0; i < rows; ++i) {
    const RowResult& r = host[i];
    if (r.label < 0 || r.label >= cols) {
      fail_input(op, ": label ", r.label, " of row ", i, " is outside [0, ", cols,
                 "); check that the data set's labels match the model's number of classes");
    }
  }
  int64_t bad = 0;
  return sum_rows(rows, cols, host, &bad);
}

// --- cuDNN workspace (nn/cuda/device_context.cpp) --------------------------------------
constexpr size_t kMaxWorkspaceBytes = size_t{1} << 30;

// The most an algorithm's workspace may take: min(1 GiB, what the workspace
// holds now + half the free device memory).
inline size_t workspace_limit_for(size_t current_bytes, size_t free_bytes) {
  return std::min(kMaxWorkspaceBytes, current_bytes + free_bytes / 2);
}

// --- Upload ring (nn/cuda/device_context.cpp) -------------------------------------------
// The staging buffers of host-to-device copies are used in turn; a buffer is
// reused only after the copy queued from it `Slots` uploads ago has run.
template <size_t Slots>
class UploadRing {
 public:
  static_assert(Slots > 0);
  // The slot of the next upload.
  size_t next() {
    const size_t slot = next_;
    next_ = (next_ + 1) % Slots;
    return slot;
  }

 private:
  size_t next_ = 0;
};

}  // namespace lockstep::nn::cuda
