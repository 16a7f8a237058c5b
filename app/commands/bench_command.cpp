#include "app/commands/bench_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <optional>

#include "app/commands/bench.h"
#include "app/config/config.h"
#include "distributed/stall.h"
#include "common/error.h"

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
  std::printf("%-14s batch %4lld x %d rank%s  %d thread%s  %10.1f img/s  %8.3f ms/step%s%s%s\n",
              c.model.c_str(), static_cast<long long>(c.batch), ranks, ranks == 1 ? " " : "s",
              c.threads, c.threads == 1 ? " " : "s", r.images_per_second, 1e3 * r.seconds_per_step,
              chunk_note, fp32 ? "" : "  ", fp32 ? "" : precision.c_str());
  std::printf(
      "bench {\"model\": \"%s\", \"batch\": %lld, \"ranks\": %d, \"threads\": %d, "
      "\"allreduce_chunk_mb\": %g, \"precision\": \"%s\", \"images_per_second\": %.1f}\n",
      c.model.c_str(), static_cast<long long>(c.batch), ranks, c.threads, c.allreduce_chunk_mb,
      precision.c_str(), r.images_per_second);
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
}

int run_bench_command(const BenchArgs& args, distributed::Communicator& comm) {
  distributed::StallPolicy stall;
  stall.warning_seconds = args.stall_warning_s;
  comm.set_stall_policy(stall);
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
