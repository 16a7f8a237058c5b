#include "app/commands/timeline_report.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "distributed/stragglers.h"
#include "distributed/timeline.h"

namespace lockstep::app {
namespace {

// One complete ("X") event, microseconds.
struct Span {
  std::string name, category;
  int tid = 0;
  double start = 0.0, end = 0.0;
};

double overlap(const Span& a, const Span& b) {
  return std::max(0.0, std::min(a.end, b.end) - std::max(a.start, b.start));
}

bool is_comm(const Span& s) {
  return s.category == "allreduce" || s.category == "unpack";
}

// "allreduce bucket 3" -> "pack bucket 3".
std::string pack_name(const std::string& allreduce_name) {
  const std::string prefix = "allreduce ";
  if (allreduce_name.rfind(prefix, 0) != 0) return "";
  return "pack " + allreduce_name.substr(prefix.size());
}

// Thread wake-ups around the communication spans of one step (see the header).
double handoff_of(const std::vector<const Span*>& spans, const Span& sync) {
  double total = 0.0;
  const Span* last_comm = nullptr;  // on a communication thread
  const Span* last_any = nullptr;   // on any thread
  for (const Span* a : spans) {
    if (!is_comm(*a)) continue;
    if (last_any == nullptr || a->end > last_any->end) last_any = a;
    if (a->tid == distributed::Timeline::kMainThread) continue;
    if (a->category == "allreduce") {
      double ready = -1.0;
      const std::string pack = pack_name(a->name);
      for (const Span* p : spans) {
        if (p->name == pack && p->end <= a->start) ready = std::max(ready, p->end);
      }
      // Without its pack span the bucket's ready time is unknown: not counted.
      if (ready >= 0.0 && last_comm != nullptr && last_comm->tid == a->tid)
        ready = std::max(ready, last_comm->end);
      if (ready >= 0.0) total += a->start - ready;
    }
    last_comm = a;
  }
  // Waking the caller, unless the caller itself reduced the last bucket.
  if (last_comm != nullptr && last_comm == last_any && sync.end > last_comm->end)
    total += sync.end - last_comm->end;
  return total;
}

StepTimes step_times(const std::vector<const Span*>& spans, const Span& sync) {
  StepTimes t;
  t.exposed = sync.end - sync.start;
  t.backward_end = -1.0;
  for (const Span* s : spans) {
    if (s->name == "backward" && s->tid == distributed::Timeline::kMainThread) {
      t.backward += s->end - s->start;
      t.backward_end = std::max(t.backward_end, s->end);
    } else if (s->category == "allreduce") {
      t.allreduce += s->end - s->start;
      ++t.allreduces;
    }
  }
  for (const Span* s : spans) {
    if (s->tid != distributed::Timeline::kMainThread) continue;
    if (s->category == "compute") t.compute += s->end - s->start - overlap(*s, sync);
    if (s->name == "data wait") t.compute += s->end - s->start;
  }
  for (const Span* a : spans) {
    if (a->category != "allreduce") continue;
    for (const Span* b : spans) {
      if (b->name == "backward" && b->tid == distributed::Timeline::kMainThread)
        t.hidden += overlap(*a, *b);
    }
  }
  t.handoff = handoff_of(spans, sync);
  return t;
}

std::vector<StepTimes> rank_steps(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.start < b.start; });
  std::vector<const Span*> syncs;
  for (const Span& s : spans) {
    if (s.name == "synchronize") syncs.push_back(&s);
  }
  std::sort(syncs.begin(), syncs.end(),
            [](const Span* a, const Span* b) { return a->end < b->end; });
  std::vector<double> ends;
  for (const Span* s : syncs) ends.push_back(s->end);
  std::vector<std::vector<const Span*>> members(syncs.size());
  for (const Span& s : spans) {
    if (s.name == "synchronize") continue;
    const auto it = std::lower_bound(ends.begin(), ends.end(), s.start);
    if (it != ends.end()) members[static_cast<size_t>(it - ends.begin())].push_back(&s);
  }
  std::vector<StepTimes> steps;
  for (size_t i = 0; i < syncs.size(); ++i) steps.push_back(step_times(members[i], *syncs[i]));
  return steps;
}

// "node HOST, precision ..." -> "HOST"; "" without a node label.
std::string node_of_labels(const std::string& labels) {
  const std::string prefix = "node ";
  if (labels.rfind(prefix, 0) != 0) return "";
  return labels.substr(prefix.size(), labels.find(',') - prefix.size());
}

}  // namespace

std::vector<RankSteps> summarize_timeline(const nlohmann::json& events) {
  std::map<int, std::vector<Span>> by_rank;
  std::map<int, std::string> nodes;
  for (const nlohmann::json& e : events) {
    if (e.is_object() && e.value("ph", "") == "M" && e.value("name", "") == "process_labels" &&
        e.contains("args") && e["args"].is_object()) {
      nodes[e.value("pid", 0)] = node_of_labels(e["args"].value("labels", ""));
    }
    if (!e.is_object() || e.value("ph", "") != "X" || !e.contains("ts") || !e.contains("dur"))
      continue;
    Span s;
    s.name = e.value("name", "");
    s.category = e.value("cat", "");
    s.tid = e.value("tid", 0);
    s.start = e["ts"].get<double>();
    s.end = s.start + e["dur"].get<double>();
    by_rank[e.value("pid", 0)].push_back(std::move(s));
  }
  std::vector<RankSteps> out;
  for (auto& [rank, spans] : by_rank)
    out.push_back({rank, nodes[rank], rank_steps(std::move(spans))});
  // Lateness: against the earliest backward end of the same step on any rank.
  size_t common = out.empty() ? 0 : out.front().steps.size();
  for (const RankSteps& r : out) common = std::min(common, r.steps.size());
  for (size_t s = 0; s < common; ++s) {
    double earliest = -1.0;
    for (const RankSteps& r : out) {
      const double end = r.steps[s].backward_end;
      if (end >= 0.0 && (earliest < 0.0 || end < earliest)) earliest = end;
    }
    for (RankSteps& r : out) {
      if (r.steps[s].backward_end >= 0.0) r.steps[s].late = r.steps[s].backward_end - earliest;
    }
  }
  return out;
}

namespace {

std::string row(const std::string& label, size_t steps, const StepTimes& sum) {
  const double n = steps == 0 ? 1.0 : static_cast<double>(steps);
  const double fraction = sum.allreduce > 0.0 ? 100.0 * sum.hidden / sum.allreduce : 0.0;
  char line[200];
  std::snprintf(line, sizeof(line), "%-6s %6zu %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %8.1f%%\n",
                label.c_str(), steps, sum.backward / n / 1e3, sum.allreduce / n / 1e3,
                sum.hidden / n / 1e3, sum.exposed / n / 1e3, sum.handoff / n / 1e3,
                sum.late / n / 1e3, fraction);
  return line;
}

void add(StepTimes& sum, const StepTimes& t) {
  sum.backward += t.backward;
  sum.allreduce += t.allreduce;
  sum.hidden += t.hidden;
  sum.exposed += t.exposed;
  sum.handoff += t.handoff;
  sum.late += t.late;
  sum.compute += t.compute;
  sum.allreduces += t.allreduces;
}

// The median of the steps after `skip` (ComputeRecorder's lower median).
double median_compute(const RankSteps& r, int64_t skip) {
  distributed::ComputeRecorder recorder;
  for (size_t s = static_cast<size_t>(std::max<int64_t>(skip, 0)); s < r.steps.size(); ++s)
    recorder.add(r.steps[s].compute);
  return recorder.median();
}

// "straggler: rank 1 (node1) computes ...", or "straggler: none (...)".
std::string straggler_report(const std::vector<RankSteps>& ranks, const TimelineSummaryArgs& args) {
  std::vector<double> times;
  for (const RankSteps& r : ranks) times.push_back(median_compute(r, args.skip));
  const auto v = distributed::find_straggler(times, args.straggler_threshold);
  if (v.slowest < 0) return "";
  const RankSteps& slowest = ranks[static_cast<size_t>(v.slowest)];
  const std::string node = slowest.node.empty() ? "node unknown" : slowest.node;
  if (v.rank >= 0) {
    auto named = v;
    named.rank = slowest.rank;  // trace pid, not the index
    return distributed::straggler_line(named, node, args.straggler_threshold) + "\n";
  }
  char line[200];
  std::snprintf(line, sizeof(line),
                "straggler: none (slowest rank %d (%s) computes %.2fx the median step time)\n",
                slowest.rank, node.c_str(), v.slowdown);
  return line;
}

}  // namespace

std::string format_timeline_summary(const std::vector<RankSteps>& ranks,
                                    const TimelineSummaryArgs& args) {
  std::string out = args.trace + ": " + std::to_string(ranks.size()) +
                    " rank(s); ms per step (mean over steps after the first " +
                    std::to_string(args.skip) + ")\n";
  out += "rank    steps  backward allreduce    hidden   exposed   handoff      late   hidden\n";
  StepTimes all;
  size_t all_steps = 0;
  std::string json_lines, step_lines;
  for (const RankSteps& r : ranks) {
    StepTimes sum;
    size_t counted = 0;
    for (size_t s = 0; s < r.steps.size(); ++s) {
      const StepTimes& t = r.steps[s];
      if (args.per_step) {
        step_lines += row(std::to_string(r.rank) + ":" + std::to_string(s), 1, t);
      }
      if (static_cast<int64_t>(s) < args.skip) continue;
      add(sum, t);
      ++counted;
    }
    out += row(std::to_string(r.rank), counted, sum);
    add(all, sum);
    all_steps += counted;
    const double n = counted == 0 ? 1.0 : static_cast<double>(counted);
    nlohmann::json j = {{"rank", r.rank},
                        {"steps", counted},
                        {"backward_ms", sum.backward / n / 1e3},
                        {"allreduce_ms", sum.allreduce / n / 1e3},
                        {"hidden_ms", sum.hidden / n / 1e3},
                        {"exposed_ms", sum.exposed / n / 1e3},
                        {"handoff_ms", sum.handoff / n / 1e3},
                        {"late_ms", sum.late / n / 1e3},
                        {"compute_ms", sum.compute / n / 1e3},
                        {"median_compute_ms", median_compute(r, args.skip) / 1e3},
                        {"node", r.node},
                        {"hidden_fraction", sum.allreduce > 0 ? sum.hidden / sum.allreduce : 0.0}};
    json_lines += "timeline " + j.dump() + "\n";
  }
  if (ranks.size() > 1) out += row("all", all_steps, all) + straggler_report(ranks, args);
  if (args.per_step) {
    out += "per step (rank:step):\n" + step_lines;
  }
  return out + json_lines;
}

void add_timeline_summary_options(CLI::App& cmd, TimelineSummaryArgs& args) {
  cmd.add_option("trace", args.trace, "Chrome trace JSON written by --timeline")->required();
  cmd.add_option("--skip", args.skip, "leading steps per rank left out of the means (warm-up)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_flag("--per-step,--per_step", args.per_step, "also print every rank's every step");
  cmd.add_option("--straggler-threshold,--straggler_threshold", args.straggler_threshold,
                 "name a rank whose median step compute is this fraction over the median rank's")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

int run_timeline_summary(const TimelineSummaryArgs& args) {
  const auto ranks = summarize_timeline(distributed::read_trace_events(args.trace));
  std::cout << format_timeline_summary(ranks, args);
  return 0;
}

}  // namespace lockstep::app
