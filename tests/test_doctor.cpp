// `lockstep doctor` (app/commands/doctor.h): the problems it names from gathered
// reports, and the real command under mpiexec with 2 and 3 ranks, with and
// without overlapping taskset pinning.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "app/commands/doctor.h"
#include "app/platform/placement.h"
#include "support/dataset_files.h"
#include "support/run_command.h"

namespace lockstep::app {
namespace {

using testing::contains;
using testing::run_command;
using testing::ScratchDir;

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

DoctorRank rank_on(int rank, const std::string& host, std::vector<int> cpus, int threads) {
  DoctorRank r;
  r.rank = rank;
  r.host = host;
  r.node = host + "/boot";  // node_key's form
  r.cpus = std::move(cpus);
  r.online_cpus = 8;
  r.threads = threads;
  r.data_ok = r.run_dir_ok = true;
  r.data_dir = std::string("/data");
  r.run_dir = std::string("runs/x");
  return r;
}

TEST(Doctor, HealthyJobHasNoProblems) {
  std::vector<DoctorRank> ranks = {rank_on(0, "a", {0, 1, 2, 3}, 4),
                                   rank_on(1, "a", {4, 5, 6, 7}, 4),
                                   rank_on(2, "b", {0, 1, 2, 3}, 4)};
  ranks[0].gpu = std::string("1");
  ranks[1].gpu = std::string("0");
  ranks[2].gpu = std::string("1");  // another node's GPU 1
  EXPECT_TRUE(doctor_problems(ranks).empty()) << joined(doctor_problems(ranks));
}

// Ranks on one GPU (by bus id where known, each calling it 0) are a problem
// unless gpu_share lets them share it.
TEST(Doctor, OneGpuIsAProblemOnlyWithoutGpuShare) {
  std::vector<DoctorRank> ranks = {rank_on(0, "a", {0, 1, 2, 3}, 4),
                                   rank_on(1, "a", {4, 5, 6, 7}, 4)};
  ranks[0].gpu = ranks[1].gpu = std::string("0");
  ranks[0].gpu_bus_id = std::string("0000:41:00.0");
  ranks[1].gpu_bus_id = std::string("0000:42:00.0");
  EXPECT_TRUE(doctor_problems(ranks).empty()) << joined(doctor_problems(ranks));
  ranks[1].gpu_bus_id = ranks[0].gpu_bus_id;
  EXPECT_TRUE(
      contains(joined(doctor_problems(ranks)), "ranks 0, 1 on a take the same GPU 0000:41:00.0"));
  ranks[0].gpu_share = ranks[1].gpu_share = true;
  EXPECT_TRUE(doctor_problems(ranks).empty()) << joined(doctor_problems(ranks));
}

// Containers on two nodes may share a host name: ranks of different nodes
// (boot ids) pinned to "the same" CPUs or GPU are no problem.
TEST(Doctor, RanksOfTwoNodesWithOneHostNameAreApart) {
  std::vector<DoctorRank> ranks = {rank_on(0, "pod", {0, 1}, 2), rank_on(1, "pod", {0, 1}, 2)};
  ranks[0].gpu = ranks[1].gpu = std::string("0");
  ranks[0].gpu_bus_id = ranks[1].gpu_bus_id = std::string("0000:41:00.0");
  ranks[0].node = std::string("pod/boot-a");
  ranks[1].node = std::string("pod/boot-b");
  EXPECT_TRUE(doctor_problems(ranks).empty()) << joined(doctor_problems(ranks));
  EXPECT_TRUE(contains(doctor_table(ranks), "2 ranks on 2 nodes")) << doctor_table(ranks);
  ranks[1].node = ranks[0].node;
  const std::string p = joined(doctor_problems(ranks));
  EXPECT_TRUE(contains(p, "ranks 0, 1 on pod take the same GPU 0000:41:00.0")) << p;
  EXPECT_TRUE(contains(p, "ranks 0, 1 on pod are pinned to the same CPUs 0-1")) << p;
}

TEST(Doctor, NamesEachProblem) {
  std::vector<DoctorRank> ranks = {rank_on(0, "a", {0, 1}, 2), rank_on(1, "a", {1, 2}, 4),
                                   rank_on(2, "b", {0, 1, 2, 3, 4, 5, 6, 7}, 8),
                                   rank_on(3, "b", {0, 1, 2, 3, 4, 5, 6, 7}, 8)};
  ranks[0].gpu = ranks[1].gpu = std::string("0");
  ranks[2].data_ok = ranks[3].data_ok = false;
  ranks[3].device_problem = std::string("no CUDA driver on this node");
  const std::string p = joined(doctor_problems(ranks));
  EXPECT_TRUE(contains(p, "ranks 0, 1 on a take the same GPU 0")) << p;
  EXPECT_TRUE(contains(p, "ranks 0, 1 on a are pinned to the same CPUs 1")) << p;
  EXPECT_TRUE(contains(p, "rank 1 on a starts 4 threads but has 2 CPUs in its affinity mask (1-2)"))
      << p;
  EXPECT_TRUE(contains(p, "b: 2 ranks start 16 compute threads on 8 CPUs")) << p;
  EXPECT_TRUE(contains(p, "b: the data set is not in /data (ranks 2, 3)")) << p;
  EXPECT_TRUE(contains(p, "rank 3: no CUDA driver on this node")) << p;
  EXPECT_FALSE(contains(p, "ranks 2, 3 on b are pinned")) << p;  // unpinned: shared by design
}

// mpiexec -n N [PREFIX] lockstep doctor with a data folder and run dir.
testing::CommandResult doctor(int ranks, const std::string& prefix, const std::string& extra = "") {
  static ScratchDir dir;
  const std::string data = dir.file("data");
  std::filesystem::create_directories(data);
  std::ofstream(data + "/train-images-idx3-ubyte.gz") << "x";
  return run_command("timeout 120 " + std::string(LOCKSTEP_MPIEXEC) + " -n " +
                     std::to_string(ranks) + " " + prefix +
                     " " LOCKSTEP_BINARY " doctor --device cpu --data-dir " + data + " --run-dir " +
                     dir.file("run") + " " + extra);
}

TEST(Doctor, TwoRanksUnpinnedShareTheMachine) {
  const auto r = doctor(2, "");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "lockstep doctor: 2 ranks on 1 node; MPI: MPICH")) << r.output;
  EXPECT_TRUE(contains(r.output, "no problems found")) << r.output;
  const std::string cpus = cpu_list_string(affinity_cpus());
  EXPECT_TRUE(contains(r.output, "0/2    " + cpus)) << r.output;
  EXPECT_TRUE(contains(r.output, "1/2    " + cpus)) << r.output;
}

TEST(Doctor, TwoRanksPinnedToTheSameCpuAreNamed) {
  const auto r = doctor(2, "taskset -c 0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "ranks 0, 1 on ")) << r.output;
  EXPECT_TRUE(contains(r.output, "are pinned to the same CPUs 0")) << r.output;
}

TEST(Doctor, TwoRanksPinnedApartAreFine) {
  ASSERT_GE(online_cpus(), 2);
  const auto r = doctor(2, "bash -c 'exec taskset -c $MPI_LOCALRANKID \"$0\" \"$@\"'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "0/2    0 (1)         1")) << r.output;
  EXPECT_TRUE(contains(r.output, "1/2    1 (1)         1")) << r.output;
  EXPECT_TRUE(contains(r.output, "no problems found")) << r.output;
}

TEST(Doctor, ThreeRanksOnOneCpuWithTwoThreadsEach) {
  const auto r = doctor(3, "taskset -c 0", "--threads 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  for (const char* p : {"ranks 0, 1 on", "ranks 0, 2 on", "ranks 1, 2 on"}) {
    EXPECT_TRUE(contains(r.output, p)) << p << "\n" << r.output;
  }
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(contains(r.output, "rank " + std::to_string(rank) + " on ") &&
                contains(r.output, "starts 2 threads but has 1 CPU in its affinity mask (0)"))
        << r.output;
  }
}

TEST(Doctor, ThreeRanksUnpinnedWithOneThreadEach) {
  const auto r = doctor(3, "", "--threads 1");
  EXPECT_TRUE(contains(r.output, "3 ranks on 1 node")) << r.output;
  for (const char* local : {"0/3", "1/3", "2/3"})
    EXPECT_TRUE(contains(r.output, local)) << r.output;
  EXPECT_FALSE(contains(r.output, "pinned to the same CPUs")) << r.output;
  // Three threads oversubscribe a machine of fewer than three CPUs.
  EXPECT_EQ(contains(r.output, "3 ranks start 3 compute threads"), online_cpus() < 3) << r.output;
}

TEST(Doctor, MissingDataAndUnwritableRunDirAreNamed) {
  ScratchDir dir;
  std::ofstream(dir.file("a-file")) << "x";  // a run_dir below a file cannot be made
  const std::string run_dir = dir.file("a-file/run");
  const auto r = run_command("timeout 120 " + std::string(LOCKSTEP_MPIEXEC) +
                             " -n 2 " LOCKSTEP_BINARY
                             " doctor --device cpu --data-dir /nonexistent/data --run-dir " +
                             run_dir);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "the data set is not in /nonexistent/data (ranks 0, 1)"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "run_dir " + run_dir + " cannot be created or written"))
      << r.output;
}

}  // namespace
}  // namespace lockstep::app
