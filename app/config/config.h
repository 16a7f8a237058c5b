// The training configuration: one struct, every field with a default, read
// from a TOML file (flat keys) and overridden on the command line (--key or
// --key-with-dashes). Every key is described once, in the schema table of
// app/config/config_schema.cpp: type, default (the initialiser below), unit, help,
// range or allowed values, the subcommands that use it and whether it enters
// the start-up fingerprint. Flags, validation, `lockstep options`,
// configs/README.md, checkpoint JSON and the fingerprint all come from it.
// Enumerations that nn/ reads (precision, optimizer, LR schedule and
// scaling) are parsed here, once, and held as nn/'s enums; files, flags and
// checkpoints spell them as text.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/lr_schedule.h"
#include "nn/optimizer.h"
#include "nn/precision.h"

namespace CLI {
class App;
}

namespace lockstep::app {

// Where a key's value came from, for messages.
struct ValueOrigin {
  std::string where;  // "config file PATH:LINE" or "flag --key-name"
  bool from_file = false;
};

struct TrainConfig {
  // --- experiment
  std::string config_file;               // TOML file the values below came from
  std::string run_dir = "runs/default";  // metrics, checkpoints and logs go here
  uint64_t seed = 42;                    // initial weights, shuffling, dropout, augmentation
  int64_t epochs = 10;                   // epochs to train (total, including resumed ones)

  // --- data
  std::string dataset = "fashion-mnist";  // fashion-mnist | mnist | cifar10 | folder
  std::string data_dir;                   // empty: the dataset's default folder
  int64_t image_channels = 0;             // folder: 1 or 3 channels (0: as the first image)
  int64_t image_size = 0;                 // folder: resize to S x S pixels (0: keep)
  bool skip_bad_images = false;           // folder: skip unreadable images instead of failing
  int64_t train_subset = 0;               // use only the first N training samples (0: all)
  int64_t test_subset = 0;                // use only the first N test samples (0: all)
  std::vector<float> normalize_mean;      // per channel, pixels in [0, 1]; empty: dataset default
  std::vector<float> normalize_std;       // per channel; empty: dataset default
  std::string augment = "auto";           // auto (dataset default) | on | off
  bool drop_last = false;                 // sampler drops the tail instead of padding

  // --- model
  std::string model =
      "mnist_net";  // mnist_net | alexnet_cifar | resnet20..110 | resnet18_cifar | custom
  std::vector<std::string> layers;  // custom: layer list ("conv2d out=10 kernel=5", ...)
  std::string loss = "auto";        // auto | nll | cross_entropy

  // --- optimisation
  int64_t batch_size = 64;                                // samples per rank per step
  int64_t test_batch_size = 1000;                         // samples per rank per evaluation batch
  nn::OptimizerKind optimizer = nn::OptimizerKind::kSgd;  // sgd | adam | adamw
  double lr = 0.01;                                       // single-worker learning rate
  double momentum = 0.5;                                  // sgd momentum
  double dampening = 0.0;                                 // sgd dampening
  bool nesterov = false;                                  // sgd Nesterov momentum
  double weight_decay = 0.0;                              // L2 penalty added to the gradient
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_eps = 1e-8;
  nn::LrScheduleKind lr_schedule = nn::LrScheduleKind::kConstant;  // constant | step | cosine
  std::vector<int64_t> lr_milestones;  // step: epochs where lr is multiplied by lr_gamma
  double lr_gamma = 0.1;               // step: decay factor
  double lr_min = 0.0;                 // cosine: final single-worker lr
  nn::LrScaling lr_scaling = nn::LrScaling::kLinear;  // linear | sqrt | none: for N workers
  double warmup_epochs = 0.0;       // gradual warmup to the scaled lr (epochs, 0: off)
  bool momentum_correction = true;  // rescale momentum when lr changes

  // --- data parallelism
  std::string reduce_op = "average";       // average | sum
  double gradient_predivide_factor = 1.0;  // divide by f before the sum, by size/f after
  double bucket_cap_mb = 25.0;             // fusion bucket size cap (MiB), 0: one per tensor
  double first_bucket_mb = 1.0;            // first (last-layer) bucket cap (MiB)
  double allreduce_chunk_mb = 1.0;         // pieces of each bucket's MPI allreduce (MiB), 0: whole
  bool overlap = true;                     // reduce buckets while backward runs
  std::string compression = "none";        // none | fp16 | bf16 on the wire
  std::string gradient_engine = "auto";    // auto | nccl | mpi: what reduces gradient buckets
  int64_t backward_passes_per_step = 1;    // gradient accumulation passes per step
  double stall_warning_s = 60.0;           // warn when a collective waits longer (s)
  double stall_abort_s = 600.0;            // end the job after this wait (s, 0: never)
  double liveness_timeout_s = 15.0;        // a silent rank is lost after this (s, 0: off)
  double heartbeat_interval_s = 1.0;       // between liveness heartbeats (s)
  double straggler_threshold = 0.25;       // name a rank this fraction slower than the median

  // --- execution
  std::string device = "cpu";  // cpu | cuda | auto
  bool deterministic = false;  // cuda: only deterministic cuDNN convolution algorithms
  int64_t threads =
      0;  // compute threads per rank (0: from the affinity mask, app/platform/placement.h)
  // Keep the training set in the backend's memory when it takes at most this
  // many MiB (app/run/resident_batches.h; 0: never, each step uploads its batch)
  double resident_data_mb = 4096.0;
  // --- GPU placement (app/platform/placement.h)
  bool gpu_share = false;  // cuda: let ranks of a node share GPUs (placement.h: plan_devices)
  int64_t eval_every = 1;  // evaluate every N epochs (0: never)

  // fp32 | bf16 | fp16: arithmetic of convolutions and GEMMs (fp16: cuda only)
  nn::Precision precision = nn::Precision::kFp32;
  // Dynamic loss scaling (nn/grad_scaler.h): auto (on for fp16) | on | off
  std::string loss_scaling = "auto";
  double loss_scale_init = 65536.0;           // initial scale
  int64_t loss_scale_growth_interval = 2000;  // clean steps before the scale doubles

  // --- output
  int64_t checkpoint_every = 1;   // write a checkpoint every N epochs (0: never)
  int64_t keep_checkpoints = 3;   // keep the newest N checkpoints (0: all)
  std::string resume;             // "" | auto | path of a checkpoint
  std::string timeline;           // Chrome-trace JSON file ("" : off)
  std::string progress = "auto";  // auto (live line on a terminal) | plain | none

  // --- modern CNN recipe (issue 14): BatchNorm across ranks, loss, clipping, decay
  bool sync_batchnorm = false;       // BatchNorm statistics over the global batch (SyncBatchNorm)
  bool reproducible = false;         // the same bits for any number of ranks at one global batch
  double label_smoothing = 0.0;      // cross_entropy target (1 - e) onehot + e / classes, [0, 1)
  double grad_clip_norm = 0.0;       // clip averaged gradients to this global L2 norm (0: off)
  bool weight_decay_bn_bias = true;  // false: no weight decay on BatchNorm and bias parameters
  // --- results that leave lockstep (export, initial weights)
  bool write_safetensors = true;        // write run_dir/model.safetensors at the end of training
  std::string init_from;                // safetensors file of initial weights ("": none)
  std::vector<std::string> init_skip;   // init_from: tensors to leave out (wildcards, "fc2.*")
  bool tensorboard = true;              // write TensorBoard event files under run_dir/tensorboard
  int64_t log_every = 10;               // tensorboard: train loss every N steps (0: never)
  bool tensorboard_histograms = false;  // tensorboard: histograms of the weights every epoch
  int64_t top_k = 5;                    // evaluation: top-k accuracy beside top-1
  double val_fraction = 0.0;            // validation split taken from the training set (0: none)
  bool keep_best = false;               // keep run_dir/best.lsck: the best validation accuracy
  int64_t patience = 0;                 // stop after N epochs without validation gain (0: never)

  // Issue 12 (robust resume): a fresh run into a run_dir holding checkpoints
  // deletes them (and metrics.csv) instead of refusing to start.
  bool overwrite = false;

  // Not a key: where each value that the config file or a flag set came
  // from, by key name (read_config, apply_command_line; absent: the default
  // or a checkpoint's value, but evaluate names its checkpoint as data_dir's
  // origin). For messages only: not stored, compared or fingerprinted.
  std::map<std::string, ValueOrigin> origins;
};

// Most compute or decoding threads a rank may ask for (`threads` and the
// --threads of other subcommands); 0 always means "as many as cores".
inline constexpr int kMaxThreads = 1024;

// The subcommands that read config keys (a key lists those that use it).
enum Command : unsigned { kTrain = 1u, kDataShow = 2u, kEvaluate = 4u };

// Declares on cmd one flag per key that `command` uses (--key, and
// --key-with-dashes for keys with '_'); train and data show also get
// --config FILE. Flags are only declared: read_config() applies them.
void add_config_options(CLI::App& cmd, Command command);

// The config of a parsed command: defaults, then the --config file (if the
// command has one and it was given), then the flags given on the command
// line; then validate(). Records in origins where each value that the file
// or a flag set came from. Throws InputError naming the file and line or the
// flag and key at fault.
TrainConfig read_config(const CLI::App& cmd, Command command);

// Overrides the keys of `command` given as flags on cmd and records them in
// origins (no validation).
void apply_command_line(const CLI::App& cmd, Command command, TrainConfig& config);

// Where each value a file set came from: (key, "config file PATH:LINE"),
// in file order.
using FileLines = std::vector<std::pair<std::string, std::string>>;

// Applies a TOML file's top-level `key = value` entries for the keys that
// `command` uses (other subcommands' keys are type- and range-checked,
// then ignored). Throws
// InputError naming the file and line for a syntax error, a duplicate or
// unknown key (with a suggestion), a section, a value of the wrong type,
// or (lines null) a value out of its range. With lines, ranges are left to
// the caller, which may replace a value first (the command line wins), and
// lines says where each value came from.
void apply_config_file(const std::string& path, Command command, TrainConfig& config,
                       FileLines* lines = nullptr);
// The same for the text of such a file; path is only used in messages.
void apply_config_text(std::string_view text, const std::string& path, Command command,
                       TrainConfig& config, FileLines* lines = nullptr);

// Checks every key's range or allowed values, then combinations of keys;
// throws InputError naming the key, after the file and line (origins) of a
// value from the config file and, for a combination, the flag of a value
// from the command line.
void validate(const TrainConfig& config);

// "config file PATH:LINE: " or "flag --key-name: " of the first of keys
// whose value came from the file or the command line (origins); "" when
// none did. Put before a message about those keys.
std::string origin_prefix(const TrainConfig& config, std::initializer_list<std::string_view> keys);

// Checks that the input a path key names exists: data_dir a folder,
// init_from and resume (but "auto") a file; an empty value passes. Throws
// InputError naming the key, its origin and, for a relative path, the
// working directory it is looked up in (not the config file's folder),
// and for mnist and cifar10 how to download them.
void check_input_path(const TrainConfig& config, std::string_view key);

// Every key but config_file, as stored in checkpoints.
nlohmann::json to_json(const TrainConfig& config);
// The inverse of to_json, for configs stored in checkpoints; missing keys
// keep their defaults, unknown ones are ignored. Throws InputError naming
// source on malformed values.
TrainConfig train_config_from_json(const nlohmann::json& j, const std::string& source);

// ("config.KEY", JSON value) of every key marked for the start-up
// fingerprint, by key name.
std::vector<std::pair<std::string, std::string>> fingerprint_items(const TrainConfig& config);

// Markdown table of every key (key, type, default, allowed, meaning, used by)
// and a line naming the keys that may differ between ranks; for `lockstep
// options` and configs/README.md.
std::string options_markdown();

}  // namespace lockstep::app
