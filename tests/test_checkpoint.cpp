#include <gtest/gtest.h>

#include <unistd.h>
#include <zlib.h>
#include "support/gpu_skip.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "app/checkpoint/checkpoint.h"
#if LOCKSTEP_HAVE_CUDA
#include "nn/cuda/cuda_backend.h"
#endif
#include "common/error.h"
#include "nn/tensor.h"

namespace lockstep::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

uint32_t crc_of(const std::string& bytes, size_t begin, size_t end) {
  return static_cast<uint32_t>(::crc32(0, reinterpret_cast<const Bytef*>(bytes.data() + begin),
                                       static_cast<uInt>(end - begin)));
}

// Recomputes the header and trailer CRCs after a test edited the bytes, so
// the edit reaches the checks behind them.
void reseal(std::string& bytes) {
  const uint32_t header = crc_of(bytes, 0, 20);
  std::memcpy(bytes.data() + 20, &header, 4);
  const uint32_t all = crc_of(bytes, 0, bytes.size() - 12);
  std::memcpy(bytes.data() + bytes.size() - 12, &all, 4);
}

// The message of the InputError that f throws ("" and a test failure when it
// throws nothing or something else).
template <typename F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected InputError, nothing was thrown";
  return "";
}

std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& item : fs::directory_iterator(dir)) {
    const std::string name = item.path().filename().string();
    if (name.find(".tmp.") != std::string::npos) found.push_back(name);
  }
  return found;
}

Checkpoint sample_checkpoint() {
  Checkpoint c;
  c.meta = {{"epoch", 3},
            {"step", 360},
            {"rng", {{"seed", 42}, {"state", std::numeric_limits<uint64_t>::max()}}},
            {"model", "mnist_net"},
            {"classes", {"T-shirt/top", "Trouser", "caf\u00e9 \u00fcber"}},
            {"lr", 0.1 / 3.0}};
  CheckpointEntry w{"conv1.weight", {4, 1, 3, 3}, {}};
  for (int i = 0; i < 36; ++i) w.values.push_back(std::sin(static_cast<float>(i)) * 1e3f);
  CheckpointEntry special{"fc.bias", {7}, {}};
  special.values = {-0.0f,
                    std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::denorm_min(),
                    std::numeric_limits<float>::max(),
                    std::bit_cast<float>(0x7fc01234u),  // NaN with a payload
                    1.0f};
  c.entries.push_back(std::move(w));
  c.entries.push_back(std::move(special));
  c.entries.push_back({"scalar", {}, {2.5f}});
  c.entries.push_back({"conv1.weight.momentum_buffer", {0, 3}, {}});
  return c;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::temp_directory_path() / ("lockstep_ckpt_" + std::to_string(::getpid()) + "_" +
                                         info->test_suite_name() + "_" + info->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  std::string dir_;
};

using CheckpointFormat = CheckpointTest;
using CheckpointLoad = CheckpointTest;
using CheckpointSave = CheckpointTest;
using CheckpointStoreTest = CheckpointTest;

TEST_F(CheckpointFormat, RoundTripIsBitIdentical) {
  const Checkpoint saved = sample_checkpoint();
  const std::string path = file("a.lsck");
  save_checkpoint(path, saved);
  const Checkpoint loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.meta, saved.meta);
  EXPECT_EQ(loaded.meta["rng"]["state"].get<uint64_t>(), std::numeric_limits<uint64_t>::max());
  ASSERT_EQ(loaded.entries.size(), saved.entries.size());
  for (size_t i = 0; i < saved.entries.size(); ++i) {
    const CheckpointEntry& a = saved.entries[i];
    const CheckpointEntry& b = loaded.entries[i];
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.shape, a.shape) << a.name;
    ASSERT_EQ(b.values.size(), a.values.size()) << a.name;
    for (size_t j = 0; j < a.values.size(); ++j) {
      EXPECT_EQ(std::bit_cast<uint32_t>(b.values[j]), std::bit_cast<uint32_t>(a.values[j]))
          << a.name << "[" << j << "]";
    }
  }
  ASSERT_NE(loaded.find("fc.bias"), nullptr);
  EXPECT_EQ(std::bit_cast<uint32_t>(loaded.find("fc.bias")->values[5]), 0x7fc01234u);
  EXPECT_EQ(loaded.find("nope"), nullptr);
  // Saving what was loaded reproduces the file byte for byte.
  save_checkpoint(file("b.lsck"), loaded);
  EXPECT_EQ(read_bytes(file("b.lsck")), read_bytes(path));
}

TEST_F(CheckpointFormat, LayoutStartsWithMagicVersionAndSize) {
  const std::string path = file("a.lsck");
  save_checkpoint(path, sample_checkpoint());
  const std::string bytes = read_bytes(path);
  EXPECT_EQ(bytes.substr(0, 8), "LOCKSTEP");
  uint32_t version = 0;
  uint64_t size = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&size, bytes.data() + 12, 8);
  EXPECT_EQ(version, kCheckpointFormatVersion);
  EXPECT_EQ(size, bytes.size());
  EXPECT_EQ(bytes.substr(bytes.size() - 8), "LSCK-END");
  uint32_t crc = 0;
  std::memcpy(&crc, bytes.data() + bytes.size() - 12, 4);
  EXPECT_EQ(crc, crc_of(bytes, 0, bytes.size() - 12));
}

TEST_F(CheckpointFormat, MakeCheckpointCopiesTensorsAndRestoreFillsThem) {
  nn::Tensor weight({2, 3});
  nn::Tensor bias({3});
  for (int i = 0; i < 6; ++i) weight.data()[i] = 0.5f * static_cast<float>(i) - 1.0f;
  for (int i = 0; i < 3; ++i) bias.data()[i] = 10.0f + static_cast<float>(i);
  const std::string path = file("m.lsck");
  save_checkpoint(path,
                  make_checkpoint({{"epoch", 1}}, {{"fc.weight", &weight}, {"fc.bias", &bias}}));
  weight.data()[0] = 99.0f;  // the checkpoint holds a copy

  nn::Tensor weight2({2, 3});
  nn::Tensor bias2({3});
  const Checkpoint loaded = load_checkpoint(path);
  restore_tensors(loaded, path, {{"fc.bias", &bias2}, {"fc.weight", &weight2}});
  EXPECT_EQ(weight2.data()[0], -1.0f);
  for (int i = 1; i < 6; ++i) EXPECT_EQ(weight2.data()[i], weight.data()[i]);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bias2.data()[i], bias.data()[i]);
  EXPECT_EQ(loaded.meta["epoch"], 1);
}

TEST_F(CheckpointFormat, DeviceTensorsRoundTripThroughTheHost) {
#if LOCKSTEP_HAVE_CUDA
  if (nn::cuda_device_count() == 0) {
    LOCKSTEP_SKIP_NO_DEVICE(nn::cuda_devices_description());
  }
#else
  LOCKSTEP_SKIP_NOT_BUILT("no device tensors to test");
#endif
  nn::Tensor host({5});
  for (int i = 0; i < 5; ++i) host.data()[i] = static_cast<float>(i) + 0.25f;
  nn::Tensor device_a({5}, nn::Device::kCuda);
  device_a.copy_from(host);
  const Checkpoint c = make_checkpoint(json::object(), {{"x", &device_a}});
  EXPECT_EQ(c.entries.at(0).values, std::vector<float>(host.span().begin(), host.span().end()));
  nn::Tensor device_b({5}, nn::Device::kCuda);
  restore_tensors(c, "mem", {{"x", &device_b}});
  nn::Tensor back({5});
  back.copy_from(device_b);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(back.data()[i], host.data()[i]);
}

TEST_F(CheckpointLoad, RefusesMissingFileAndDirectory) {
  const std::string missing = file("nothing-here.lsck");
  std::string msg = input_error([&] { load_checkpoint(missing); });
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  msg = input_error([&] { load_checkpoint(dir_); });
  EXPECT_NE(msg.find(dir_), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
}

TEST_F(CheckpointLoad, RefusesTruncatedFilesAtEveryPart) {
  const std::string good = file("good.lsck");
  save_checkpoint(good, sample_checkpoint());
  const std::string bytes = read_bytes(good);
  const size_t size = bytes.size();
  // Inside the magic, the header, the metadata, an entry, the trailer.
  const std::vector<size_t> cuts = {0,        5,          10,        17,       24,      40,
                                    size / 2, size - 100, size - 12, size - 5, size - 1};
  const std::string path = file("cut.lsck");
  for (size_t cut : cuts) {
    write_bytes(path, bytes.substr(0, cut));
    const std::string msg = input_error([&] { load_checkpoint(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    if (cut == 0) {
      EXPECT_NE(msg.find("empty (0 bytes): truncated"), std::string::npos) << msg;
    } else if (cut < 24) {
      EXPECT_NE(msg.find("is truncated: it ends after " + std::to_string(cut) +
                         " bytes, expected at least 24"),
                std::string::npos)
          << msg;
    } else {
      EXPECT_NE(msg.find("is truncated: it ends after " + std::to_string(cut) +
                         " bytes, expected " + std::to_string(size)),
                std::string::npos)
          << msg;
    }
  }
}

TEST_F(CheckpointLoad, RefusesWrongMagicAndTrailingData) {
  const std::string path = file("x.lsck");
  write_bytes(path, "PK\x03\x04 this is a zip file, not a checkpoint at all............");
  std::string msg = input_error([&] { load_checkpoint(path); });
  EXPECT_NE(msg.find(path + " is not a lockstep checkpoint"), std::string::npos) << msg;

  save_checkpoint(path, sample_checkpoint());
  write_bytes(path, read_bytes(path) + "extra");
  msg = input_error([&] { load_checkpoint(path); });
  EXPECT_NE(msg.find(path + " is corrupt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("data after its end"), std::string::npos) << msg;
}

TEST_F(CheckpointLoad, RefusesOtherFormatVersions) {
  const std::string path = file("v.lsck");
  save_checkpoint(path, sample_checkpoint());
  std::string bytes = read_bytes(path);
  const uint32_t version = 2;
  std::memcpy(bytes.data() + 8, &version, 4);
  reseal(bytes);
  write_bytes(path, bytes);
  const std::string msg = input_error([&] { load_checkpoint(path); });
  EXPECT_NE(msg.find(path + " has format version 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("reads version 1"), std::string::npos) << msg;
}

TEST_F(CheckpointLoad, RefusesEveryFlippedByte) {
  const std::string good = file("good.lsck");
  Checkpoint small;
  small.meta = {{"epoch", 1}};
  small.entries.push_back({"w", {2, 2}, {1.0f, 2.0f, 3.0f, 4.0f}});
  small.entries.push_back({"b", {2}, {5.0f, 6.0f}});
  save_checkpoint(good, small);
  const std::string bytes = read_bytes(good);
  const std::string path = file("flipped.lsck");
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    write_bytes(path, bad);
    const std::string msg = input_error([&] { load_checkpoint(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << "byte " << i << ": " << msg;
    const std::string expected = i < 8    ? "is not a lockstep checkpoint"
                                 : i < 12 ? "has format version"
                                          : "is corrupt";
    EXPECT_NE(msg.find(expected), std::string::npos) << "byte " << i << ": " << msg;
  }
  // A flipped bit in the values is reported with both checksums.
  std::string bad = bytes;
  bad[bytes.size() - 13] ^= 0x01;  // last byte of the last value
  write_bytes(path, bad);
  const std::string msg = input_error([&] { load_checkpoint(path); });
  EXPECT_NE(msg.find("is corrupt: CRC-32 mismatch (stored "), std::string::npos) << msg;
}

TEST_F(CheckpointLoad, RefusesMalformedJsonBehindAValidChecksum) {
  const std::string path = file("j.lsck");
  Checkpoint c;
  c.meta = {{"epoch", 7}};
  save_checkpoint(path, c);
  std::string bytes = read_bytes(path);
  ASSERT_EQ(bytes[32], '{');  // metadata starts after the header and its length
  bytes[32] = 'x';
  reseal(bytes);
  write_bytes(path, bytes);
  std::string msg = input_error([&] { load_checkpoint(path); });
  EXPECT_NE(msg.find(path + " has malformed JSON metadata"), std::string::npos) << msg;

  bytes[32] = '[';  // a well-formed array is still not an object
  const size_t close = bytes.rfind('}', bytes.size() - 13);
  bytes[close] = ']';
  bytes.replace(33, close - 33, std::string(close - 33, ' '));
  reseal(bytes);
  write_bytes(path, bytes);
  msg = input_error([&] { load_checkpoint(path); });
  EXPECT_NE(msg.find("malformed JSON metadata: an array, not an object"), std::string::npos) << msg;
}

TEST_F(CheckpointLoad, RefusesImpossibleEntriesBehindAValidChecksum) {
  const std::string path = file("e.lsck");
  Checkpoint c;
  c.entries.push_back({"w", {3}, {1.0f, 2.0f, 3.0f}});
  save_checkpoint(path, c);
  const std::string good = read_bytes(path);
  // The single dimension sits 12 bytes before the 12 value bytes and trailer.
  const size_t dim_at = good.size() - 12 - 12 - 8;
  for (int64_t dim : {int64_t{-1}, int64_t{4}, std::numeric_limits<int64_t>::max()}) {
    std::string bytes = good;
    std::memcpy(bytes.data() + dim_at, &dim, 8);
    reseal(bytes);
    write_bytes(path, bytes);
    const std::string msg = input_error([&] { load_checkpoint(path); });
    EXPECT_NE(msg.find(path + " is corrupt"), std::string::npos) << dim << ": " << msg;
    EXPECT_NE(msg.find("entry \"w\""), std::string::npos) << dim << ": " << msg;
  }
}

class CheckpointRestoreRefusal : public CheckpointTest {
 protected:
  void SetUp() override {
    CheckpointTest::SetUp();
    for (int i = 0; i < 6; ++i) a_.data()[i] = 1.0f;
    for (int i = 0; i < 3; ++i) b_.data()[i] = 2.0f;
    saved_ = make_checkpoint({{"model", "tiny"}}, {{"fc.weight", &a_}, {"fc.bias", &b_}});
    for (float* p : {x_.data(), y_.data(), z_.data()}) p[0] = -7.0f;  // sentinels
  }
  // Every target still holds its sentinel: a refused restore changed nothing.
  void expect_untouched() {
    EXPECT_EQ(x_.data()[0], -7.0f);
    EXPECT_EQ(y_.data()[0], -7.0f);
    EXPECT_EQ(z_.data()[0], -7.0f);
  }

  nn::Tensor a_{{2, 3}}, b_{{3}};
  nn::Tensor x_{{2, 3}}, y_{{3}}, z_{{4}};
  Checkpoint saved_;
  const std::string path_ = "run/checkpoint-epoch0001-step00000010.lsck";
};

TEST_F(CheckpointRestoreRefusal, MissingEntry) {
  const std::string msg = input_error([&] {
    restore_tensors(saved_, path_, {{"fc.weight", &x_}, {"fc.bias", &y_}, {"fc2.bias", &z_}});
  });
  EXPECT_NE(msg.find("checkpoint " + path_ + " does not match this model"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("has no entry \"fc2.bias\" (this model has it with shape (4))"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("saved from model \"tiny\""), std::string::npos) << msg;
  expect_untouched();
}

TEST_F(CheckpointRestoreRefusal, ExtraEntry) {
  const std::string msg = input_error([&] {
    restore_tensors(saved_, path_, {{"fc.weight", &x_}});
  });
  EXPECT_NE(msg.find(path_), std::string::npos) << msg;
  EXPECT_NE(msg.find("has entry \"fc.bias\" with shape (3) that this model does not have"),
            std::string::npos)
      << msg;
  expect_untouched();
}

TEST_F(CheckpointRestoreRefusal, WrongShapeNamesBothShapes) {
  nn::Tensor wrong({3, 2});
  wrong.data()[0] = -7.0f;
  const std::string msg = input_error([&] {
    restore_tensors(saved_, path_, {{"fc.bias", &y_}, {"fc.weight", &wrong}});
  });
  EXPECT_NE(msg.find(path_), std::string::npos) << msg;
  EXPECT_NE(msg.find("entry \"fc.weight\" with shape (2, 3), this model expects (3, 2)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(wrong.data()[0], -7.0f);
  expect_untouched();  // fc.bias matched, and was listed first, but is unchanged
}

TEST_F(CheckpointRestoreRefusal, CountsFurtherDifferences) {
  const std::string msg = input_error([&] { restore_tensors(saved_, path_, {{"other", &z_}}); });
  EXPECT_NE(msg.find("(and 2 more differences)"), std::string::npos) << msg;
  expect_untouched();
}

TEST_F(CheckpointSave, InjectedFailureKeepsThePreviousFileAndNoTemporary) {
  const std::string path = file("ckpt.lsck");
  Checkpoint first = sample_checkpoint();
  save_checkpoint(path, first);
  const std::string before = read_bytes(path);
  Checkpoint second = sample_checkpoint();
  second.meta["epoch"] = 4;
  second.entries[0].values[0] = 123.0f;
  for (int64_t fail_after : {int64_t{0}, int64_t{10}, int64_t{100}, int64_t(before.size() - 1)}) {
    const std::string msg =
        input_error([&] { save_checkpoint(path, second, {.fail_after_bytes = fail_after}); });
    EXPECT_NE(msg.find("cannot write checkpoint " + path), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::generic_category().message(ENOSPC)), std::string::npos) << msg;
    EXPECT_NE(msg.find("previous checkpoint is kept"), std::string::npos) << msg;
    EXPECT_EQ(read_bytes(path), before) << "after failing at byte " << fail_after;
    EXPECT_TRUE(temporaries(dir_).empty()) << temporaries(dir_).front();
  }
  // With room for the whole file, the same save goes through.
  save_checkpoint(path, second, {.fail_after_bytes = static_cast<int64_t>(before.size())});
  EXPECT_EQ(load_checkpoint(path).meta["epoch"], 4);
}

TEST_F(CheckpointSave, FailedFirstSaveLeavesNothing) {
  const std::string path = file("new.lsck");
  input_error([&] { save_checkpoint(path, sample_checkpoint(), {.fail_after_bytes = 50}); });
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir_));
}

// A checkpoint path that is a symbolic link (the run's checkpoints kept on
// another file system) stays a link: the file it points to is replaced, and
// a dangling link's target is created. No temporary is left on either side.
TEST_F(CheckpointSave, ASymbolicLinkStaysALinkAndItsTargetIsReplaced) {
  fs::create_directories(file("store"));
  fs::create_directories(file("run"));
  const std::string target = file("store/ckpt.lsck"), link = file("run/ckpt.lsck");
  save_checkpoint(target, sample_checkpoint());
  fs::create_symlink(fs::path("..") / "store" / "ckpt.lsck", link);
  Checkpoint second = sample_checkpoint();
  second.meta["epoch"] = 7;
  save_checkpoint(link, second);
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link))) << "the link was replaced by a file";
  EXPECT_EQ(load_checkpoint(target).meta["epoch"], 7);
  EXPECT_EQ(load_checkpoint(link).meta["epoch"], 7);
  EXPECT_TRUE(temporaries(file("store")).empty()) << temporaries(file("store")).front();
  EXPECT_TRUE(temporaries(file("run")).empty()) << temporaries(file("run")).front();

  const std::string dangling = file("run/best.lsck"), later = file("store/best.lsck");
  fs::create_symlink(later, dangling);
  save_checkpoint(dangling, second);
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dangling)));
  EXPECT_EQ(load_checkpoint(later).meta["epoch"], 7);
}

// A device is no place for a checkpoint: refused by name, never written into
// (a checkpoint that cannot be read back is no checkpoint) or replaced.
TEST_F(CheckpointSave, RefusesADevice) {
  const std::string msg = input_error([&] { save_checkpoint("/dev/null", sample_checkpoint()); });
  EXPECT_EQ(msg,
            "cannot write checkpoint /dev/null: it is a device or pipe, not a file; name a file "
            "for the checkpoint");
}

// A writer that crashed left its temporary beside the file it wrote (for a
// link, beside the link's target): the next save of that file removes it,
// whatever store wrote it (best.lsck is written outside CheckpointStore).
// Other files' temporaries and other names stay.
TEST_F(CheckpointSave, RemovesTemporariesOfCrashedWritersOfTheSameFile) {
  fs::create_directories(file("store"));
  fs::create_directories(file("run"));
  const auto touch = [](const std::string& path) { std::ofstream(path) << "partial"; };
  touch(file("run/best.lsck.tmp.999999999"));
  touch(file("run/other.lsck.tmp.999999999"));
  touch(file("run/best.lsck.tmp.x"));
  save_checkpoint(file("run/best.lsck"), sample_checkpoint());
  EXPECT_FALSE(fs::exists(file("run/best.lsck.tmp.999999999")));
  EXPECT_TRUE(fs::exists(file("run/other.lsck.tmp.999999999")));
  EXPECT_TRUE(fs::exists(file("run/best.lsck.tmp.x")));

  fs::create_symlink(fs::path("..") / "store" / "kept.lsck", file("run/kept.lsck"));
  touch(file("store/kept.lsck.tmp.999999998"));
  save_checkpoint(file("run/kept.lsck"), sample_checkpoint());
  EXPECT_TRUE(temporaries(file("store")).empty()) << temporaries(file("store")).front();
}

TEST_F(CheckpointSave, RefusesADirectoryThatDoesNotExist) {
  const std::string path = file("no/such/dir/ckpt.lsck");
  const std::string msg = input_error([&] { save_checkpoint(path, sample_checkpoint()); });
  EXPECT_NE(msg.find("cannot write checkpoint " + path), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(CheckpointStoreTest, MakesItsFoldersOrNamesWhyNot) {
  // A store under folders that do not exist yet makes them (each synced
  // into the folder above).
  CheckpointStore store(file("run/a/checkpoints"), 0);
  const std::string written = store.save(1, 10, sample_checkpoint());
  EXPECT_TRUE(fs::exists(written)) << written;
  EXPECT_EQ(fs::path(written).parent_path(), fs::path(file("run/a/checkpoints")));
  // Below a file: refused, the folder named.
  std::ofstream(file("plain")) << "x";
  CheckpointStore blocked(file("plain/checkpoints"), 0);
  const std::string msg = input_error([&] { blocked.save(1, 10, sample_checkpoint()); });
  EXPECT_NE(msg.find("cannot create checkpoint directory " + file("plain/checkpoints") + ": "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("choose a writable checkpoint directory"), std::string::npos) << msg;
}

TEST_F(CheckpointStoreTest, NamesSortByEpochThenStep) {
  EXPECT_EQ(CheckpointStore::file_name(3, 360), "checkpoint-epoch0003-step00000360.lsck");
  EXPECT_EQ(CheckpointStore::file_name(12345, 0), "checkpoint-epoch12345-step00000000.lsck");
}

TEST_F(CheckpointStoreTest, LatestIsTheNewestCompleteCheckpoint) {
  CheckpointStore store(file("run"), 0);
  EXPECT_EQ(store.latest(), "");  // the directory does not exist yet
  Checkpoint c = sample_checkpoint();
  // Out of order, and past the zero padding: ordering is numeric.
  for (auto [epoch, step] : std::vector<std::pair<int64_t, int64_t>>{
           {2, 20}, {10000, 5}, {9999, 99999}, {10000, 4}, {1, 10}}) {
    c.meta["epoch"] = epoch;
    store.save(epoch, step, c);
  }
  EXPECT_EQ(store.latest(), file("run/checkpoint-epoch10000-step00000005.lsck"));
  EXPECT_EQ(load_checkpoint(store.latest()).meta["epoch"], 10000);
  const std::vector<std::string> all = store.list();
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all.front(), file("run/checkpoint-epoch0001-step00000010.lsck"));
  EXPECT_EQ(all[3], file("run/checkpoint-epoch10000-step00000004.lsck"));

  // A truncated newest file (copied by hand, say) is passed over.
  const std::string newest = store.latest();
  const std::string bytes = read_bytes(newest);
  write_bytes(newest, bytes.substr(0, bytes.size() / 2));
  EXPECT_EQ(store.latest(), file("run/checkpoint-epoch10000-step00000004.lsck"));
  EXPECT_EQ(store.list().size(), 4u);
}

TEST_F(CheckpointStoreTest, KeepLastPrunesOlderCheckpoints) {
  CheckpointStore store(dir_, 2);
  const Checkpoint c = sample_checkpoint();
  for (int64_t epoch = 1; epoch <= 5; ++epoch) store.save(epoch, epoch * 100, c);
  const std::vector<std::string> all = store.list();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0], file("checkpoint-epoch0004-step00000400.lsck"));
  EXPECT_EQ(all[1], file("checkpoint-epoch0005-step00000500.lsck"));
  // Saving the same (epoch, step) again replaces it.
  EXPECT_EQ(store.save(5, 500, c), all[1]);
  EXPECT_EQ(store.list(), all);
  // Other files in the directory are not touched.
  write_bytes(file("notes.txt"), "keep me");
  store.save(6, 600, c);
  EXPECT_TRUE(fs::exists(file("notes.txt")));
  EXPECT_EQ(store.list().size(), 2u);

  CheckpointStore keep_all(file("all"), 0);
  for (int64_t epoch = 1; epoch <= 4; ++epoch) keep_all.save(epoch, 0, c);
  EXPECT_EQ(keep_all.list().size(), 4u);

  EXPECT_NE(input_error([&] { CheckpointStore bad(dir_, -1); }).find("keep_last"),
            std::string::npos);
}

TEST_F(CheckpointStoreTest, NeverPrunesTheCheckpointJustWritten) {
  CheckpointStore store(dir_, 1);
  const Checkpoint c = sample_checkpoint();
  store.save(5, 500, c);
  // Resumed from an earlier checkpoint: the new one stays beside the newer one.
  const std::string path = store.save(3, 300, c);
  EXPECT_TRUE(fs::exists(path));
  EXPECT_EQ(store.list().size(), 2u);
}

TEST_F(CheckpointStoreTest, StaleTemporariesAreIgnoredThenRemoved) {
  CheckpointStore store(dir_, 0);
  const Checkpoint c = sample_checkpoint();
  store.save(1, 10, c);
  // A crashed writer left a newer, half-written temporary.
  const std::string stale = file("checkpoint-epoch0002-step00000020.lsck.tmp.999999999");
  const std::string full = read_bytes(file("checkpoint-epoch0001-step00000010.lsck"));
  write_bytes(stale, full.substr(0, full.size() / 2));
  EXPECT_EQ(store.latest(), file("checkpoint-epoch0001-step00000010.lsck"));
  EXPECT_EQ(store.list().size(), 1u);
  store.save(2, 20, c);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(temporaries(dir_).empty());
  EXPECT_EQ(store.latest(), file("checkpoint-epoch0002-step00000020.lsck"));
}

}  // namespace
}  // namespace lockstep::app
