#include "distributed/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/enum_table.h"
#include "common/error.h"

namespace lockstep::distributed {

void check_16bit(Compression format, ReduceOp op) {
  LOCKSTEP_CHECK(format == Compression::kFp16 || format == Compression::kBf16,
                 "allreduce_16bit needs fp16 or bf16, got ", to_string(format));
  LOCKSTEP_CHECK(op == ReduceOp::kSum || op == ReduceOp::kAverage,
                 "allreduce_16bit supports sum and average, got ", to_string(op));
}

constexpr nn::EnumEntry<ReduceOp, const char*> kReduceOpNames[] = {{ReduceOp::kSum, "sum"},
                                                                   {ReduceOp::kAverage, "average"},
                                                                   {ReduceOp::kMin, "min"},
                                                                   {ReduceOp::kMax, "max"}};

std::string to_string(ReduceOp op) {
  return nn::value_of(kReduceOpNames, op).value_or("?");
}

void Communicator::broadcast_string(std::string& s, int root) {
  int64_t length = static_cast<int64_t>(s.size());
  broadcast_values(std::span<int64_t>(&length, 1), root);
  s.resize(static_cast<size_t>(length));
  broadcast(std::as_writable_bytes(std::span<char>(s.data(), s.size())), root);
}

std::vector<std::string> Communicator::allgather_string(const std::string& s) {
  const auto lengths = allgather_value<int64_t>(static_cast<int64_t>(s.size()));
  const size_t width = static_cast<size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::string padded = s;
  padded.resize(width, ' ');
  std::string all(width * lengths.size(), ' ');
  allgather(std::as_bytes(std::span<const char>(padded.data(), width)),
            std::as_writable_bytes(std::span<char>(all.data(), all.size())));
  std::vector<std::string> out;
  for (size_t i = 0; i < lengths.size(); ++i)
    out.push_back(all.substr(i * width, static_cast<size_t>(lengths[i])));
  return out;
}

namespace {

class SingleCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  int node_count() const override { return 1; }
  std::string host_name() const override {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    return name;
  }
  std::string describe() const override { return "single process"; }
  void allreduce(std::span<float>, ReduceOp) override {}
  void allreduce(std::span<double>, ReduceOp) override {}
  void allreduce(std::span<int64_t>, ReduceOp) override {}
  void allreduce_16bit(std::span<uint16_t>, Compression format, ReduceOp op) override {
    check_16bit(format, op);
  }
  void broadcast(std::span<std::byte>, int root) override { check_root(root); }
  void allgather(std::span<const std::byte> in, std::span<std::byte> out) override {
    LOCKSTEP_CHECK(out.size() == in.size(), "allgather sizes ", in.size(), " and ", out.size());
    if (!in.empty()) std::memcpy(out.data(), in.data(), in.size());
  }
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) noexcept override { std::_Exit(exit_code); }

 private:
  static void check_root(int root) { LOCKSTEP_CHECK(root == 0, "broadcast root ", root, " of 1"); }
};

}  // namespace

std::unique_ptr<Communicator> make_single_communicator() {
  return std::make_unique<SingleCommunicator>();
}

}  // namespace lockstep::distributed
