// The table of config keys (app/config/config_schema.h says how to add one).
#include "app/config/config_schema.h"

#include "data/catalog.h"
#include "data/image_io.h"
#include "nn/model_zoo.h"

namespace lockstep::app {
namespace {

using C = TrainConfig;

// Every model name build_model accepts: the zoo's and "custom".
std::vector<std::string> model_names() {
  std::vector<std::string> names = nn::zoo_model_names();
  names.push_back("custom");
  return names;
}
constexpr unsigned kShow = kTrain | kDataShow;             // the data side of training
constexpr unsigned kAll = kTrain | kDataShow | kEvaluate;  // also evaluate's overrides
constexpr double kMaxEpochs = 1e6;
constexpr double kMaxBatch = 1 << 24;  // per rank; x ranks x passes stays far from 2^63
constexpr double kMaxSamples = 1e12;
constexpr double kMaxMiB = 1 << 20;

// key(name, field, help), then what applies of .range (of numbers, with
// their unit), .allowed (enumerations), .commands (default: train only),
// .ranks_may_differ() (not part of the start-up fingerprint),
// .fixed_on_resume() and .launch_only() (OnResume).
class KeyBuilder {
 public:
  // An enumeration's allowed values are its names (enum_names).
  KeyBuilder(const char* name, Field field, const char* help)
      : key_{.name = name, .field = field, .help = help} {
    std::visit(
        [&](auto C::*f) {
          using T = std::remove_reference_t<decltype(std::declval<C&>().*f)>;
          if constexpr (std::is_enum_v<T>) {
            for (const auto& entry : enum_names(static_cast<T*>(nullptr)))
              key_.allowed.emplace_back(entry.value);
          }
        },
        field);
  }
  KeyBuilder& range(Range range, const char* unit = "") {
    key_.range = range;
    key_.unit = unit;
    return *this;
  }
  KeyBuilder& allowed(std::vector<std::string> values) {
    key_.allowed = std::move(values);
    return *this;
  }
  KeyBuilder& commands(unsigned bits) {
    key_.commands = bits;
    return *this;
  }
  KeyBuilder& ranks_may_differ() {
    key_.fingerprint = false;
    return *this;
  }
  KeyBuilder& fixed_on_resume() {
    key_.on_resume = OnResume::kFixed;
    return *this;
  }
  KeyBuilder& launch_only() {
    key_.on_resume = OnResume::kLaunchOnly;
    return *this;
  }
  operator Key() const { return key_; }

 private:
  Key key_;
};

KeyBuilder key(const char* name, Field field, const char* help) {
  return {name, field, help};
}

std::vector<Key> make_schema() {
  return {
      // --- experiment
      key("run_dir", &C::run_dir,
          "folder for metrics, checkpoints and logs (relative: to the working directory)"),
      key("seed", &C::seed, "seed of initial weights, shuffling, dropout and augmentation")
          .commands(kShow),
      key("epochs", &C::epochs, "epochs to train, counting resumed ones")
          .range(positive(kMaxEpochs), "epochs"),
      // --- data
      key("dataset", &C::dataset,
          "fashion-mnist | mnist | cifar10 | folder (data_dir/train/<class>/*.png, test/...)")
          .allowed(data::dataset_names())
          .commands(kShow)
          .fixed_on_resume(),
      key("data_dir", &C::data_dir,
          "folder of the dataset files (empty: the dataset's default; relative: to the working "
          "directory)")
          .commands(kAll),
      key("image_channels", &C::image_channels,
          "folder: decode images to 1 (gray) or 3 (RGB) channels (0: as the first training "
          "image, 1 when it is gray, else 3; every image is converted to that)")
          .allowed({"0", "1", "3"})
          .commands(kShow)
          .fixed_on_resume(),
      key("image_size", &C::image_size,
          "folder: resize every image to S x S pixels (0: keep; all images must share one size)")
          .range(between(0, static_cast<double>(data::kMaxImageSide)), "pixels")
          .commands(kShow)
          .fixed_on_resume(),
      key("skip_bad_images", &C::skip_bad_images,
          "folder: skip empty, damaged or truncated images instead of failing (noted)")
          .commands(kShow)
          .fixed_on_resume(),
      key("train_subset", &C::train_subset,
          "train on N samples only (0: all; more than there are is an error): the first N of a "
          "built-in set, N stratified by class of an image folder")
          .range(between(0, kMaxSamples), "samples")
          .fixed_on_resume(),
      key("test_subset", &C::test_subset,
          "evaluate on N test samples only (0: all; more than there are is an error), chosen as "
          "for train_subset")
          .range(between(0, kMaxSamples), "samples")
          .commands(kTrain | kEvaluate)
          .fixed_on_resume(),
      key("normalize_mean", &C::normalize_mean,
          "per-channel mean of pixels in [0, 1] (empty: dataset default)")
          .commands(kShow)
          .fixed_on_resume(),
      key("normalize_std", &C::normalize_std,
          "per-channel std of pixels in [0, 1] (empty: dataset default)")
          .range(positive())
          .commands(kShow)
          .fixed_on_resume(),
      key("augment", &C::augment,
          "random crop (4 px) and flip of training images (auto: the dataset's default)")
          .allowed({"auto", "on", "off"})
          .commands(kShow)
          .fixed_on_resume(),
      key("drop_last", &C::drop_last, "sampler drops the tail instead of padding shards"),
      // --- model
      key("model", &C::model,
          "mnist_net | alexnet_cifar | resnet20 | resnet32 | resnet44 | resnet56 | resnet110 | "
          "resnet18_cifar | custom")
          .allowed(model_names())
          .fixed_on_resume(),
      key("layers", &C::layers, "custom model: list of layers, e.g. \"conv2d out=10 kernel=5\"")
          .fixed_on_resume(),
      key("loss", &C::loss, "loss of the model's output")
          .allowed({"auto", "nll", "cross_entropy"})
          .fixed_on_resume(),
      // --- optimisation
      key("batch_size", &C::batch_size, "samples per rank per step")
          .range(positive(kMaxBatch), "samples"),
      key("test_batch_size", &C::test_batch_size, "samples per rank per evaluation batch")
          .range(positive(kMaxBatch), "samples"),
      key("optimizer", &C::optimizer, "update rule (adamw: decoupled weight decay)"),
      key("lr", &C::lr, "single-worker learning rate (scaled by lr_scaling)").range(positive()),
      key("momentum", &C::momentum, "sgd momentum").range(at_least(0)),
      key("dampening", &C::dampening, "sgd dampening").range(at_least(0)),
      key("nesterov", &C::nesterov, "sgd Nesterov momentum"),
      key("weight_decay", &C::weight_decay, "L2 penalty added to the gradient").range(at_least(0)),
      key("adam_beta1", &C::adam_beta1, "adam first-moment decay").range(below(0, 1)),
      key("adam_beta2", &C::adam_beta2, "adam second-moment decay").range(below(0, 1)),
      key("adam_eps", &C::adam_eps, "adam denominator epsilon").range(positive()),
      key("lr_schedule", &C::lr_schedule, "learning-rate schedule"),
      key("lr_milestones", &C::lr_milestones,
          "step schedule: epochs where lr is multiplied by lr_gamma")
          .range(between(0, kMaxEpochs), "epochs"),
      key("lr_gamma", &C::lr_gamma, "step schedule: decay factor").range(at_least(0)),
      key("lr_min", &C::lr_min, "cosine schedule: final single-worker lr").range(at_least(0)),
      key("lr_scaling", &C::lr_scaling, "lr factor for N workers"),
      key("warmup_epochs", &C::warmup_epochs, "gradual warmup to the scaled lr (0: off)")
          .range(between(0, kMaxEpochs), "epochs"),
      key("momentum_correction", &C::momentum_correction, "rescale momentum when the lr changes"),
      // --- data parallelism
      key("reduce_op", &C::reduce_op, "gradients across ranks").allowed({"average", "sum"}),
      key("gradient_predivide_factor", &C::gradient_predivide_factor,
          "divide gradients by f before the sum and by size/f after")
          .range(positive()),
      key("bucket_cap_mb", &C::bucket_cap_mb, "fusion bucket cap (0: one allreduce per tensor)")
          .range(between(0, kMaxMiB), "MiB"),
      key("first_bucket_mb", &C::first_bucket_mb, "cap of the first (last-layer) bucket")
          .range(between(0, kMaxMiB), "MiB"),
      key("allreduce_chunk_mb", &C::allreduce_chunk_mb,
          "each bucket's MPI allreduce is issued in pieces of this size (0: whole buckets)")
          .range(between(0, kMaxMiB), "MiB"),
      key("overlap", &C::overlap, "reduce gradient buckets while backward runs"),
      key("compression", &C::compression, "gradients on the wire")
          .allowed({"none", "fp16", "bf16"}),
      key("gradient_engine", &C::gradient_engine,
          "what reduces gradient buckets: NCCL on the GPUs (auto: when every rank trains on a GPU "
          "of its own and compression is none) or MPI through host copies")
          .allowed({"auto", "nccl", "mpi"}),
      key("backward_passes_per_step", &C::backward_passes_per_step,
          "gradient accumulation: backward passes per optimizer step (an epoch's last step takes "
          "the batches left)")
          .range(positive(65536)),
      key("stall_warning_s", &C::stall_warning_s, "warn when a collective waits longer than this")
          .range(at_least(0), "s"),
      key("stall_abort_s", &C::stall_abort_s,
          "end the job when a collective waits longer than this (0: never); start-up, the first "
          "training step and the first evaluation are not counted")
          .range(at_least(0), "s"),
      key("liveness_timeout_s", &C::liveness_timeout_s,
          "end the job when a rank's heartbeat has been silent this long (a frozen, cut-off or "
          "powered-off node; a crashed one ends it at once); 0: no heartbeat. Slowness alone "
          "never ends a job: that is stall_abort_s")
          .range(at_least(0), "s")
          .commands(kTrain | kEvaluate),
      key("heartbeat_interval_s", &C::heartbeat_interval_s,
          "seconds between liveness heartbeats (a byte each way between rank 0 and every rank, on "
          "a TCP connection of their own)")
          .range(at_least(0), "s")
          .commands(kTrain | kEvaluate),
      key("straggler_threshold", &C::straggler_threshold,
          "after each epoch, name the slowest rank (with its node) when its median step time "
          "(forward, backward, optimizer and its loader waits; not its waits for the other ranks "
          "in gradient reductions) is more than this fraction over the median rank's: slower in "
          "at least half its steps, not in a few (0: name none; metrics.csv records the slowdown "
          "either way)")
          .range(at_least(0), "fraction")
          .ranks_may_differ(),
      // --- execution
      key("device", &C::device,
          "where to compute (auto: cuda when every rank of the job can have a GPU, its own or one "
          "shared under gpu_share, else cpu on every rank)")
          .allowed({"cpu", "cuda", "auto"}),
      key("deterministic", &C::deterministic,
          "cuda: only deterministic cuDNN convolution algorithms"),
      // precision: 16-bit convolutions and GEMMs: CUDA (nn/cuda/math_types.h), and bf16 on
      // the CPU (nn/precision.h: vdpbf16ps where the CPU has AVX512_BF16, else emulated)
      key("precision", &C::precision,
          "convolution and GEMM inputs rounded to 16 bits, float32 accumulation, float32 weights "
          "(bf16: cpu or cuda, on a cpu without AVX512_BF16 emulated and slower than fp32; fp16: "
          "cuda only, with loss scaling)"),
      // loss scaling: PyTorch GradScaler's dynamic scale (nn/grad_scaler.h)
      key("loss_scaling", &C::loss_scaling,
          "dynamic loss scaling: loss times a scale that halves on a step with inf/NaN gradients "
          "(the step is skipped) and doubles after loss_scale_growth_interval clean steps (auto: "
          "on for precision fp16)")
          .allowed({"auto", "on", "off"}),
      key("loss_scale_init", &C::loss_scale_init, "initial loss scale (PyTorch GradScaler's 65536)")
          .range(between(1.0 / 16777216, 1.7014118346046923e38)),
      key("loss_scale_growth_interval", &C::loss_scale_growth_interval,
          "consecutive clean steps after which the loss scale doubles")
          .range(positive(1e12), "steps"),
      key("threads", &C::threads,
          "compute threads per rank (0: one per physical core in the rank's affinity mask; a "
          "mask of the whole machine is divided among the ranks on the node)")
          .range(between(0, kMaxThreads), "threads")
          .commands(kAll)
          .ranks_may_differ(),
      key("resident_data_mb", &C::resident_data_mb,
          "keep the training set in the backend's memory (uint8) when it takes at most this much, "
          "and gather each step's batch there, then the test set and the validation split in "
          "what is left, each evaluation gathering there too (0: never; each batch is then "
          "uploaded)")
          .range(between(0, kMaxMiB), "MiB")
          .ranks_may_differ()
          .launch_only(),
      // GPU placement (app/platform/placement.h).
      key("gpu_share", &C::gpu_share,
          "cuda: let ranks of a node share GPUs instead of stopping: fewer visible GPUs than ranks "
          "(local rank % GPUs), or ranks that see the same GPU (one PCI bus id); gradients then "
          "reduce through MPI")
          .commands(kAll),
      key("eval_every", &C::eval_every, "evaluate every N epochs (0: never)")
          .range(between(0, kMaxEpochs), "epochs"),
      // --- output
      key("checkpoint_every", &C::checkpoint_every, "write a checkpoint every N epochs (0: never)")
          .range(between(0, kMaxEpochs), "epochs"),
      key("keep_checkpoints", &C::keep_checkpoints, "keep the newest N checkpoints (0: all)")
          .range(between(0, kMaxEpochs)),
      key("resume", &C::resume,
          "\"\" | auto (newest in run_dir) | checkpoint path (relative: to the working directory)")
          .launch_only(),
      // Issue 12 (robust resume): a fresh run may replace another run's checkpoints.
      key("overwrite", &C::overwrite,
          "fresh run into a run_dir holding checkpoints: delete them and the old run's results; "
          "resume "
          "from a named checkpoint: delete the run_dir's later ones (else both refused)")
          .launch_only(),
      // The same on every rank: making and merging a timeline are collectives.
      key("timeline", &C::timeline,
          "write a Chrome-trace JSON timeline to this file (relative: to the working directory)")
          .launch_only(),
      key("progress", &C::progress, "auto (live line on a terminal) | plain | none")
          .allowed({"auto", "plain", "none"})
          .ranks_may_differ()
          .launch_only(),
      // --- modern CNN recipe (issue 14): BatchNorm across ranks, loss, clipping, decay
      key("sync_batchnorm", &C::sync_batchnorm,
          "BatchNorm statistics over the global batch (one allreduce per layer in forward and in "
          "backward); off: per-rank statistics, running statistics averaged over ranks before "
          "evaluation and checkpoints"),
      key("reproducible", &C::reproducible,
          "world-size-independent training: for one global batch (batch_size x ranks), any "
          "number of ranks gives bit-identical weights, optimizer state, losses and metrics "
          "(exact per-sample gradient sums, docs/reproducible.md; CPU only)"),
      key("label_smoothing", &C::label_smoothing,
          "cross_entropy label smoothing e: target (1 - e) onehot + e / classes")
          .range(between(0, 0.999)),
      key("grad_clip_norm", &C::grad_clip_norm,
          "clip the averaged gradients to this global L2 norm, identically on every rank (0: off)")
          .range(at_least(0)),
      key("weight_decay_bn_bias", &C::weight_decay_bn_bias,
          "apply weight_decay to BatchNorm weights and biases too (false: only to weights of 2 or "
          "more dimensions)"),
      // --- results that leave lockstep: weights, TensorBoard, evaluation
      key("write_safetensors", &C::write_safetensors,
          "write run_dir/model.safetensors (PyTorch state_dict names) at the end of training")
          .ranks_may_differ(),
      key("init_from", &C::init_from,
          "start from the weights of this safetensors file (lockstep's or PyTorch's save_file; "
          "relative: to the working directory)"),
      key("init_skip", &C::init_skip,
          "init_from: leave out tensors matching these wildcards (e.g. \"fc2.*\" for a new head)"),
      key("tensorboard", &C::tensorboard,
          "rank 0 writes TensorBoard event files under run_dir/tensorboard")
          .ranks_may_differ(),
      key("log_every", &C::log_every,
          "tensorboard: rank 0's train loss every N optimizer steps (0: per epoch only)")
          .range(at_least(0), "steps")
          .ranks_may_differ(),
      key("tensorboard_histograms", &C::tensorboard_histograms,
          "tensorboard: a histogram of every parameter at the end of each epoch")
          .ranks_may_differ(),
      key("top_k", &C::top_k,
          "evaluation: also count a sample correct when its class is among the k largest outputs "
          "(when set, below the class count; the default is lowered to classes - 1 for fewer "
          "classes)")
          .range(between(1, 1000000))
          .commands(kTrain | kEvaluate),
      key("val_fraction", &C::val_fraction,
          "hold out round(val_fraction x training samples) for validation, stratified by class, "
          "each class keeping one for training (0: none; none held out is an error)")
          .range(below(0, 1))
          .fixed_on_resume(),
      key("keep_best", &C::keep_best,
          "keep the checkpoint of the best validation accuracy as run_dir/best.lsck"),
      key("patience", &C::patience,
          "stop when validation accuracy has not improved for N epochs (0: never)")
          .range(between(0, kMaxEpochs), "epochs"),
  };
}

}  // namespace

const std::vector<Key>& config_schema() {
  static const std::vector<Key> schema = make_schema();
  return schema;
}

const Key* find_key(const std::string& name) {
  for (const Key& key : config_schema()) {
    if (name == key.name) return &key;
  }
  return nullptr;
}

}  // namespace lockstep::app
