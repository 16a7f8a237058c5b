#include "nn/layers/residual_block.h"

#include "common/error.h"
#include "nn/layer_registry.h"
#include "nn/layers/batch_norm2d.h"
#include "nn/layers/conv2d.h"

namespace lockstep::nn {

ResidualBlock::ResidualBlock(std::unique_ptr<Sequential> main, ShortcutKind kind,
                             std::unique_ptr<Sequential> projection, int64_t out_channels,
                             int64_t stride, bool relu, std::string what)
    : main_(std::move(main)),
      projection_(std::move(projection)),
      kind_(kind),
      out_channels_(out_channels),
      stride_(stride),
      relu_(relu),
      what_(std::move(what)) {
  LOCKSTEP_CHECK(main_ && !main_->empty(), "residual block without a main path");
  LOCKSTEP_CHECK((kind_ == ShortcutKind::kProjection) == (projection_ != nullptr),
                 "residual block: a projection shortcut needs its layers, and only it");
  auto* last = dynamic_cast<BatchNorm2d*>(main_->children().back());
  if (last != nullptr && !last->fused_relu()) tail_ = last;
}

void ResidualBlock::set_name(std::string name) {
  main_->set_name(name);
  if (projection_) projection_->set_name(name + ".shortcut");
  Layer::set_name(std::move(name));
}

ChannelPadGeometry ResidualBlock::pad_geometry(const Shape& input) const {
  ChannelPadGeometry g;
  g.batch = input[0];
  g.in_channels = input[1];
  g.in_h = input[2];
  g.in_w = input[3];
  g.out_channels = out_channels_;
  g.pad_before = (out_channels_ - input[1]) / 2;
  g.stride = stride_;
  if (g.pad_before < 0) {
    fail_input(name(), ": a padding shortcut cannot reduce ", input[1], " channels to ",
               out_channels_);
  }
  return g;
}

Shape ResidualBlock::shortcut_shape(const Shape& input) const {
  switch (kind_) {
    case ShortcutKind::kIdentity:
      return input;
    case ShortcutKind::kPad: {
      const ChannelPadGeometry g = pad_geometry(input);
      return {g.batch, g.out_channels, g.out_h(), g.out_w()};
    }
    case ShortcutKind::kProjection:
      return projection_->output_shape(input);
  }
  return input;
}

Shape ResidualBlock::output_shape(const Shape& input) const {
  if (input.size() != 4) {
    fail_input(name(), " ", what_, ": expects input (N, C, H, W), got ", shape_string(input));
  }
  const Shape main = main_->output_shape(input);
  const Shape shortcut = shortcut_shape(input);
  if (main != shortcut) {
    fail_input(name(), " ", what_, ": main path gives ", shape_string(main),
               " but the shortcut gives ", shape_string(shortcut), " for input ",
               shape_string(input));
  }
  return main;
}

void ResidualBlock::forward(Backend& backend, const Tensor& x, Tensor& y,
                            const ForwardContext& ctx) {
  const Shape out = output_shape(x.shape());
  const Tensor* shortcut = &x;
  if (kind_ != ShortcutKind::kIdentity) {
    short_out_.resize(out);
    if (kind_ == ShortcutKind::kPad) {
      backend.channel_pad_forward(pad_geometry(x.shape()), x.data(), short_out_.data());
    } else {
      projection_->forward(backend, x, short_out_, ctx);
    }
    shortcut = &short_out_;
  }
  if (tail_ != nullptr) {  // y = relu(bn2(.) + shortcut), written by bn2
    tail_->set_next_residual(*shortcut, relu_);
    main_->forward(backend, x, y, ctx);
    return;
  }
  main_out_.resize(out);
  main_->forward(backend, x, main_out_, ctx);
  backend.add_forward(y.numel(), main_out_.data(), shortcut->data(), relu_, y.data());
}

void ResidualBlock::backward_announcing(Backend& backend, const Tensor& x, const Tensor& y,
                                        const Tensor& dy, Tensor* dx, const GradReady& ready) {
  // g = dy * (y > 0): for the main path unless bn2 masks dy itself, for a
  // shortcut with layers or padding, and for an identity shortcut unless
  // relu_backward_accumulate adds it.
  const bool fused_identity = tail_ != nullptr && kind_ == ShortcutKind::kIdentity;
  const Tensor* g = &dy;
  if (relu_ && !fused_identity) {
    grad_.resize(y.shape());
    backend.relu_backward(y.numel(), y.data(), dy.data(), grad_.data());
    g = &grad_;
  }
  if (kind_ != ShortcutKind::kIdentity) {
    if (dx != nullptr || kind_ == ShortcutKind::kProjection) short_dx_.resize(x.shape());
    if (kind_ == ShortcutKind::kProjection) {
      projection_->backward_announcing(backend, x, short_out_, *g, dx ? &short_dx_ : nullptr,
                                       ready);
    } else if (dx != nullptr) {
      backend.channel_pad_backward(pad_geometry(x.shape()), g->data(), short_dx_.data());
    }
  }
  if (tail_ != nullptr) {
    main_->backward_announcing(backend, x, y, dy, dx, ready);
  } else {
    main_->backward_announcing(backend, x, main_out_, *g, dx, ready);
  }
  if (dx == nullptr) return;
  if (fused_identity && relu_) {
    backend.relu_backward_accumulate(dx->numel(), y.data(), dy.data(), dx->data());
    return;
  }
  const Tensor& from_shortcut = kind_ == ShortcutKind::kIdentity ? *g : short_dx_;
  backend.axpy(dx->numel(), 1.0f, from_shortcut.data(), dx->data());
}

std::vector<Layer*> ResidualBlock::children() const {
  if (projection_) return {main_.get(), projection_.get()};
  return {main_.get()};
}

void ResidualBlock::reset_scratch(Device device) {
  for (Tensor* t : {&main_out_, &short_out_, &grad_, &short_dx_}) *t = Tensor({0}, device);
}

void ResidualBlock::summarize(const Shape& input, int depth, std::vector<SummaryRow>& rows) {
  Layer::summarize(input, depth, rows);
  main_->summarize_children(input, depth + 1, rows);
  if (projection_) projection_->summarize(input, depth + 1, rows);
}

namespace {

// conv1 (3x3, stride) bn1+relu conv2 (3x3) bn2, no conv biases; the
// shortcut: identity, option-A channel padding, or a 1x1 convolution with
// BatchNorm.
std::unique_ptr<Layer> make_basic_block(LayerArgs& args, const Shape& in) {
  const std::string& text = args.text();
  const int64_t planes = args.integer("out", 0, true);
  const int64_t stride = args.integer("stride", 1);
  const bool same = stride == 1 && planes == in[1];
  std::string shortcut = args.word("shortcut", "auto");
  if (shortcut == "auto") shortcut = same ? "identity" : "conv";
  if (planes <= 0 || stride <= 0) {
    fail_input("layer \"", text, "\": out and stride must be positive");
  }
  auto main = std::make_unique<Sequential>();
  main->add("conv1", std::make_unique<Conv2d>(in[1], planes, 3, stride, 1, false));
  main->add("bn1", std::make_unique<BatchNorm2d>(planes, true));
  main->add("conv2", std::make_unique<Conv2d>(planes, planes, 3, 1, 1, false));
  main->add("bn2", std::make_unique<BatchNorm2d>(planes));
  ShortcutKind kind = ShortcutKind::kIdentity;
  std::unique_ptr<Sequential> projection;
  if (shortcut == "identity") {
    if (!same) {
      fail_input("layer \"", text, "\": an identity shortcut needs stride 1 and out=", in[1],
                 "; use shortcut=pad or shortcut=conv");
    }
  } else if (shortcut == "pad") {
    kind = ShortcutKind::kPad;
  } else if (shortcut == "conv") {
    kind = ShortcutKind::kProjection;
    projection = std::make_unique<Sequential>();
    projection->add("0", std::make_unique<Conv2d>(in[1], planes, 1, stride, 0, false));
    projection->add("1", std::make_unique<BatchNorm2d>(planes));
  } else {
    fail_input("layer \"", text, "\": unknown shortcut \"", shortcut,
               "\" (known: auto, identity, pad, conv)");
  }
  const std::string what =
      detail::concat("basic_block(", in[1], "->", planes, ", s", stride, ", ", shortcut, ")");
  return std::make_unique<ResidualBlock>(std::move(main), kind, std::move(projection), planes,
                                         stride, true, what);
}

}  // namespace

// A composite: the ONNX exporter converts it itself (app/formats/).
const LayerType& basic_block_layer_type() {
  static const LayerType type{
      .name = "basic_block",
      .usage = "basic_block out= [stride=1] [shortcut=auto|identity|pad|conv]",
      .summary =
          "a residual block: conv1 3x3, bn1+relu, conv2 3x3, bn2, plus the shortcut "
          "(conv: `shortcut.0` 1x1 convolution, `shortcut.1` BatchNorm), then relu",
      .parameters = {"conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight", "bn2.weight",
                     "bn2.bias"},
      .input = LayerInput::kImage,
      .make = make_basic_block};
  return type;
}

}  // namespace lockstep::nn
