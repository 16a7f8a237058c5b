// nn::GradScaler's state machine against hand-worked sequences (PyTorch
// GradScaler's rules), and the non-finite check of gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/error.h"
#include "nn/grad_scaler.h"

namespace lockstep::nn {
namespace {

struct Expect {
  bool found_non_finite;
  bool stepped;
  float scale;  // after the update
  int64_t tracker;
};

void play(GradScaler& s, const std::vector<Expect>& sequence) {
  for (size_t t = 0; t < sequence.size(); ++t) {
    const Expect& e = sequence[t];
    EXPECT_EQ(s.update(e.found_non_finite), e.stepped) << "step " << t;
    EXPECT_EQ(s.scale(), e.scale) << "step " << t;
    EXPECT_EQ(s.state().growth_tracker, e.tracker) << "step " << t;
  }
}

TEST(GradScaler, DefaultsArePyTorchs) {
  GradScaler s;
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.loss_factor(), 65536.0f);
  EXPECT_EQ(s.unscale_factor(), 1.0f / 65536.0f);
  EXPECT_EQ(s.config().growth_factor, 2.0f);
  EXPECT_EQ(s.config().backoff_factor, 0.5f);
  EXPECT_EQ(s.config().growth_interval, 2000);
  EXPECT_EQ(s.state().growth_tracker, 0);
}

// Overflow on the first steps (backoff each time, nothing stepped), then
// growth after 3 clean steps, an overflow in the middle of a clean run that
// resets the tracker, and growth again only after 3 more clean steps.
TEST(GradScaler, BackoffSkipsAndGrowthAfterIntervalCleanSteps) {
  GradScaler s({.init_scale = 1024.0f, .growth_interval = 3});
  play(s, {
              {true, false, 512.0f, 0},
              {true, false, 256.0f, 0},
              {false, true, 256.0f, 1},
              {false, true, 256.0f, 2},
              {false, true, 512.0f, 0},  // third clean step: grows
              {false, true, 512.0f, 1},
              {true, false, 256.0f, 0},  // overflow resets the tracker
              {false, true, 256.0f, 1},
              {false, true, 256.0f, 2},
              {false, true, 512.0f, 0},
              {false, true, 512.0f, 1},
              {false, true, 512.0f, 2},
              {false, true, 1024.0f, 0},
          });
  EXPECT_EQ(s.skipped(), 3);
  s.reset_skipped();
  EXPECT_EQ(s.skipped(), 0);
}

TEST(GradScaler, GrowthIntervalOneDoublesEveryCleanStep) {
  GradScaler s({.init_scale = 1.0f, .growth_interval = 1});
  play(s, {{false, true, 2.0f, 0}, {false, true, 4.0f, 0}, {true, false, 2.0f, 0}});
}

// PyTorch keeps the scale when growing would overflow float32.
TEST(GradScaler, GrowthStopsBelowInfinity) {
  const float top = std::ldexp(1.0f, 127);
  GradScaler s({.init_scale = top, .growth_interval = 1});
  play(s, {{false, true, top, 0}, {false, true, top, 0}, {true, false, top / 2, 0}});
}

TEST(GradScaler, StateRoundTripsAndResumesTheSequence) {
  GradScaler a({.init_scale = 64.0f, .growth_interval = 4});
  for (bool f : {false, true, false, false}) a.update(f);
  GradScaler b({.init_scale = 64.0f, .growth_interval = 4});
  b.set_state(a.state());
  for (int t = 0; t < 6; ++t) {
    EXPECT_EQ(a.update(false), b.update(false));
    EXPECT_EQ(a.scale(), b.scale()) << t;
    EXPECT_EQ(a.state().growth_tracker, b.state().growth_tracker) << t;
  }
}

TEST(GradScaler, RefusesBadConfigAndState) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_THROW(GradScaler bad({.init_scale = 0.0f}), InputError);
  EXPECT_THROW(GradScaler bad({.init_scale = inf}), InputError);
  EXPECT_THROW(GradScaler bad({.backoff_factor = -0.5f}), InputError);
  EXPECT_THROW(GradScaler bad({.growth_interval = 0}), InputError);
  GradScaler s;
  EXPECT_THROW((s.set_state({.scale = std::nanf(""), .growth_tracker = 0})), InputError);
  EXPECT_THROW((s.set_state({.scale = 1.0f, .growth_tracker = -1})), InputError);
  EXPECT_EQ(s.scale(), 65536.0f);  // unchanged
}

// Two parameters, the second long enough for several blocks and a tail;
// each kind of non-finite value in a few places is found, and the largest
// finite floats are not.
TEST(GradScaler, HasNonFiniteFindsInfAndNanAnywhere) {
  auto backend = make_cpu_backend(1);
  Parameter a{"a", Tensor({3}), Tensor({3})};
  Parameter b{"b", Tensor({10007}), Tensor({10007})};
  const std::vector<Parameter*> params = {&a, &b};
  const float big = std::numeric_limits<float>::max();
  for (float& v : a.grad.span()) v = -big;
  for (float& v : b.grad.span()) v = big;
  EXPECT_FALSE(has_non_finite(*backend, params));
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {inf, -inf, std::nanf("")}) {
    for (int64_t where : {int64_t{0}, int64_t{4095}, int64_t{4096}, int64_t{10006}}) {
      const float keep = b.grad.data()[where];
      b.grad.data()[where] = bad;
      EXPECT_TRUE(has_non_finite(*backend, params)) << bad << " at " << where;
      b.grad.data()[where] = keep;
    }
    a.grad.data()[1] = bad;
    EXPECT_TRUE(has_non_finite(*backend, params)) << bad << " in the first parameter";
    a.grad.data()[1] = -big;
  }
}

}  // namespace
}  // namespace lockstep::nn
