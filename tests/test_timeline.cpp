// Timeline (distributed/timeline.h) in one process: spans from two threads,
// strict JSON after close, process labels, a file left behind by a killed
// process still readable, per-rank paths and merging. Across ranks:
// tests/mpi/test_timeline.cpp; the summary: test_timeline_report.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "distributed/timeline.h"
#include "support/run_files.h"

namespace lockstep::distributed {
namespace {

namespace fs = std::filesystem;

class TimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lockstep_timeline_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::vector<nlohmann::json> events_named(const nlohmann::json& events, const std::string& name) {
  std::vector<nlohmann::json> out;
  for (const auto& e : events) {
    if (e.value("name", "") == name) out.push_back(e);
  }
  return out;
}

// What the run computes in labels the rank's track (shown beside its name).
TEST_F(TimelineTest, ProcessLabelsNameThePrecisionAndTheKernels) {
  const std::string file = path("trace.json");
  {
    Timeline t(file, 2);
    t.label_process("precision bf16, kernels avx512_bf16");
    t.close();
  }
  const nlohmann::json events = nlohmann::json::parse(lockstep::testing::read_file(file));
  const auto labels = events_named(events, "process_labels");
  ASSERT_EQ(labels.size(), 1u);
  EXPECT_EQ(labels[0]["ph"], "M");
  EXPECT_EQ(labels[0]["pid"], 2);
  EXPECT_EQ(labels[0]["args"]["labels"], "precision bf16, kernels avx512_bf16");
}

TEST_F(TimelineTest, SpansFromTwoThreadsAreStrictJsonAfterClose) {
  const std::string file = path("trace.json");
  {
    Timeline t(file, 3);
    {
      TimelineSpan forward(&t, "forward", "forward");
      TimelineSpan inner(&t, "pack bucket 3", "pack");
    }
    std::thread comm([&] {
      for (int i = 0; i < 150; ++i) {
        TimelineSpan s(&t, "allreduce bucket 3", "allreduce", Timeline::kCommThread);
      }
    });
    for (int i = 0; i < 150; ++i) TimelineSpan s(&t, "backward", "backward");
    comm.join();
    t.begin("optimizer \"step\"", "optimizer step");
    t.end("optimizer \"step\"", "optimizer step");
    t.instant("checkpoint", "checkpoint");
    t.close();
    t.close();                                     // idempotent
    TimelineSpan after(&t, "ignored", "ignored");  // dropped after close
  }
  const nlohmann::json events =
      nlohmann::json::parse(lockstep::testing::read_file(file));  // strict
  ASSERT_TRUE(events.is_array());
  EXPECT_EQ(events.size(), 4u + 2u + 300u + 3u);
  const auto process = events_named(events, "process_name");
  ASSERT_EQ(process.size(), 1u);
  EXPECT_EQ(process[0]["args"]["name"], "rank 3");
  EXPECT_EQ(process[0]["ph"], "M");
  const auto comm = events_named(events, "allreduce bucket 3");
  ASSERT_EQ(comm.size(), 150u);
  for (const auto& e : comm) {
    EXPECT_EQ(e["ph"], "X");
    EXPECT_EQ(e["pid"], 3);
    EXPECT_EQ(e["tid"], 1);
    EXPECT_GE(e["dur"].get<double>(), 0.0);
  }
  const auto forward = events_named(events, "forward");
  const auto pack = events_named(events, "pack bucket 3");
  ASSERT_EQ(forward.size(), 1u);
  ASSERT_EQ(pack.size(), 1u);
  // The inner span lies inside the outer one.
  EXPECT_GE(pack[0]["ts"].get<double>(), forward[0]["ts"].get<double>());
  EXPECT_LE(pack[0]["ts"].get<double>() + pack[0]["dur"].get<double>(),
            forward[0]["ts"].get<double>() + forward[0]["dur"].get<double>() + 0.002);
  const auto step = events_named(events, "optimizer \"step\"");
  ASSERT_EQ(step.size(), 2u);
  EXPECT_EQ(step[0]["ph"], "B");
  EXPECT_EQ(step[1]["ph"], "E");
  EXPECT_EQ(events_named(events, "ignored").size(), 0u);
}

TEST_F(TimelineTest, FileOfAKilledProcessIsReadable) {
  const std::string file = path("killed.json");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Timeline t(file, 1);
    for (int i = 0; i < 250; ++i) TimelineSpan s(&t, "forward", "forward");  // 2 automatic flushes
    t.flush();
    for (int i = 0; i < 5; ++i) TimelineSpan s(&t, "lost", "lost");  // buffered, never written
    raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));

  std::string text = lockstep::testing::read_file(file);
  ASSERT_EQ(text.substr(0, 2), "[\n");
  ASSERT_EQ(text.substr(text.size() - 2), ",\n");  // cut off: no "]"
  EXPECT_TRUE(nlohmann::json::parse(text, nullptr, false).is_discarded());
  // What trace viewers do: drop the trailing comma, close the array.
  const nlohmann::json repaired = nlohmann::json::parse(text.substr(0, text.size() - 2) + "]");
  EXPECT_EQ(repaired.size(), 4u + 250u);
  EXPECT_EQ(read_trace_events(file).size(), 4u + 250u);

  // A last line cut in the middle of an event is dropped too.
  std::ofstream(file, std::ios::app) << "{\"name\":\"forw";
  EXPECT_EQ(read_trace_events(file).size(), 4u + 250u);
  // ...but a broken event before good ones is an error naming the file.
  std::ofstream(file, std::ios::app)
      << "\n{\"name\":\"x\",\"ph\":\"i\",\"ts\":1,\"pid\":1,\"tid\":0},\n";
  try {
    read_trace_events(file);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}

TEST_F(TimelineTest, RankPathsAndMergeGiveOneTrackPerRank) {
  EXPECT_EQ(timeline_rank_path("out/trace.json", 0), "out/trace.json");
  EXPECT_EQ(timeline_rank_path("out/trace.json", 2), "out/trace.rank2.json");
  EXPECT_EQ(timeline_rank_path("out/trace", 1), "out/trace.rank1");

  const std::string main_file = path("trace.json");
  for (int rank = 0; rank < 2; ++rank) {
    Timeline t(timeline_rank_path(main_file, rank), rank);
    TimelineSpan s(&t, "forward", "forward");
  }
  // A third rank's file that was never written is skipped and named.
  const std::string missing = timeline_rank_path(main_file, 2);
  auto skipped = merge_timelines({main_file, timeline_rank_path(main_file, 1), missing}, main_file);
  EXPECT_EQ(skipped, (std::vector<std::string>{missing}));
  const nlohmann::json merged =
      nlohmann::json::parse(lockstep::testing::read_file(main_file));  // strict
  std::set<int> pids, forward_pids;
  for (const auto& e : merged) {
    pids.insert(e["pid"].get<int>());
    if (e["name"] == "forward") forward_pids.insert(e["pid"].get<int>());
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_EQ(forward_pids, (std::set<int>{0, 1}));
  EXPECT_EQ(events_named(merged, "process_name").size(), 2u);
  EXPECT_FALSE(fs::exists(main_file + ".tmp"));
}

TEST_F(TimelineTest, FinishWithOneRankLeavesAStrictFile) {
  auto comm = make_single_communicator();
  auto t = make_timeline(path("solo.json"), *comm);
  { TimelineSpan s(t.get(), "evaluation", "evaluation"); }
  EXPECT_TRUE(finish_timeline(*t, *comm).empty());
  const nlohmann::json events =
      nlohmann::json::parse(lockstep::testing::read_file(path("solo.json")));
  EXPECT_EQ(events_named(events, "evaluation").size(), 1u);
}

TEST_F(TimelineTest, DisabledTimelineRecordsNothingAndBadPathsAreNamed) {
  { TimelineSpan s(nullptr, "forward", "forward"); }
  const std::string bad = path("no/such/dir/trace.json");
  try {
    Timeline t(bad, 0);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_trace_events(path("absent.json")), InputError);
  std::ofstream(path("not_a_trace.json")) << "hello\n";
  EXPECT_THROW(read_trace_events(path("not_a_trace.json")), InputError);
}

}  // namespace
}  // namespace lockstep::distributed
