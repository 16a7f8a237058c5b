// ONNX conversions of the layers residual networks add: BatchNorm2d (eval
// mode: running statistics), Sequential, ResidualBlock (identity, option-A
// padding and projection shortcuts), global average pooling.
#include <limits>

#include "app/formats/onnx_graph.h"
#include "nn/layers/avg_pool2d.h"
#include "nn/layers/batch_norm2d.h"
#include "nn/layers/residual_block.h"
#include "nn/layers/sequential.h"

namespace lockstep::app::onnx_export {
namespace {

// y = relu?((x - running_mean) / sqrt(running_var + eps) * weight + bias)
bool batch_norm2d(nn::Layer& layer, GraphBuilder& g) {
  auto* bn = dynamic_cast<nn::BatchNorm2d*>(&layer);
  if (!bn) return false;
  std::vector<std::string> inputs = g.weights(layer);  // scale, B
  for (const nn::Buffer* b : layer.buffers()) {
    if (b->name.ends_with(".num_batches_tracked")) continue;
    g.initializer(b->name, b->value);  // input_mean, input_var
    inputs.push_back(b->name);
  }
  if (!bn->fused_relu()) {
    real(g.node("BatchNormalization", layer, inputs), "epsilon", bn->eps());
    return true;
  }
  inputs.insert(inputs.begin(), g.current);
  const std::string normed = layer.name() + ".bn";
  real(g.add("BatchNormalization", layer.name(), inputs, normed), "epsilon", bn->eps());
  g.current = layer.name() + ".out";
  g.add("Relu", layer.name() + ".relu", {normed}, g.current);
  return true;
}

bool sequential(nn::Layer& layer, GraphBuilder& g) {
  auto* s = dynamic_cast<nn::Sequential*>(&layer);
  if (!s) return false;
  for (nn::Layer* child : s->children()) convert(*child, g);
  return true;
}

// Every stride-th pixel of x, zero channels before and after: the
// "option A" shortcut.
std::string pad_shortcut(const nn::ResidualBlock& b, const std::string& x, const nn::Shape& in,
                         GraphBuilder& g) {
  const std::string n = b.name() + ".shortcut";
  const int64_t s = b.stride(), big = std::numeric_limits<int64_t>::max();
  g.int64_initializer(n + ".starts", {0, 0});
  g.int64_initializer(n + ".ends", {big, big});
  g.int64_initializer(n + ".axes", {2, 3});
  g.int64_initializer(n + ".steps", {s, s});
  g.add("Slice", n + ".slice", {x, n + ".starts", n + ".ends", n + ".axes", n + ".steps"},
        n + ".sliced");
  const int64_t extra = b.out_channels() - in[1], before = extra / 2, after = extra - before;
  g.int64_initializer(n + ".pads", {0, before, 0, 0, 0, after, 0, 0});
  g.add("Pad", n + ".pad", {n + ".sliced", n + ".pads"}, n + ".out");
  return n + ".out";
}

// y = relu?(main(x) + shortcut(x))
bool residual_block(nn::Layer& layer, GraphBuilder& g) {
  auto* b = dynamic_cast<nn::ResidualBlock*>(&layer);
  if (!b) return false;
  const std::string x = g.current;
  const nn::Shape in = g.shape;
  convert(b->main_path(), g);
  const std::string main_out = g.current;
  std::string shortcut = x;
  if (b->shortcut_kind() == nn::ShortcutKind::kProjection) {
    g.current = x;
    g.shape = in;
    convert(*b->projection(), g);
    shortcut = g.current;
  } else if (b->shortcut_kind() == nn::ShortcutKind::kPad) {
    shortcut = pad_shortcut(*b, x, in, g);
  }
  g.current = layer.name() + ".out";
  if (!b->fused_relu()) {
    g.add("Add", layer.name() + ".add", {main_out, shortcut}, g.current);
    return true;
  }
  g.add("Add", layer.name() + ".add", {main_out, shortcut}, layer.name() + ".sum");
  g.add("Relu", layer.name() + ".relu", {layer.name() + ".sum"}, g.current);
  return true;
}

// (N, C, H, W) -> (N, C)
bool global_avg_pool2d(nn::Layer& layer, GraphBuilder& g) {
  if (!dynamic_cast<nn::GlobalAvgPool2d*>(&layer)) return false;
  const std::string pooled = layer.name() + ".pooled";
  g.add("GlobalAveragePool", layer.name(), {g.current}, pooled);
  g.current = layer.name() + ".out";
  integer(g.add("Flatten", layer.name() + ".flatten", {pooled}, g.current), "axis", 1);
  return true;
}

}  // namespace

const std::vector<Conversion>& residual_conversions() {
  static const std::vector<Conversion> all = {batch_norm2d, sequential, residual_block,
                                              global_avg_pool2d};
  return all;
}

}  // namespace lockstep::app::onnx_export
