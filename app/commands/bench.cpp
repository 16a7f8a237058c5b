#include "app/commands/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "app/platform/cpu_isa_env.h"
#include "common/clock.h"
#include "distributed/distributed_optimizer.h"
#include "nn/counter_rng.h"
#include "nn/model_zoo.h"
#include "nn/optimizer.h"

namespace lockstep::app {
namespace {

nn::Shape input_shape(const std::string& model) {
  return model == "mnist_net" ? nn::Shape{1, 28, 28} : nn::Shape{3, 32, 32};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

std::vector<BenchCase> default_bench_cases() {
  return {{"mnist_net", 64, 1},
          {"mnist_net", 64, 2},
          {"alexnet_cifar", 128, 1},
          {"alexnet_cifar", 128, 2}};
}

BenchResult run_bench(const BenchCase& bench, distributed::Communicator& comm, double min_seconds,
                      distributed::Timeline* timeline) {
  const nn::Shape input = input_shape(bench.model);
  auto backend = nn::make_cpu_backend(cpu_backend_options(bench.threads, bench.precision));
  auto model = nn::build_model(bench.model, {}, input, 10);
  model->reset_parameters(42, nn::Device::kCpu);
  auto optimizer = nn::make_optimizer({.kind = nn::OptimizerKind::kSgd, .momentum = 0.5f},
                                      model->parameters(), nn::Device::kCpu);
  distributed::DistributedOptimizer dopt(comm, *backend, model->parameters(), *optimizer,
                                         {.allreduce_chunk_mb = bench.allreduce_chunk_mb});
  dopt.broadcast_parameters(0);

  // Synthetic, normalised-looking inputs and labels, different per rank.
  nn::Tensor x({bench.batch, input[0], input[1], input[2]});
  const uint64_t key = nn::hash_combine(42, static_cast<uint64_t>(comm.rank()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    x.data()[i] = 4.0f * nn::counter_uniform(key, static_cast<uint64_t>(i)) - 1.0f;
  }
  std::vector<int32_t> labels(static_cast<size_t>(bench.batch));
  std::vector<int64_t> ids(static_cast<size_t>(bench.batch));
  for (int64_t i = 0; i < bench.batch; ++i) {
    labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % 10);
    ids[static_cast<size_t>(i)] = i + comm.rank() * bench.batch;
  }

  distributed::Timeline* spans = nullptr;  // set once warm-up is over
  auto step = [&](int64_t s) {
    nn::ForwardContext ctx{
        .training = true, .seed = 42, .epoch = static_cast<uint64_t>(s), .sample_ids = ids.data()};
    {
      distributed::TimelineSpan span(spans, "forward", "compute");
      model->forward(*backend, x, ctx);
      model->loss(*backend, labels.data(), 1.0f / static_cast<float>(bench.batch), true);
    }
    {
      distributed::TimelineSpan span(spans, "backward", "compute");
      model->backward(*backend, dopt.grad_ready_callback());
    }
    distributed::TimelineSpan span(spans, "optimizer step", "compute");
    dopt.step(0.01f);
  };
  for (int64_t s = 0; s < 3; ++s) step(s);  // warm caches, buffers and threads
  spans = timeline;
  dopt.set_timeline(timeline);

  const auto start = Clock::now();
  BenchResult r;
  r.bench = bench;
  double elapsed = 0.0;
  // Every rank runs the same number of steps: rank 0 decides when to stop.
  for (int64_t done = 0;;) {
    for (int i = 0; i < 5; ++i) step(done++);
    elapsed = seconds_since(start);
    int64_t stop = elapsed >= min_seconds ? 1 : 0;
    comm.broadcast_values(std::span<int64_t>(&stop, 1), 0);
    if (stop) {
      r.steps = done;
      break;
    }
  }
  dopt.set_timeline(nullptr);
  r.seconds_per_step = elapsed / static_cast<double>(r.steps);
  r.images_per_second = static_cast<double>(bench.batch * comm.size()) / r.seconds_per_step;
  return r;
}

AllreduceBenchResult run_allreduce_bench(const AllreduceBenchCase& bench,
                                         distributed::Communicator& comm) {
  auto backend = nn::make_cpu_backend(cpu_backend_options(1));
  auto model = nn::build_model(bench.model, {}, input_shape(bench.model), 10);
  model->reset_parameters(42, nn::Device::kCpu);
  const std::vector<nn::Parameter*>& params = model->parameters();
  auto optimizer = nn::make_optimizer({.kind = nn::OptimizerKind::kSgd}, params, nn::Device::kCpu);
  distributed::DistributedOptimizerConfig config;
  config.first_bucket_mb = bench.first_bucket_mb;
  config.bucket_cap_mb = bench.bucket_cap_mb;
  config.allreduce_chunk_mb = bench.allreduce_chunk_mb;
  config.overlap = bench.overlap;
  distributed::DistributedOptimizer dopt(comm, *backend, params, *optimizer, config);

  AllreduceBenchResult r;
  r.bench = bench;
  r.buckets = dopt.buckets().size();
  int64_t numel = 0;
  for (nn::Parameter* p : params) numel += p->grad.numel();
  r.bytes = numel * static_cast<int64_t>(sizeof(float));
  std::vector<float> plain(static_cast<size_t>(numel));
  // Both sides reduce 1e-3 everywhere, refilled (untimed) before each round:
  // sums grow by the rank count per round.
  auto refill = [&] {
    for (nn::Parameter* p : params)
      std::fill(p->grad.data(), p->grad.data() + p->grad.numel(), 1e-3f);
    std::fill(plain.begin(), plain.end(), 1e-3f);
  };

  // Gradients announced last layer first, as backward does, then waited for
  // as step() waits (sums; step() applies the average in the update).
  auto fused = [&] {
    for (size_t i = params.size(); i-- > 0;) dopt.on_grad_ready(i);
    dopt.reduce_gradients();
  };
  auto timed = [&](const auto& body) {
    comm.barrier();
    const auto start = Clock::now();
    body();
    return seconds_since(start);
  };
  auto reduce_plain = [&] { comm.allreduce(std::span<float>(plain), distributed::ReduceOp::kSum); };
  for (int i = 0; i < 2; ++i) {
    refill();
    timed(fused);
    timed(reduce_plain);
  }
  dopt.reset_stats();
  std::vector<double> times;  // fused, plain, fused, plain, ...
  for (int i = 0; i < bench.repeats; ++i) {
    refill();
    times.push_back(timed(fused));
    times.push_back(timed(reduce_plain));
  }
  const distributed::DistributedOptimizerStats stats = dopt.stats();
  r.pack = stats.pack_seconds / bench.repeats;
  r.allreduce = stats.allreduce_seconds / bench.repeats;
  r.unpack = stats.unpack_seconds / bench.repeats;
  r.exposed = stats.exposed_seconds / bench.repeats;
  comm.allreduce(std::span<double>(times), distributed::ReduceOp::kMax);
  for (size_t i = 0; i < times.size(); i += 2) {
    r.fused.push_back(times[i]);
    r.plain.push_back(times[i + 1]);
  }
  r.fused_median = median(r.fused);
  r.plain_median = median(r.plain);
  return r;
}

std::string format_allreduce_result(const AllreduceBenchResult& r, int ranks) {
  const AllreduceBenchCase& c = r.bench;
  char line[600];
  std::snprintf(
      line, sizeof(line),
      "allreduce %-14s %9.3f MB x %d ranks  %3zu bucket%s (first %g MiB, cap %g MiB, chunk %g "
      "MiB%s)  "
      "fused %9.3f ms %6.2f GB/s  plain %9.3f ms %6.2f GB/s  fused/plain %.2f\n"
      "  fused on rank 0, ms per step: pack %.3f, allreduce %.3f, unpack %.3f, "
      "synchronize %.3f\n",
      c.model.c_str(), r.bytes / 1e6, ranks, r.buckets, r.buckets == 1 ? " " : "s",
      c.first_bucket_mb, c.bucket_cap_mb, c.allreduce_chunk_mb, c.overlap ? ", overlap" : "",
      1e3 * r.fused_median, r.fused_gbps(), 1e3 * r.plain_median, r.plain_gbps(),
      r.fused_gbps() / r.plain_gbps(), 1e3 * r.pack, 1e3 * r.allreduce, 1e3 * r.unpack,
      1e3 * r.exposed);
  auto ms = [](const std::vector<double>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      char x[32];
      std::snprintf(x, sizeof(x), "%s%.4f", i == 0 ? "" : ", ", 1e3 * v[i]);
      s += x;
    }
    return s + "]";
  };
  char head[300];
  std::snprintf(
      head, sizeof(head),
      "bench {\"mode\": \"allreduce\", \"model\": \"%s\", \"bytes\": %lld, \"ranks\": %d, "
      "\"buckets\": %zu, \"first_bucket_mb\": %g, \"bucket_cap_mb\": %g, "
      "\"allreduce_chunk_mb\": %g, \"overlap\": %s, ",
      c.model.c_str(), static_cast<long long>(r.bytes), ranks, r.buckets, c.first_bucket_mb,
      c.bucket_cap_mb, c.allreduce_chunk_mb, c.overlap ? "true" : "false");
  return std::string(line) + head + "\"fused_ms\": " + ms(r.fused) +
         ", \"plain_ms\": " + ms(r.plain) + "}\n";
}

}  // namespace lockstep::app
