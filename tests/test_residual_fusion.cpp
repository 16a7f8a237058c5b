// The fused passes at the end of a residual block give the bits of the
// separate passes they replace, on every instruction set this CPU has, with
// 1 and 2 threads:
// - batchnorm_apply_add / batchnorm_train_forward_add against
//   batchnorm_apply / batchnorm_train_forward into a scratch tensor, then
//   add_forward;
// - batchnorm_train_backward masked by y against relu_backward, then the
//   unmasked op; and against the separate sums and apply ops;
// - relu_backward_accumulate against relu_backward, then axpy;
// - ResidualBlock (every shortcut) and a whole resnet20 training step
//   (fp32 and bf16) against the unfused sequence driven here from the
//   block's parts, the sequence ResidualBlock ran before the fusion.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/batchnorm_math.h"
#include "nn/layer_spec.h"
#include "nn/layers/residual_block.h"
#include "nn/model_zoo.h"
#include "support/backend_checks.h"
#include "support/op_names.h"

namespace lockstep::nn {
namespace {

using testing::bitwise_equal;
using testing::random_tensor;

// Every instruction set this CPU has, times 1 and 2 threads, times the
// given precisions.
std::vector<CpuBackendOptions> backends(std::vector<Precision> precisions = {Precision::kFp32}) {
  std::vector<CpuIsa> isas = {CpuIsa::kAvx2};
  if (detect_cpu_isa() != CpuIsa::kAvx2) isas.push_back(detect_cpu_isa());
  std::vector<CpuBackendOptions> out;
  for (Precision p : precisions)
    for (CpuIsa isa : isas)
      for (int threads : {1, 2})
        out.push_back({.threads = threads, .isa_cap = isa, .precision = p});
  return out;
}

// Values in [-1, 1] with exact zeros, negative zeros and a NaN among them.
Tensor awkward(const Shape& shape, uint64_t seed) {
  Tensor t = random_tensor(shape, seed);
  for (int64_t i = 0; i < t.numel(); i += 7) t.data()[i] = (i / 7) % 2 ? -0.0f : 0.0f;
  t.data()[t.numel() / 3] = std::numeric_limits<float>::quiet_NaN();
  return t;
}

// (N, C, S) shapes: a plane of 1 element, a masked tail, planes of 16 and 1024.
const std::vector<BatchNormGeometry> kGeometries = {
    {3, 5, 1}, {4, 3, 49}, {2, 16, 16}, {5, 4, 1024}};

Shape shape_of(const BatchNormGeometry& g) {
  return {g.batch, g.channels, g.spatial};
}

// Per-channel training state with its own storage.
struct TrainState {
  Tensor weight, bias, running_mean, running_var, nbt{{1}}, stats, coef;
  explicit TrainState(int64_t C)
      : weight(random_tensor({C}, 1, 0.5f, 1.5f)),
        bias(random_tensor({C}, 2)),
        running_mean(random_tensor({C}, 3)),
        running_var(random_tensor({C}, 4, 0.5f, 2.0f)),
        stats({4 * C}),
        coef({5 * C}) {}
  BatchNormTrainState view() {
    return {.weight = weight.data(),
            .bias = bias.data(),
            .running_mean = running_mean.data(),
            .running_var = running_var.data(),
            .num_batches_tracked = nbt.data(),
            .stats = reinterpret_cast<double*>(stats.data()),
            .coef = coef.data()};
  }
  std::vector<const Tensor*> tensors() const {
    return {&running_mean, &running_var, &nbt, &stats, &coef};
  }
};

void expect_all_bitwise(const std::vector<const Tensor*>& got,
                        const std::vector<const Tensor*>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(*got[i], *want[i])) << what << ": output " << i;
  }
}

TEST(ResidualFusion, BatchNormApplyAddIsApplyThenAdd) {
  for (const CpuBackendOptions& o : backends()) {
    auto backend = make_cpu_backend(o);
    for (const BatchNormGeometry& g : kGeometries) {
      for (bool relu : {false, true}) {
        const Tensor x = awkward(shape_of(g), 5), add = awkward(shape_of(g), 6);
        const Tensor coef = random_tensor({2, g.channels}, 7);
        Tensor scratch(shape_of(g)), want(shape_of(g)), got(shape_of(g));
        backend->batchnorm_apply(g, x.data(), coef.data(), false, scratch.data());
        backend->add_forward(want.numel(), scratch.data(), add.data(), relu, want.data());
        backend->batchnorm_apply_add(g, x.data(), coef.data(), add.data(), relu, got.data());
        EXPECT_TRUE(bitwise_equal(got, want)) << backend->name() << " S=" << g.spatial;
        Tensor in_place = add.clone();  // y may alias add
        backend->batchnorm_apply_add(g, x.data(), coef.data(), in_place.data(), relu,
                                     in_place.data());
        EXPECT_TRUE(bitwise_equal(in_place, want)) << backend->name() << " S=" << g.spatial;
      }
    }
  }
}

TEST(ResidualFusion, BatchNormTrainForwardAddIsTrainForwardThenAdd) {
  for (const CpuBackendOptions& o : backends()) {
    auto backend = make_cpu_backend(o);
    for (const BatchNormGeometry& g : kGeometries) {
      for (bool relu : {false, true}) {
        const Tensor x = random_tensor(shape_of(g), 8), add = awkward(shape_of(g), 9);
        TrainState a(g.channels), b(g.channels);
        Tensor scratch(shape_of(g)), want(shape_of(g)), got(shape_of(g));
        backend->batchnorm_train_forward(g, a.view(), x.data(), false, scratch.data());
        backend->add_forward(want.numel(), scratch.data(), add.data(), relu, want.data());
        backend->batchnorm_train_forward_add(g, b.view(), x.data(), add.data(), relu, got.data());
        EXPECT_TRUE(bitwise_equal(got, want)) << backend->name() << " S=" << g.spatial;
        expect_all_bitwise(b.tensors(), a.tensors(), backend->name());
      }
    }
  }
}

// The training ops, channel by channel, against the separate passes with
// the per-channel arithmetic in between done here.
TEST(ResidualFusion, BatchNormTrainOpsGiveTheBitsOfTheSeparatePasses) {
  for (const CpuBackendOptions& o : backends()) {
    auto backend = make_cpu_backend(o);
    for (const BatchNormGeometry& g : kGeometries) {
      const int64_t C = g.channels;
      const auto count = static_cast<double>(g.batch * g.spatial);
      const Tensor x = random_tensor(shape_of(g), 10), dy = random_tensor(shape_of(g), 11);
      TrainState s(C), ref(C);
      Tensor y(shape_of(g)), want_y(shape_of(g));
      backend->batchnorm_train_forward(g, s.view(), x.data(), true, y.data());
      std::vector<double> sums(2 * C);
      backend->batchnorm_stats(g, x.data(), sums.data(), sums.data() + C);
      std::vector<BatchNormChannel> ch(C);
      for (int64_t c = 0; c < C; ++c) {
        ch[c] = batchnorm_channel_forward(sums[c], sums[C + c], count, 1e-5f, 0.1f,
                                          ref.weight.data()[c], ref.bias.data()[c],
                                          ref.running_mean.data()[c], ref.running_var.data()[c],
                                          ref.coef.data()[c], ref.coef.data()[C + c]);
      }
      backend->batchnorm_apply(g, x.data(), ref.coef.data(), true, want_y.data());
      EXPECT_TRUE(bitwise_equal(y, want_y)) << backend->name() << " S=" << g.spatial;
      EXPECT_TRUE(bitwise_equal(s.running_mean, ref.running_mean)) << backend->name();
      EXPECT_TRUE(bitwise_equal(s.running_var, ref.running_var)) << backend->name();

      Tensor dw({C}), db({C}), dx(shape_of(g)), want_dx(shape_of(g));
      backend->batchnorm_train_backward(g, s.view(), x.data(), y.data(), dy.data(), dw.data(),
                                        db.data(), dx.data());
      for (int64_t c = 0; c < C; ++c) {
        ref.coef.data()[c] = static_cast<float>(ch[c].mean);
        ref.coef.data()[C + c] = static_cast<float>(ch[c].invstd);
      }
      backend->batchnorm_backward_sums(g, x.data(), y.data(), dy.data(), ref.coef.data(),
                                       sums.data(), sums.data() + C);
      Tensor want_dw({C}), want_db({C});
      for (int64_t c = 0; c < C; ++c) {
        want_db.data()[c] = static_cast<float>(sums[c]);
        want_dw.data()[c] = static_cast<float>(sums[C + c]);
        float* k = ref.coef.data();
        batchnorm_channel_backward(ch[c], ref.weight.data()[c], sums[c], sums[C + c], 1.0 / count,
                                   k[2 * C + c], k[3 * C + c], k[4 * C + c]);
      }
      backend->batchnorm_backward_apply(g, x.data(), y.data(), dy.data(), ref.coef.data(),
                                        want_dx.data());
      EXPECT_TRUE(bitwise_equal(dw, want_dw)) << backend->name() << " S=" << g.spatial;
      EXPECT_TRUE(bitwise_equal(db, want_db)) << backend->name() << " S=" << g.spatial;
      EXPECT_TRUE(bitwise_equal(dx, want_dx)) << backend->name() << " S=" << g.spatial;

      // The mask recomputed from x (a ReLU of x * scale + shift itself): the
      // same bits as the mask read from y.
      Tensor dx3(shape_of(g)), dw3({C}), db3({C});
      BatchNormTrainState from_x = s.view();
      from_x.mask_from_x = true;
      backend->batchnorm_train_backward(g, from_x, x.data(), y.data(), dy.data(), dw3.data(),
                                        db3.data(), dx3.data());
      expect_all_bitwise({&dw3, &db3, &dx3}, {&dw, &db, &dx}, backend->name() + " mask from x");

      // Masked by y here first: the same bits as the op's own mask.
      Tensor masked(shape_of(g)), dx2(shape_of(g)), dw2({C}), db2({C});
      backend->relu_backward(masked.numel(), y.data(), dy.data(), masked.data());
      backend->batchnorm_train_backward(g, s.view(), x.data(), nullptr, masked.data(), dw2.data(),
                                        db2.data(), dx2.data());
      expect_all_bitwise({&dw2, &db2, &dx2}, {&dw, &db, &dx}, backend->name() + " masked first");
    }
  }
}

TEST(ResidualFusion, ReluBackwardAccumulateIsReluBackwardThenAxpy) {
  for (const CpuBackendOptions& o : backends()) {
    auto backend = make_cpu_backend(o);
    for (int64_t n : {1, 13, 4096, 100003}) {
      const Tensor y = awkward({n}, 12), dy = awkward({n}, 13), dx = awkward({n}, 14);
      Tensor g({n}), want = dx.clone(), got = dx.clone();
      backend->relu_backward(n, y.data(), dy.data(), g.data());
      backend->axpy(n, 1.0f, g.data(), want.data());
      backend->relu_backward_accumulate(n, y.data(), dy.data(), got.data());
      EXPECT_TRUE(bitwise_equal(got, want)) << backend->name() << " n=" << n;
    }
  }
}

// The unfused sequence of a residual block, driven from its parts:
// main path into a tensor of its own, shortcut, add (+ ReLU); backward
// relu_backward, shortcut, main path, axpy.
class UnfusedBlock {
 public:
  explicit UnfusedBlock(ResidualBlock& b) : b_(b) {}

  void forward(Backend& backend, const Tensor& x, Tensor& y, const ForwardContext& ctx) {
    const Shape out = b_.output_shape(x.shape());
    main_out_.resize(out);
    b_.main_path().forward(backend, x, main_out_, ctx);
    const Tensor* shortcut = &x;
    if (b_.shortcut_kind() != ShortcutKind::kIdentity) {
      short_out_.resize(out);
      if (b_.shortcut_kind() == ShortcutKind::kPad) {
        backend.channel_pad_forward(pad(x.shape()), x.data(), short_out_.data());
      } else {
        b_.projection()->forward(backend, x, short_out_, ctx);
      }
      shortcut = &short_out_;
    }
    backend.add_forward(y.numel(), main_out_.data(), shortcut->data(), b_.fused_relu(), y.data());
  }

  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
    const GradReady none = [](const Parameter&) {};
    Tensor g(y.shape());
    backend.relu_backward(y.numel(), y.data(), dy.data(), g.data());
    Tensor short_dx(x.shape());
    if (b_.shortcut_kind() == ShortcutKind::kProjection) {
      b_.projection()->backward_announcing(backend, x, short_out_, g, dx ? &short_dx : nullptr,
                                           none);
    } else if (b_.shortcut_kind() == ShortcutKind::kPad && dx != nullptr) {
      backend.channel_pad_backward(pad(x.shape()), g.data(), short_dx.data());
    }
    b_.main_path().backward_announcing(backend, x, main_out_, g, dx, none);
    if (dx == nullptr) return;
    const Tensor& from = b_.shortcut_kind() == ShortcutKind::kIdentity ? g : short_dx;
    backend.axpy(dx->numel(), 1.0f, from.data(), dx->data());
  }

 private:
  ChannelPadGeometry pad(const Shape& in) const {
    return {.batch = in[0],
            .in_channels = in[1],
            .in_h = in[2],
            .in_w = in[3],
            .out_channels = b_.out_channels(),
            .pad_before = (b_.out_channels() - in[1]) / 2,
            .stride = b_.stride()};
  }

  ResidualBlock& b_;
  Tensor main_out_{{0}}, short_out_{{0}};
};

std::vector<const Tensor*> state_of(Layer& model) {
  std::vector<const Tensor*> out;
  for (Parameter* p : model.parameters()) out.push_back(&p->grad), out.push_back(&p->value);
  for (Buffer* b : model.buffers()) out.push_back(&b->value);
  return out;
}

TEST(ResidualFusion, BlockGivesTheBitsOfTheUnfusedSequenceForEveryShortcut) {
  for (const CpuBackendOptions& o : backends({Precision::kFp32, Precision::kBf16})) {
    auto backend = make_cpu_backend(o);
    for (const char* text : {"basic_block out=6", "basic_block out=8 stride=2 shortcut=pad",
                             "basic_block out=8 stride=2 shortcut=conv"}) {
      for (bool training : {true, false}) {
        SCOPED_TRACE(std::string(text) + " on " + backend->name());
        const Shape in = {3, 6, 9, 9};
        auto fused = make_layer(parse_spec(text), text, in);
        auto plain = make_layer(parse_spec(text), text, in);
        for (Layer* l : {fused.get(), plain.get()}) {
          l->set_name("layer1.0");
          l->reset_parameters(5, Device::kCpu);
        }
        const Shape out = fused->output_shape(in);
        const Tensor x = random_tensor(in, 15), dy = random_tensor(out, 16);
        Tensor y1(out), y2(out), dx1(in), dx2(in);
        testing::OpNames ops(make_cpu_backend(o));
        fused->forward(ops, x, y1, {.training = training});
        UnfusedBlock ref(dynamic_cast<ResidualBlock&>(*plain));
        ref.forward(*backend, x, y2, {.training = training});
        EXPECT_TRUE(bitwise_equal(y1, y2));
        fused->backward(ops, x, y1, dy, &dx1);
        // The fused ops ran, not the separate ones.
        EXPECT_EQ(ops.count("add_forward"), 0);
        EXPECT_EQ(ops.count(training ? "batchnorm_train_forward_add" : "batchnorm_apply_add"), 1);
        EXPECT_EQ(ops.count("relu_backward_accumulate"),
                  std::string(text).find("shortcut") == std::string::npos ? 1 : 0);
        ref.backward(*backend, x, y2, dy, &dx2);
        EXPECT_TRUE(bitwise_equal(dx1, dx2));
        expect_all_bitwise(state_of(*fused), state_of(*plain), "parameters and buffers");
      }
    }
  }
}

// A resnet20 training step (batch 4), layer by layer: the zoo's model
// against the same model whose residual blocks run the unfused sequence;
// then an SGD step on both. Every gradient, parameter and buffer agrees.
TEST(ResidualFusion, Resnet20StepGivesTheBitsOfTheUnfusedSequence) {
  for (const CpuBackendOptions& o : backends({Precision::kFp32, Precision::kBf16})) {
    auto backend = make_cpu_backend(o);
    SCOPED_TRACE(backend->name());
    auto fused = build_model("resnet20", {}, {3, 32, 32}, 10);
    auto plain = build_model("resnet20", {}, {3, 32, 32}, 10);
    fused->reset_parameters(42, Device::kCpu);
    plain->reset_parameters(42, Device::kCpu);
    const auto& fl = fused->layers();
    const auto& pl = plain->layers();
    ASSERT_EQ(fl.size(), pl.size());
    const Tensor x = random_tensor({4, 3, 32, 32}, 17);
    std::vector<Tensor> a1, a2;
    a1.push_back(x.clone());
    a2.push_back(x.clone());
    std::vector<std::unique_ptr<UnfusedBlock>> refs(pl.size());
    int blocks = 0;
    for (size_t i = 0; i < fl.size(); ++i) {
      const Shape out = fl[i]->output_shape(a1.back().shape());
      a1.emplace_back(out);
      a2.emplace_back(out);
      fl[i]->forward(*backend, a1[i], a1[i + 1], {.training = true});
      if (auto* b = dynamic_cast<ResidualBlock*>(pl[i].get())) {
        refs[i] = std::make_unique<UnfusedBlock>(*b);
        refs[i]->forward(*backend, a2[i], a2[i + 1], {.training = true});
        ++blocks;
      } else {
        pl[i]->forward(*backend, a2[i], a2[i + 1], {.training = true});
      }
      EXPECT_TRUE(bitwise_equal(a1[i + 1], a2[i + 1])) << "output of layer " << i;
    }
    EXPECT_EQ(blocks, 9);
    Tensor d1 = random_tensor(a1.back().shape(), 18), d2 = d1.clone();
    for (size_t i = fl.size(); i-- > 0;) {
      Tensor dx1(a1[i].shape()), dx2(a2[i].shape());
      fl[i]->backward(*backend, a1[i], a1[i + 1], d1, i > 0 ? &dx1 : nullptr);
      if (refs[i]) {
        refs[i]->backward(*backend, a2[i], a2[i + 1], d2, i > 0 ? &dx2 : nullptr);
      } else {
        pl[i]->backward(*backend, a2[i], a2[i + 1], d2, i > 0 ? &dx2 : nullptr);
      }
      if (i > 0) {
        EXPECT_TRUE(bitwise_equal(dx1, dx2)) << "gradient into layer " << i;
      }
      d1 = std::move(dx1);
      d2 = std::move(dx2);
    }
    const std::vector<Parameter*> p1 = fused->parameters(), p2 = plain->parameters();
    ASSERT_EQ(p1.size(), p2.size());
    for (size_t i = 0; i < p1.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(p1[i]->grad, p2[i]->grad)) << p1[i]->name;
      for (Parameter* p : {p1[i], p2[i]}) {
        Tensor velocity(p->value.shape());
        backend->sgd_update(p->value.numel(), {.lr = 0.1f, .momentum = 0.9f, .first_step = true},
                            p->value.data(), p->grad.data(), velocity.data());
      }
      EXPECT_TRUE(bitwise_equal(p1[i]->value, p2[i]->value)) << p1[i]->name;
    }
    const std::vector<Buffer*> b1 = fused->buffers(), b2 = plain->buffers();
    ASSERT_EQ(b1.size(), b2.size());
    for (size_t i = 0; i < b1.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(b1[i]->value, b2[i]->value)) << b1[i]->name;
    }
  }
}

}  // namespace
}  // namespace lockstep::nn
