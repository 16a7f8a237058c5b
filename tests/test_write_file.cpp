// data::write_file_atomically on targets that are not plain files: a
// symbolic link stays a link, a device is written into and never replaced
// (as root, a rename over /dev/full would have turned it into a file); and
// data::replace_target, where every writer puts its file.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/error.h"
#include "data/atomic_file.h"
#include "data/image_io.h"
#include "support/dataset_files.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

std::span<const uint8_t> bytes_of(const std::string& text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

TEST(WriteFileAtomically, ALinkStaysALinkAndItsTargetIsReplaced) {
  testing::ScratchDir dir;
  data::write_file_atomically(dir.file("real.csv"), bytes_of("old\n"));
  std::filesystem::create_symlink(dir.file("real.csv"), dir.file("link.csv"));
  data::write_file_atomically(dir.file("link.csv"), bytes_of("new\n"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir.file("link.csv")));
  EXPECT_EQ(testing::read_file(dir.file("real.csv")), "new\n");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 2);  // no temporary left
}

// A dangling link's target is created, as for a checkpoint (one decision,
// data::replace_target, for both).
TEST(WriteFileAtomically, ADanglingLinksTargetIsCreated) {
  testing::ScratchDir dir;
  std::filesystem::create_directories(dir.file("store"));
  std::filesystem::create_symlink(std::filesystem::path("store") / "later.csv",
                                  dir.file("link.csv"));
  data::write_file_atomically(dir.file("link.csv"), bytes_of("first\n"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir.file("link.csv")));
  EXPECT_EQ(testing::read_file(dir.file("store/later.csv")), "first\n");
}

// Where every writer puts its file: links followed link by link, a device
// or pipe written in place, a folder refused.
TEST(ReplaceTarget, FollowsLinksAndKeepsDevicesAndPipesInPlace) {
  namespace fs = std::filesystem;
  testing::ScratchDir dir;
  data::write_file_atomically(dir.file("real"), bytes_of("x"));
  fs::create_symlink("real", dir.file("one"));
  fs::create_symlink("one", dir.file("two"));
  const std::string real = fs::canonical(dir.file("real")).string();
  EXPECT_EQ(data::replace_target(dir.file("two")).path, real);
  EXPECT_FALSE(data::replace_target(dir.file("two")).in_place);
  EXPECT_EQ(data::replace_target(dir.file("real")).path, dir.file("real"));
  EXPECT_EQ(data::replace_target(dir.file("new")).path, dir.file("new"));
  ASSERT_EQ(mkfifo(dir.file("fifo").c_str(), 0600), 0);
  fs::create_symlink("fifo", dir.file("to_fifo"));
  EXPECT_TRUE(data::replace_target(dir.file("to_fifo")).in_place);
  EXPECT_EQ(data::replace_target(dir.file("to_fifo")).path, dir.file("to_fifo"));
  EXPECT_TRUE(data::replace_target("/dev/null").in_place);
  fs::create_symlink(".", dir.file("to_folder"));
  try {
    data::replace_target(dir.file("to_folder"));
    ADD_FAILURE() << "a link to a folder was taken";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write " + dir.file("to_folder") + ": it is a folder");
  }
}

// As root (CI) the devices are made in a scratch folder, so that a
// regression replaces those, not the machine's /dev/null and /dev/full;
// without root (mknod refused) the machine's own are safe to use, as a
// regression could not rename over them.
TEST(WriteFileAtomically, ADeviceIsWrittenIntoNotReplaced) {
  testing::ScratchDir dir;
  std::string null = dir.file("null"), full = dir.file("full");
  if (mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0 ||
      mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) {
    ASSERT_NE(geteuid(), 0u) << "mknod failed as root";
    null = "/dev/null";
    full = "/dev/full";
  }
  data::write_file_atomically(null, bytes_of("discarded\n"));
  struct stat st {};
  ASSERT_EQ(stat(null.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << null << " was replaced";
  try {
    data::write_file_atomically(full, bytes_of("no room\n"));
    ADD_FAILURE() << "a write to " << full << " succeeded";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write " + full + ": No space left on device");
  }
  ASSERT_EQ(stat(full.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << full << " was replaced";
}

TEST(WriteFileAtomically, AFolderIsRefusedByName) {
  testing::ScratchDir dir;
  try {
    data::write_file_atomically(dir.path(), bytes_of("x"));
    ADD_FAILURE() << "a write to a folder succeeded";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write " + dir.path() + ": it is a folder");
  }
}

}  // namespace
}  // namespace lockstep
