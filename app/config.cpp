#include "app/config.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <set>
#include <sstream>

#include "nn/error.h"

// Every TrainConfig field that is saved with a run (all but config_file).
#define LOCKSTEP_TRAIN_FIELDS(X) \
  X(run_dir)                     \
  X(seed)                        \
  X(epochs)                      \
  X(dataset)                     \
  X(data_dir)                    \
  X(image_channels)              \
  X(image_size)                  \
  X(skip_bad_images)             \
  X(train_subset)                \
  X(test_subset)                 \
  X(normalize_mean)              \
  X(normalize_std)               \
  X(augment)                     \
  X(drop_last)                   \
  X(model)                       \
  X(layers)                      \
  X(loss)                        \
  X(batch_size)                  \
  X(test_batch_size)             \
  X(optimizer)                   \
  X(lr)                          \
  X(momentum)                    \
  X(dampening)                   \
  X(nesterov)                    \
  X(weight_decay)                \
  X(adam_beta1)                  \
  X(adam_beta2)                  \
  X(adam_eps)                    \
  X(lr_schedule)                 \
  X(lr_milestones)               \
  X(lr_gamma)                    \
  X(lr_min)                      \
  X(lr_scaling)                  \
  X(warmup_epochs)               \
  X(momentum_correction)         \
  X(reduce_op)                   \
  X(gradient_predivide_factor)   \
  X(bucket_cap_mb)               \
  X(first_bucket_mb)             \
  X(allreduce_chunk_mb)          \
  X(overlap)                     \
  X(compression)                 \
  X(gradient_engine)             \
  X(backward_passes_per_step)    \
  X(stall_warning_s)             \
  X(stall_abort_s)               \
  X(device)                      \
  X(deterministic)               \
  X(threads)                     \
  X(eval_every)                  \
  X(checkpoint_every)            \
  X(keep_checkpoints)            \
  X(resume)                      \
  X(timeline)                    \
  X(progress)                    \
  X(sync_batchnorm)              \
  X(label_smoothing)             \
  X(grad_clip_norm)              \
  X(weight_decay_bn_bias)

namespace lockstep::app {
namespace {

// "--batch_size,--batch-size" for a key with underscores, else "--key".
std::string option_names(const std::string& key) {
  std::string dashed = key;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  return dashed == key ? "--" + key : "--" + key + ",--" + dashed;
}

template <typename T>
void add(CLI::App& cmd, const std::string& key, T& field, const std::string& help) {
  cmd.add_option(option_names(key), field, help)->capture_default_str();
}

void add_bool(CLI::App& cmd, const std::string& key, bool& field, const std::string& help) {
  cmd.add_flag(option_names(key), field, help + " (true/false)")->capture_default_str();
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The config keys of cmd: option long names with '_' spelling.
std::vector<std::string> config_keys(CLI::App& cmd) {
  std::vector<std::string> keys;
  for (const CLI::Option* opt : cmd.get_options()) {
    for (const std::string& name : opt->get_lnames()) {
      if (name.find('-') == std::string::npos && name != "help" && name != "config") {
        keys.push_back(name);
      }
    }
  }
  return keys;
}

std::string suggestion(CLI::App& cmd, const std::string& key) {
  std::string best;
  size_t best_distance = 3;  // suggest only close matches
  for (const std::string& known : config_keys(cmd)) {
    const size_t d = edit_distance(key, known);
    if (d < best_distance) {
      best_distance = d;
      best = known;
    }
  }
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

}  // namespace

void add_train_options(CLI::App& cmd, TrainConfig& c) {
  add(cmd, "run_dir", c.run_dir, "folder for metrics, checkpoints and logs");
  add(cmd, "seed", c.seed, "seed of initial weights, shuffling, dropout and augmentation");
  add(cmd, "epochs", c.epochs, "epochs to train, counting resumed ones");

  add(cmd, "dataset", c.dataset,
      "fashion-mnist | mnist | cifar10 | folder (data_dir/train/<class>/*.png, test/...)");
  add(cmd, "data_dir", c.data_dir, "folder of the dataset files (empty: the dataset's default)");
  add(cmd, "image_channels", c.image_channels,
      "folder: decode images to 1 (gray) or 3 (RGB) channels (0: as the first image)");
  add(cmd, "image_size", c.image_size,
      "folder: resize every image to S x S pixels (0: keep; all images must share one size)");
  add_bool(cmd, "skip_bad_images", c.skip_bad_images,
           "folder: skip empty, damaged or truncated images instead of failing (noted)");
  add(cmd, "train_subset", c.train_subset, "train on the first N samples only (0: all)");
  add(cmd, "test_subset", c.test_subset, "evaluate on the first N test samples only (0: all)");
  add(cmd, "normalize_mean", c.normalize_mean,
      "per-channel mean of pixels in [0, 1] (empty: dataset default)");
  add(cmd, "normalize_std", c.normalize_std,
      "per-channel std of pixels in [0, 1] (empty: dataset default)");
  add(cmd, "augment", c.augment, "auto | on | off: random crop (4 px) and flip of training images");
  add_bool(cmd, "drop_last", c.drop_last, "sampler drops the tail instead of padding shards");

  add(cmd, "model", c.model,
      "mnist_net | alexnet_cifar | resnet20 | resnet32 | resnet44 | resnet56 | resnet110 | "
      "resnet18_cifar | custom");
  add(cmd, "layers", c.layers, "custom model: list of layers, e.g. \"conv2d out=10 kernel=5\"");
  add(cmd, "loss", c.loss, "auto | nll | cross_entropy");

  add(cmd, "batch_size", c.batch_size, "samples per rank per step");
  add(cmd, "test_batch_size", c.test_batch_size, "samples per rank per evaluation batch");
  add(cmd, "optimizer", c.optimizer, "sgd | adam | adamw (decoupled weight decay)");
  add(cmd, "lr", c.lr, "single-worker learning rate (scaled by lr_scaling)");
  add(cmd, "momentum", c.momentum, "sgd momentum");
  add(cmd, "dampening", c.dampening, "sgd dampening");
  add_bool(cmd, "nesterov", c.nesterov, "sgd Nesterov momentum");
  add(cmd, "weight_decay", c.weight_decay, "L2 penalty added to the gradient");
  add(cmd, "adam_beta1", c.adam_beta1, "adam first-moment decay");
  add(cmd, "adam_beta2", c.adam_beta2, "adam second-moment decay");
  add(cmd, "adam_eps", c.adam_eps, "adam denominator epsilon");
  add(cmd, "lr_schedule", c.lr_schedule, "constant | step | cosine");
  add(cmd, "lr_milestones", c.lr_milestones,
      "step schedule: epochs where lr is multiplied by lr_gamma");
  add(cmd, "lr_gamma", c.lr_gamma, "step schedule: decay factor");
  add(cmd, "lr_min", c.lr_min, "cosine schedule: final single-worker lr");
  add(cmd, "lr_scaling", c.lr_scaling, "linear | sqrt | none: lr factor for N workers");
  add(cmd, "warmup_epochs", c.warmup_epochs, "epochs of gradual warmup to the scaled lr (0: off)");
  add_bool(cmd, "momentum_correction", c.momentum_correction,
           "rescale momentum when the lr changes");

  add(cmd, "reduce_op", c.reduce_op, "average | sum of gradients across ranks");
  add(cmd, "gradient_predivide_factor", c.gradient_predivide_factor,
      "divide gradients by f before the sum and by size/f after");
  add(cmd, "bucket_cap_mb", c.bucket_cap_mb,
      "fusion bucket cap in MiB (0: one allreduce per tensor)");
  add(cmd, "first_bucket_mb", c.first_bucket_mb, "cap of the first (last-layer) bucket in MiB");
  add(cmd, "allreduce_chunk_mb", c.allreduce_chunk_mb,
      "each bucket's MPI allreduce is issued in pieces of this many MiB (0: whole buckets)");
  add_bool(cmd, "overlap", c.overlap, "reduce gradient buckets while backward runs");
  add(cmd, "compression", c.compression, "none | fp16 | bf16 gradients on the wire");
  add(cmd, "gradient_engine", c.gradient_engine,
      "auto | nccl | mpi: gradient buckets reduced by NCCL on the GPUs (auto: when every rank "
      "trains on a GPU) or by MPI through host copies");
  add(cmd, "backward_passes_per_step", c.backward_passes_per_step,
      "gradient accumulation: backward passes per optimizer step (an epoch's last step takes the "
      "batches left)");
  add(cmd, "stall_warning_s", c.stall_warning_s,
      "warn when a collective waits longer than this (s)");
  add(cmd, "stall_abort_s", c.stall_abort_s,
      "abort the job when a collective waits longer than this (s, 0: never)");

  // Modern CNN recipe (issue 14)
  add_bool(cmd, "sync_batchnorm", c.sync_batchnorm,
           "BatchNorm statistics over the global batch (one allreduce per layer in forward and "
           "in backward); off: per-rank statistics, running statistics averaged over ranks "
           "before evaluation and checkpoints");
  add(cmd, "label_smoothing", c.label_smoothing,
      "cross_entropy label smoothing e in [0, 1): target (1 - e) onehot + e / classes");
  add(cmd, "grad_clip_norm", c.grad_clip_norm,
      "clip the averaged gradients to this global L2 norm, identically on every rank (0: off)");
  add_bool(cmd, "weight_decay_bn_bias", c.weight_decay_bn_bias,
           "apply weight_decay to BatchNorm weights and biases too (false: only to weights of "
           "2 or more dimensions)");

  add(cmd, "device", c.device, "cpu | cuda | auto (cuda when a GPU is visible)");
  add_bool(cmd, "deterministic", c.deterministic,
           "cuda: only deterministic cuDNN convolution algorithms");
  add(cmd, "threads", c.threads, "compute threads per rank (0: cores / ranks on the node)");
  add(cmd, "eval_every", c.eval_every, "evaluate every N epochs (0: never)");

  add(cmd, "checkpoint_every", c.checkpoint_every, "write a checkpoint every N epochs (0: never)");
  add(cmd, "keep_checkpoints", c.keep_checkpoints, "keep the newest N checkpoints (0: all)");
  add(cmd, "resume", c.resume, "\"\" | auto (newest in run_dir) | checkpoint path");
  add(cmd, "timeline", c.timeline, "write a Chrome-trace JSON timeline to this file");
  add(cmd, "progress", c.progress, "auto (live line on a terminal) | plain | none");
}

void apply_config_file(CLI::App& cmd, const std::string& path) {
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_file(path);
  } catch (const CLI::FileError&) {
    fail_input("config file ", path, ": cannot be read (missing?)");
  } catch (const CLI::Error& e) {
    fail_input("config file ", path, ": ", e.what());
  }
  for (const CLI::ConfigItem& item : items) {
    const std::string key = item.fullname();
    if (item.name == "++" || item.name == "--") continue;  // section markers
    if (!item.parents.empty()) {
      fail_input("config file ", path, ": unknown key ", key,
                 " (sections are not used: write every key at the top level)");
    }
    CLI::Option* opt = cmd.get_option_no_throw("--" + key);
    if (opt == nullptr || key == "help" || key == "config") {
      fail_input("config file ", path, ": unknown key ", key, suggestion(cmd, key));
    }
    if (opt->count() > 0) continue;  // the command line wins
    try {
      opt->add_result(item.inputs);
      opt->run_callback();
    } catch (const CLI::Error&) {
      std::string value;
      for (const auto& in : item.inputs) value += (value.empty() ? "" : ", ") + in;
      fail_input("config file ", path, ": key ", key, " has value \"", value,
                 "\" of the wrong type (", opt->get_type_name(), " expected)");
    }
  }
}

void validate(const TrainConfig& c) {
  auto positive = [](const char* key, double v) {
    if (!(v > 0)) fail_input("config key ", key, " must be > 0, got ", v);
  };
  auto non_negative = [](const char* key, double v) {
    if (!(v >= 0)) fail_input("config key ", key, " must be >= 0, got ", v);
  };
  auto one_of = [](const char* key, const std::string& v, std::set<std::string> allowed) {
    if (!allowed.count(v)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      fail_input("config key ", key, " is \"", v, "\"; expected one of ", list);
    }
  };
  positive("epochs", static_cast<double>(c.epochs));
  positive("batch_size", static_cast<double>(c.batch_size));
  positive("test_batch_size", static_cast<double>(c.test_batch_size));
  positive("lr", c.lr);
  positive("backward_passes_per_step", static_cast<double>(c.backward_passes_per_step));
  positive("gradient_predivide_factor", c.gradient_predivide_factor);
  for (auto [key, v] : {std::pair{"train_subset", c.train_subset},
                        {"test_subset", c.test_subset},
                        {"image_size", c.image_size},
                        {"threads", c.threads},
                        {"eval_every", c.eval_every},
                        {"checkpoint_every", c.checkpoint_every},
                        {"keep_checkpoints", c.keep_checkpoints}}) {
    non_negative(key, static_cast<double>(v));
  }
  for (auto [key, v] : {std::pair{"momentum", c.momentum},
                        {"dampening", c.dampening},
                        {"weight_decay", c.weight_decay},
                        {"warmup_epochs", c.warmup_epochs},
                        {"bucket_cap_mb", c.bucket_cap_mb},
                        {"first_bucket_mb", c.first_bucket_mb},
                        {"allreduce_chunk_mb", c.allreduce_chunk_mb},
                        {"stall_warning_s", c.stall_warning_s},
                        {"stall_abort_s", c.stall_abort_s},
                        {"lr_min", c.lr_min}}) {
    non_negative(key, v);
  }
  if (c.image_channels != 0 && c.image_channels != 1 && c.image_channels != 3) {
    fail_input("config key image_channels must be 0, 1 or 3, got ", c.image_channels);
  }
  one_of("augment", c.augment, {"auto", "on", "off"});
  one_of("optimizer", c.optimizer, {"sgd", "adam", "adamw"});
  non_negative("grad_clip_norm", c.grad_clip_norm);
  if (!(c.label_smoothing >= 0 && c.label_smoothing < 1)) {
    fail_input("config key label_smoothing must be in [0, 1), got ", c.label_smoothing);
  }
  one_of("lr_schedule", c.lr_schedule, {"constant", "step", "cosine"});
  one_of("lr_scaling", c.lr_scaling, {"linear", "sqrt", "none"});
  one_of("reduce_op", c.reduce_op, {"average", "sum"});
  one_of("compression", c.compression, {"none", "fp16", "bf16"});
  one_of("gradient_engine", c.gradient_engine, {"auto", "nccl", "mpi"});
  if (c.gradient_engine == "nccl" && c.device == "cpu") {
    fail_input("config key gradient_engine = \"nccl\" needs device = \"cuda\" or \"auto\"");
  }
  one_of("device", c.device, {"cpu", "cuda", "auto"});
  one_of("progress", c.progress, {"auto", "plain", "none"});
  one_of("loss", c.loss, {"auto", "nll", "cross_entropy"});
  if (c.model != "custom" && !c.layers.empty()) {
    fail_input("config key layers is set but model is \"", c.model,
               "\": set model = \"custom\" to use a layer list");
  }
  if (c.gradient_predivide_factor != 1.0 && c.reduce_op != "average") {
    fail_input("config key gradient_predivide_factor needs reduce_op = \"average\"");
  }
  if (c.normalize_mean.size() != c.normalize_std.size()) {
    fail_input("config keys normalize_mean and normalize_std need the same number of values (",
               c.normalize_mean.size(), " and ", c.normalize_std.size(), ")");
  }
}

nlohmann::json to_json(const TrainConfig& c) {
  nlohmann::json j = nlohmann::json::object();
#define LOCKSTEP_TO_JSON(field) j[#field] = c.field;
  LOCKSTEP_TRAIN_FIELDS(LOCKSTEP_TO_JSON)
#undef LOCKSTEP_TO_JSON
  return j;
}

TrainConfig train_config_from_json(const nlohmann::json& j, const std::string& source) {
  TrainConfig c;
  try {
#define LOCKSTEP_FROM_JSON(field) \
  if (j.contains(#field)) j.at(#field).get_to(c.field);
    LOCKSTEP_TRAIN_FIELDS(LOCKSTEP_FROM_JSON)
#undef LOCKSTEP_FROM_JSON
  } catch (const nlohmann::json::exception& e) {
    fail_input(source, ": stored config is malformed: ", e.what());
  }
  return c;
}

std::vector<std::pair<std::string, std::string>> fingerprint_items(const TrainConfig& c) {
  std::vector<std::pair<std::string, std::string>> items;
  const nlohmann::json j = to_json(c);
  for (auto it = j.cbegin(); it != j.cend(); ++it) {
    // Output-only keys may differ per rank without harm.
    if (it.key() == "progress" || it.key() == "timeline" || it.key() == "threads") continue;
    items.emplace_back("config." + it.key(), it.value().dump());
  }
  return items;
}

std::string options_markdown(CLI::App& cmd) {
  std::ostringstream out;
  out << "| key | default | meaning |\n|---|---|---|\n";
  for (const CLI::Option* opt : cmd.get_options()) {
    std::string key;
    for (const std::string& name : opt->get_lnames()) {
      if (name.find('-') == std::string::npos) key = name;
    }
    if (key.empty() || key == "help" || key == "config") continue;
    std::string def = opt->get_default_str();
    if (def.empty()) def = "\"\"";
    std::string help = opt->get_description();
    for (size_t at = help.find('|'); at != std::string::npos; at = help.find('|', at + 2)) {
      help.replace(at, 1, "\\|");  // a literal | inside a markdown table cell
    }
    out << "| `" << key << "` | `" << def << "` | " << help << " |\n";
  }
  return out.str();
}

}  // namespace lockstep::app
