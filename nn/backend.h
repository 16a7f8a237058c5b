// Backend: the narrow set of primitive ops every layer is built from. One
// implementation per device (nn/cpu, nn/cuda); layers never branch on the
// device, they call these.
//
// Conventions: float32, row-major, NCHW. Pointers refer to memory on the
// backend's device, except where a parameter says "host". Outputs are
// overwritten, never accumulated into, unless the op says otherwise. Shapes
// are given in comments as (N, C, H, W).
//
// Host traffic: an op marked [host wait] makes the host wait for the queued
// work, [host read] also copies a result from the device to the host (a
// returned value or a host array), [host write] copies host memory to the
// device. Every other op only queues work. These marks are the decision
// points a caller chooses per step; a test counts them at this boundary
// (tests/support/counting_backend.h), and host_traffic() counts what a
// backend really did.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "nn/backend_args.h"
#include "nn/cpu_isa.h"
#include "nn/loss_totals.h"
#include "nn/precision.h"
#include "nn/tensor.h"

namespace lockstep::nn {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;  // "cpu (2 threads)", "cuda:0 (H100)"
  virtual KernelChoice kernels() const = 0;

  // --- convolution ---------------------------------------------------------
  // x: (N, C, H, W), w: (K, C, R, S), b: (K) or null, y: (N, K, P, Q)
  virtual void conv2d_forward(const Conv2dGeometry& g, const float* x, const float* w,
                              const float* b, float* y) = 0;
  // dy: (N, K, P, Q), w: (K, C, R, S) -> dx: (N, C, H, W)
  virtual void conv2d_backward_data(const Conv2dGeometry& g, const float* w, const float* dy,
                                    float* dx) = 0;
  // x: (N, C, H, W), dy: (N, K, P, Q) -> dw: (K, C, R, S), db: (K) (db may be null)
  virtual void conv2d_backward_filter(const Conv2dGeometry& g, const float* x, const float* dy,
                                      float* dw, float* db) = 0;
  // A BatchNorm's apply pass taken into the convolution that reads its
  // output: the input is x' = map(x) as batchnorm_apply(x, map.coef,
  // map.relu) gives it (the same bits), read from x as the convolution
  // goes, so x' is never written. conv2d_forward_mapped and
  // conv2d_backward_filter_mapped are conv2d_forward and
  // conv2d_backward_filter of x' (the same bits); a backend takes them for
  // the geometries conv2d_maps_input says, and they are called for no
  // other. The data gradient does not read x. x' is then not allocated
  // either: the BatchNorm's backward gets y null and the mask from x
  // (BatchNormTrainState::mask_from_x).
  virtual bool conv2d_maps_input(const Conv2dGeometry& /*g*/) const { return false; }
  virtual void conv2d_forward_mapped(const Conv2dGeometry& g, const ConvInputMap& map,
                                     const float* x, const float* w, const float* b, float* y);
  virtual void conv2d_backward_filter_mapped(const Conv2dGeometry& g, const ConvInputMap& map,
                                             const float* x, const float* dy, float* dw, float* db);

  // --- pooling -------------------------------------------------------------
  // x: (N, C, H, W) -> y: (N, C, P, Q)
  virtual void maxpool2d_forward(const Pool2dGeometry& g, const float* x, float* y) = 0;
  // Gradient goes to the first maximum of each window (PyTorch's choice).
  // x, dx: (N, C, H, W); y, dy: (N, C, P, Q)
  virtual void maxpool2d_backward(const Pool2dGeometry& g, const float* x, const float* y,
                                  const float* dy, float* dx) = 0;

  // Average pooling without padding (floor mode); every window has
  // kernel * kernel elements. x, dx: (N, C, H, W); y, dy: (N, C, P, Q)
  virtual void avgpool2d_forward(const Pool2dGeometry& g, const float* x, float* y) = 0;
  virtual void avgpool2d_backward(const Pool2dGeometry& g, const float* dy, float* dx) = 0;
  // Mean of each row: x (rows, cols) -> y (rows); global average pooling is
  // rows = N * C, cols = H * W. dx(r, c) = dy(r) / cols.
  virtual void row_mean_forward(int64_t rows, int64_t cols, const float* x, float* y) = 0;
  virtual void row_mean_backward(int64_t rows, int64_t cols, const float* dy, float* dx) = 0;
  // x: (N, C, H, W) -> y: (N, K, P, Q) as ChannelPadGeometry says; backward
  // takes the matching elements of dy back (zero elsewhere of dx).
  virtual void channel_pad_forward(const ChannelPadGeometry& g, const float* x, float* y) = 0;
  virtual void channel_pad_backward(const ChannelPadGeometry& g, const float* dy, float* dx) = 0;

  // --- batch normalisation (x, y, dy, dx: (N, C, S)) ------------------------
  // Per-channel sum and sum of squares of x, accumulated in double, written
  // to host arrays of C values. [host read]
  virtual void batchnorm_stats(const BatchNormGeometry& g, const float* x, double* sum,
                               double* sumsq) = 0;
  // coef: (2, C) = (scale, shift). y = x * scale[c] + shift[c], then
  // max(., 0) when relu. x and y may alias.
  virtual void batchnorm_apply(const BatchNormGeometry& g, const float* x, const float* coef,
                               bool relu, float* y) = 0;
  // batchnorm_apply with a residual added before the ReLU (the end of a
  // residual block): y = x * scale[c] + shift[c] + add, then max(., 0) when
  // relu; add: (N, C, S). The same bits as batchnorm_apply into a scratch
  // tensor, then add_forward(scratch, add). y may alias add, not x.
  virtual void batchnorm_apply_add(const BatchNormGeometry& g, const float* x, const float* coef,
                                   const float* add, bool relu, float* y) = 0;
  // coef: (2, C) = (mean, invstd); xhat = (x - mean[c]) * invstd[c]; g' = dy,
  // or dy * (y > 0) when y is not null (a fused ReLU). Host arrays of C
  // doubles receive sum(g') and sum(g' * xhat) over (N, S). [host read]
  virtual void batchnorm_backward_sums(const BatchNormGeometry& g, const float* x, const float* y,
                                       const float* dy, const float* coef, double* sum_dy,
                                       double* sum_dy_xhat) = 0;
  // coef: (5, C) = (mean, invstd, k, a, b); with xhat and g' as above,
  // dx = k[c] * (g' - a[c] - xhat * b[c]).
  virtual void batchnorm_backward_apply(const BatchNormGeometry& g, const float* x, const float* y,
                                        const float* dy, const float* coef, float* dx) = 0;

  // BatchNorm's training passes with the per-channel arithmetic in between
  // (nn/batchnorm_math.h) on the device, so that nothing is read back.
  // Forward: batchnorm_stats' sums over M = N * S elements per channel,
  // then mean and invstd into s.stats, the running statistics moved,
  // num_batches_tracked + 1, and y as batchnorm_apply with (scale, shift).
  // y null: no apply pass; s.coef keeps (scale, shift) for the
  // convolution that maps its input through them (conv2d_maps_input).
  virtual void batchnorm_train_forward(const BatchNormGeometry& g, const BatchNormTrainState& s,
                                       const float* x, bool relu, float* y) = 0;
  // batchnorm_train_forward with y as batchnorm_apply_add (add: (N, C, S));
  // the same bits as batchnorm_train_forward into a scratch tensor, then
  // add_forward(scratch, add, relu).
  virtual void batchnorm_train_forward_add(const BatchNormGeometry& g, const BatchNormTrainState& s,
                                           const float* x, const float* add, bool relu,
                                           float* y) = 0;
  // Evaluation: s.stats (mean, invstd) and s.coef (2, C) (scale, shift, as
  // batchnorm_apply takes them) from the running statistics, weight and
  // bias of s (batchnorm_channel_eval), on the device: nothing is read back.
  virtual void batchnorm_eval_coef(int64_t channels, const BatchNormTrainState& s) = 0;
  // Backward from s.stats: batchnorm_backward_sums' sums (y as there), then
  // dbias = sum g', dweight = sum g' xhat (rounded to float) and, when dx
  // is not null, batchnorm_backward_apply with (k, a, b) for 1 / M.
  virtual void batchnorm_train_backward(const BatchNormGeometry& g, const BatchNormTrainState& s,
                                        const float* x, const float* y, const float* dy,
                                        float* dweight, float* dbias, float* dx) = 0;

  // --- activation ----------------------------------------------------------
  // y = max(x, 0); x and y may alias
  virtual void relu_forward(int64_t n, const float* x, float* y) = 0;
  // dx = dy * (y > 0); dy and dx may alias
  virtual void relu_backward(int64_t n, const float* y, const float* dy, float* dx) = 0;

  // dx += dy * (y > 0): relu_backward into a scratch tensor, then axpy of
  // it with alpha 1, in one pass and with the same bits (a residual block's
  // identity shortcut). dy and dx may not alias.
  virtual void relu_backward_accumulate(int64_t n, const float* y, const float* dy, float* dx) = 0;

  // y = a + b, then max(., 0) when relu (the end of a residual block); y
  // may alias a or b.
  virtual void add_forward(int64_t n, const float* a, const float* b, bool relu, float* y) = 0;

  // --- dropout -------------------------------------------------------------
  // sample_ids: host array of N dataset indices. mask: (N, C), each 0 or
  // 1/(1-p). y = x * mask (broadcast over S). x and y may alias. [host write]
  virtual void dropout_forward(const DropoutGeometry& g, const int64_t* sample_ids, const float* x,
                               float* y, float* mask) = 0;
  // The same with sample_ids (N) in this backend's memory: nothing is copied.
  virtual void dropout_forward_device_ids(const DropoutGeometry& g, const int64_t* sample_ids,
                                          const float* x, float* y, float* mask) = 0;
  // dx = dy * mask (broadcast over S). dy and dx may alias.
  virtual void dropout_backward(const DropoutGeometry& g, const float* mask, const float* dy,
                                float* dx) = 0;

  // --- dense ---------------------------------------------------------------
  // Row-major C(m, n) = alpha * op(A) * op(B) + beta * C, op(A): (m, k), op(B): (k, n)
  virtual void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, const float* b, float beta, float* c) = 0;
  // y(rows, cols) += bias(cols) on every row
  virtual void add_row_bias(int64_t rows, int64_t cols, const float* bias, float* y) = 0;
  // db(cols) = sum over rows of dy(rows, cols)
  virtual void sum_rows(int64_t rows, int64_t cols, const float* dy, float* db) = 0;

  // --- softmax and losses ---------------------------------------------------
  // Row-wise over (rows, cols): y = x - logsumexp(x)
  virtual void log_softmax_forward(int64_t rows, int64_t cols, const float* x, float* y) = 0;
  // dx = dy - exp(y) * sum(dy) per row
  virtual void log_softmax_backward(int64_t rows, int64_t cols, const float* y, const float* dy,
                                    float* dx) = 0;
  // Negative log-likelihood of log-probabilities logp(rows, cols) against
  // labels (int32, on the device). When dlogp is not null it receives
  // d(grad_scale * sum of losses)/d(logp). A label outside [0, cols) is an
  // InputError naming it. [host read]
  virtual LossStats nll_loss(int64_t rows, int64_t cols, const float* logp, const int32_t* labels,
                             float grad_scale, float* dlogp) = 0;
  // Softmax cross-entropy on raw logits, fused (numerically stable); dlogits
  // as above. label_smoothing e in [0, 1) (PyTorch's CrossEntropyLoss): the
  // target is (1 - e) onehot + e / cols, so loss_i = logsumexp(x_i) -
  // (1 - e) x[i, label_i] - e mean_j x[i, j], and dlogits = grad_scale *
  // (softmax(x) - (1 - e) onehot - e / cols). [host read]
  virtual LossStats softmax_cross_entropy(int64_t rows, int64_t cols, const float* logits,
                                          const int32_t* labels, float grad_scale, float* dlogits,
                                          float label_smoothing) = 0;
  // The two losses above, with the same arithmetic and gradient, added to
  // *totals (a LossTotals in this backend's memory, add_batch_loss())
  // instead of returned: the host does not wait. A row whose label is
  // outside [0, cols) reads nothing out of range, adds nothing, gets a zero
  // gradient and counts in totals->bad_labels (no error is raised here).
  virtual void nll_loss_accumulate(int64_t rows, int64_t cols, const float* logp,
                                   const int32_t* labels, float grad_scale, float* dlogp,
                                   LossTotals* totals) = 0;
  virtual void softmax_cross_entropy_accumulate(int64_t rows, int64_t cols, const float* logits,
                                                const int32_t* labels, float grad_scale,
                                                float* dlogits, float label_smoothing,
                                                LossTotals* totals) = 0;

  // --- element-wise updates --------------------------------------------------
  // PyTorch torch.optim.SGD semantics; velocity is the momentum buffer.
  virtual void sgd_update(int64_t n, const SgdParams& p, float* w, const float* grad,
                          float* velocity) = 0;
  // PyTorch torch.optim.Adam semantics (L2 weight decay added to the gradient).
  virtual void adam_update(int64_t n, const AdamParams& p, float* w, const float* grad, float* m,
                           float* v) = 0;
  virtual void fill(int64_t n, float value, float* x) = 0;
  virtual void scale(int64_t n, float alpha, float* x) = 0;
  // y += alpha * x
  virtual void axpy(int64_t n, float alpha, const float* x, float* y) = 0;
  // Copies n floats within this backend's device.
  virtual void copy(int64_t n, const float* src, float* dst) = 0;
  // True when any of the arrays (this backend's memory) holds an infinity or
  // NaN. Waits for the queued work; the CUDA backend checks on the device and
  // reads back one flag for all of them. [host read]
  virtual bool any_non_finite(std::span<const ConstFloats> arrays) = 0;

  // --- data held in the backend's memory -----------------------------------
  // ids: (N) int64 sample ids; images: (S, C, H, W) uint8; labels: (S)
  // int32; table: (C, 256), the normalised float of each pixel value per
  // channel -> y: (N, C, H, W), batch_labels: (N).
  // y[n, c, i, j] = table[c, images[ids[n], c, i + dy, sx]] with
  // sx = crop_flip_source_x(j) and (dy, dx, flip) as g draws them for ids[n],
  // or table[c, 0] where the source is outside the image (zero padding in
  // pixel space); batch_labels[n] = labels[ids[n]]. A row whose id is
  // outside [0, S) reads nothing: it gets table[c, 0] everywhere and label
  // -1, which a loss counts as a bad label (nll_loss_accumulate).
  virtual void gather_batch(const GatherGeometry& g, const int64_t* ids, const uint8_t* images,
                            const int32_t* labels, const float* table, float* y,
                            int32_t* batch_labels) = 0;

  // --- host transfers ----------------------------------------------------------
  // Copies bytes of host memory to dst (this backend's memory), in queue
  // order; host may be reused as soon as this returns. [host write]
  virtual void upload(const void* host, void* dst, size_t bytes) = 0;
  // Copies bytes at src (this backend's memory) to host memory once the
  // queued work has finished. [host read]
  virtual void download(const void* src, void* host, size_t bytes) = 0;
  // Blocks until all queued work on this backend has finished. [host wait]
  virtual void synchronize() = 0;
  // The host waits and copies this backend has made since it was built.
  // The CPU backend's memory is host memory and its ops finish when they
  // return: it makes none and returns zeros.
  virtual HostTraffic host_traffic() const { return {}; }
  // The native queue these ops run on, for code outside nn/ that orders its
  // own work after them with events (distributed/device_reducer.h): the
  // cudaStream_t of the CUDA backend; null on the CPU, where every op has
  // finished when it returns.
  virtual void* native_stream() { return nullptr; }
  // Makes the calling thread use this backend's device (CUDA: sets the
  // current device), so that runtime calls made on a thread the backend did
  // not start (a communicator checking where a pointer lives) create no
  // context on another device. Call it first on such a thread; nothing on
  // the CPU.
  virtual void bind_thread() {}
};

// The CPU backend with `threads` worker threads (0: all hardware threads),
// running the kernels of the widest instruction set this CPU supports
// (nn/cpu_isa.h), at most isa_cap when given. name() says which.
// precision bf16 runs convolutions and gemm on bf16 inputs (nn/precision.h),
// on vdpbf16ps where the CPU has AVX512_BF16, else emulated; fp16 is an
// InputError (check_cpu_precision).
// winograd: 3x3 convolutions with stride 1 and at least 8 channels in and
// out run on Winograd's F(4x4, 3x3) in fp32 (forward, data and weight
// gradients), 4x fewer multiplications, in bf16 too (there in place of
// bf16's direct products: as fast or faster, and closer to exact); the
// results differ from the direct convolution's by rounding, and are the
// same bits on every instruction set and thread count. false: the direct
// convolution (in bf16: bf16's direct products everywhere).
struct CpuBackendOptions {
  int threads = 0;
  std::optional<CpuIsa> isa_cap;
  Precision precision = Precision::kFp32;
  bool winograd = true;
};
std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options);
std::unique_ptr<Backend> make_cpu_backend(int threads);

}  // namespace lockstep::nn
