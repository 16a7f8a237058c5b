// ONNX conversions of the composite layers: Sequential, ResidualBlock
// (identity, option-A padding and projection shortcuts). Leaf layers are
// converted from their registry entries (onnx_layers.cpp).
#include <limits>

#include "app/formats/onnx_graph.h"
#include "nn/layers/residual_block.h"
#include "nn/layers/sequential.h"

namespace lockstep::app::onnx_export {
namespace {

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

}  // namespace

bool convert_composite(nn::Layer& layer, GraphBuilder& g) {
  return sequential(layer, g) || residual_block(layer, g);
}

}  // namespace lockstep::app::onnx_export
