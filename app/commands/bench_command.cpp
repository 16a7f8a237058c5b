#include "app/commands/bench_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include "app/commands/bench.h"
#include "app/config/config.h"
#include "common/error.h"
#include "distributed/liveness.h"
#include "distributed/stall.h"
#include "nn/resnet_zoo.h"

namespace lockstep::app {
namespace {

// The fused gradient reduction against one plain allreduce of the same bytes.
int bench_allreduce(const BenchArgs& args, distributed::Communicator& comm) {
  for (const std::string& model : args.models) {
    for (double cap : args.bucket_caps) {
      for (double chunk : args.chunks) {
        const auto r = run_allreduce_bench(
            {model, args.first_bucket_mb, cap, !args.no_overlap, args.repeats, chunk}, comm);
        if (comm.rank() == 0) std::cout << format_allreduce_result(r, comm.size());
        std::cout.flush();
      }
    }
  }
  return 0;
}

void print_case(const BenchCase& c, const BenchResult& r, int ranks, bool note_chunk) {
  char chunk_note[48] = "";
  if (note_chunk)
    std::snprintf(chunk_note, sizeof(chunk_note), "  chunk %g MiB", c.allreduce_chunk_mb);
  const std::string precision = nn::to_string(c.precision);
  const bool fp32 = c.precision == nn::Precision::kFp32;
  std::printf("%-14s batch %4lld x %d rank%s  %d thread%s  %10.1f img/s  %8.3f ms/step%s%s%s%s\n",
              c.model.c_str(), static_cast<long long>(c.batch), ranks, ranks == 1 ? " " : "s",
              c.threads, c.threads == 1 ? " " : "s", r.images_per_second, 1e3 * r.seconds_per_step,
              chunk_note, fp32 ? "" : "  ", fp32 ? "" : precision.c_str(),
              c.reproducible ? "  reproducible" : "");
  std::printf(
      "bench {\"model\": \"%s\", \"batch\": %lld, \"ranks\": %d, \"threads\": %d, "
      "\"allreduce_chunk_mb\": %g, \"precision\": \"%s\", \"reproducible\": %s, "
      "\"images_per_second\": %.1f}\n",
      c.model.c_str(), static_cast<long long>(c.batch), ranks, c.threads, c.allreduce_chunk_mb,
      precision.c_str(), c.reproducible ? "true" : "false", r.images_per_second);
  std::fflush(stdout);
}

// The two modes side by side: alternated, kModeRounds rounds each (the
// machine's noise hits both alike), medians compared.
void compare_modes(BenchCase c, const BenchArgs& args, distributed::Communicator& comm) {
  constexpr int kModeRounds = 3;
  std::vector<double> rates[2];
  BenchResult last[2];
  for (int round = 0; round < kModeRounds; ++round) {
    for (int mode = 0; mode < 2; ++mode) {
      c.reproducible = mode == 1;
      last[mode] = run_bench(c, comm, args.seconds);
      rates[mode].push_back(last[mode].images_per_second);
    }
  }
  if (comm.rank() != 0) return;
  double median[2];
  for (int mode = 0; mode < 2; ++mode) {
    std::sort(rates[mode].begin(), rates[mode].end());
    median[mode] = rates[mode][kModeRounds / 2];
    last[mode].images_per_second = median[mode];
    last[mode].seconds_per_step = static_cast<double>(c.batch * comm.size()) / median[mode];
    c.reproducible = mode == 1;
    print_case(c, last[mode], comm.size(), false);
  }
  std::printf(
      "reproducible cost %-14s %d rank%s %d thread%s: %.1f%% (median of %d alternating "
      "rounds: %.1f vs %.1f img/s)\n",
      c.model.c_str(), comm.size(), comm.size() == 1 ? "" : "s", c.threads,
      c.threads == 1 ? "" : "s", 100.0 * (1.0 - median[1] / median[0]), kModeRounds, median[1],
      median[0]);
  std::fflush(stdout);
}

}  // namespace

void add_bench_options(CLI::App& cmd, BenchArgs& args) {
  cmd.add_option("--model", args.models, "models (default: mnist_net alexnet_cifar)");
  cmd.add_option("--threads", args.threads, "thread counts per rank (default: 1 2)")
      ->check(CLI::Range(0, kMaxThreads));
  cmd.add_option("--batch", args.batch,
                 "batch per rank (0: 64 for mnist_net, 128 for alexnet_cifar)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  cmd.add_option("--seconds", args.seconds, "minimum timed seconds per case")
      ->capture_default_str();
  cmd.add_option("--timeline", args.timeline, "Chrome trace of the timed steps");
  cmd.add_option("--precision", args.precision, "fp32 | bf16 (as train's key)")
      ->capture_default_str();
  cmd.add_option("--reproducible", args.reproducible,
                 "off | on | both: the reproducible mode; both: the two modes alternated, "
                 "medians and the cost")
      ->check(CLI::IsMember({"off", "on", "both"}));
  cmd.add_flag("--allreduce", args.allreduce,
               "time the fused gradient reduction against one plain allreduce");
  cmd.add_option("--bucket-cap-mb,--bucket_cap_mb", args.bucket_caps,
                 "--allreduce: bucket caps, MiB (0: one bucket per parameter)")
      ->capture_default_str();
  cmd.add_option("--allreduce-chunk-mb,--allreduce_chunk_mb", args.chunks,
                 "pieces of each bucket's allreduce, MiB (0: whole buckets); several: one run each")
      ->capture_default_str();
  cmd.add_option("--first-bucket-mb,--first_bucket_mb", args.first_bucket_mb,
                 "--allreduce: first bucket's limit, MiB")
      ->capture_default_str();
  cmd.add_option("--repeats", args.repeats, "--allreduce: timed repetitions")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_flag("--no-overlap,--no_overlap", args.no_overlap,
               "--allreduce: reduce every bucket on the calling thread");
  cmd.add_option("--stall-warning-s,--stall_warning_s", args.stall_warning_s,
                 "as train's key; 0 makes collectives plain blocking MPI calls (not polled)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--liveness-timeout-s,--liveness_timeout_s", args.liveness_timeout_s,
                 "as train's key: across nodes, a frozen or cut-off node ends the job; 0: no "
                 "heartbeat")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--heartbeat-interval-s,--heartbeat_interval_s", args.heartbeat_interval_s,
                 "as train's key")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

int run_bench_command(const BenchArgs& args, distributed::Communicator& comm) {
  distributed::StallPolicy stall;
  stall.warning_seconds = args.stall_warning_s;
  comm.set_stall_policy(stall);
  // As in training: a frozen, cut-off or powered-off node ends the job.
  distributed::LivenessPolicy liveness;
  liveness.timeout_seconds = args.liveness_timeout_s;
  liveness.heartbeat_seconds = args.heartbeat_interval_s;
  const auto monitor = distributed::start_liveness(comm, liveness);
  if (args.allreduce) return bench_allreduce(args, comm);
  std::unique_ptr<distributed::Timeline> timeline;
  if (!args.timeline.empty()) timeline = distributed::make_timeline(args.timeline, comm);
  const std::optional<nn::Precision> precision = nn::parse_precision(args.precision);
  if (!precision) {
    fail_input("bench --precision \"", args.precision, "\" is not a precision (",
               nn::names_of(nn::kPrecisionNames, ", "), ")");
  }
  nn::check_cpu_precision(*precision, "bench --precision");
  for (const std::string& model : args.models) {
    for (int threads : args.threads) {
      for (double chunk : args.chunks) {
        BenchCase c{model, args.batch, threads, chunk};
        c.precision = *precision;
        if (c.batch == 0) c.batch = model == "mnist_net" ? 64 : 128;
        // BatchNorm models: SyncBatchNorm in both modes (the reproducible one needs it).
        c.sync_batchnorm = args.reproducible != "off" && nn::is_resnet_model(model);
        if (args.reproducible == "both") {
          compare_modes(c, args, comm);
          continue;
        }
        c.reproducible = args.reproducible == "on";
        const auto r = run_bench(c, comm, args.seconds, timeline.get());
        if (comm.rank() == 0) print_case(c, r, comm.size(), args.chunks.size() > 1);
      }
    }
  }
  if (timeline) {
    for (const std::string& lost : distributed::finish_timeline(*timeline, comm))
      std::fprintf(stderr, "lockstep bench: timeline: could not merge %s\n", lost.c_str());
  }
  return 0;
}

}  // namespace lockstep::app
