// scripts/fetch_data.sh against a tiny HTTP/1.0 file server on 127.0.0.1,
// run inside this test process: files that match the checksum table land in
// data/mnist and data/cifar10; a file that does not is refused with one line
// naming it and both checksums, and is not left behind.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::run_command;
using testing::ScratchDir;

// Serves GET /<path> from root over HTTP/1.0 on 127.0.0.1 (a port the kernel
// picks), one connection at a time, on its own thread. Stops when destroyed,
// or by itself after max_seconds.
class FileServer {
 public:
  explicit FileServer(std::string root, double max_seconds = 120) : root_(std::move(root)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(fd_, 8) != 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("FileServer: cannot listen on 127.0.0.1");
    }
    port_ = ntohs(addr.sin_port);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(max_seconds * 1e3));
    thread_ = std::thread([this, deadline] { serve(deadline); });
  }
  ~FileServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  FileServer(const FileServer&) = delete;
  FileServer& operator=(const FileServer&) = delete;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  void serve(std::chrono::steady_clock::time_point deadline) {
    while (!stop_ && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const int client = accept(fd_, nullptr, nullptr);
      if (client < 0) continue;
      timeval timeout{5, 0};
      setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
      respond(client);
      close(client);
    }
  }

  void respond(int client) {
    std::string request;
    char buffer[1024];
    while (request.find("\r\n\r\n") == std::string::npos && request.size() < 8192) {
      const ssize_t n = recv(client, buffer, sizeof(buffer), 0);
      if (n <= 0) return;
      request.append(buffer, static_cast<size_t>(n));
    }
    std::istringstream line(request);
    std::string method, path;
    line >> method >> path;
    const std::string file = root_ + path;
    std::string head = "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n", body;
    if (method == "GET" && path.find("..") == std::string::npos && fs::is_regular_file(file)) {
      body = read_file(file);
      head = "HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n";
    }
    const std::string reply = head + body;
    for (size_t sent = 0; sent < reply.size();) {
      const ssize_t n = send(client, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  std::string root_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

const char* kMnistFiles[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};

// served/mnist/*.gz (small real IDX files), served/cifar-10-binary.tar.gz
// (cifar-10-batches-bin/*.bin inside) and a checksum table describing them:
// md5 for MNIST, sha256 for the archive, as md5sum and sha256sum print them.
struct Mirror {
  ScratchDir dir;
  std::string served = dir.file("served"), checksums = dir.file("checksums");
  Mirror() {
    fs::create_directories(served + "/mnist");
    testing::write_mnist_dir(served + "/mnist", 20, 10);
    testing::write_cifar10_dir(dir.file("stage/cifar-10-batches-bin"), 4, 4);
    const auto r = run_command("tar -czf " + served + "/cifar-10-binary.tar.gz -C " +
                               dir.file("stage") + " cifar-10-batches-bin && cd " + served +
                               "/mnist && md5sum *.gz > " + checksums + " && cd " + served +
                               " && sha256sum cifar-10-binary.tar.gz >> " + checksums);
    if (r.exit_code != 0) throw std::runtime_error("cannot build the mirror: " + r.output);
  }
};

bool have_downloader() {
  return run_command("command -v curl || command -v wget").exit_code == 0;
}

testing::CommandResult fetch(const Mirror& mirror, const std::string& server_url,
                             const std::string& data_dir, const std::string& sets) {
  return run_command("no_proxy=127.0.0.1 NO_PROXY=127.0.0.1 DATA_DIR=" + data_dir +
                     " MNIST_BASE_URL=" + server_url + "/mnist CIFAR10_URL=" + server_url +
                     "/cifar-10-binary.tar.gz CHECKSUMS=" + mirror.checksums + " bash " +
                     LOCKSTEP_SOURCE_DIR "/scripts/fetch_data.sh " + sets);
}

#define REQUIRE_DOWNLOADER() \
  if (!have_downloader())    \
  GTEST_SKIP() << "neither curl nor wget is installed (scripts/setup.sh installs curl)"

TEST(FetchData, GoodFilesAreAcceptedAndLandInPlace) {
  REQUIRE_DOWNLOADER();
  Mirror mirror;
  ScratchDir data;
  {
    FileServer server(mirror.served);
    const auto r = fetch(mirror, server.url(), data.path(), "");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  for (const char* f : kMnistFiles) {
    EXPECT_EQ(read_file(data.file("mnist/") + f), read_file(mirror.served + "/mnist/" + f)) << f;
  }
  for (const char* f : {"data_batch_1.bin", "data_batch_5.bin", "test_batch.bin"}) {
    EXPECT_EQ(read_file(data.file("cifar10/") + f),
              read_file(mirror.dir.file("stage/cifar-10-batches-bin/") + f))
        << f;
  }
  EXPECT_FALSE(fs::exists(data.file("cifar10/cifar-10-binary.tar.gz")));

  // The server is gone: a second run verifies what is there and downloads nothing.
  const auto again = fetch(mirror, "http://127.0.0.1:1", data.path(), "mnist cifar10");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("already present and verified"), std::string::npos) << again.output;
}

TEST(FetchData, CorruptedDownloadsAreRefusedAndDeleted) {
  REQUIRE_DOWNLOADER();
  Mirror mirror;
  ScratchDir data;
  const std::string bad = mirror.served + "/mnist/t10k-labels-idx1-ubyte.gz";
  const std::string expected_md5 = run_command("md5sum " + bad).output.substr(0, 32);
  testing::write_bytes(bad, {1, 2, 3, 4}, true);  // the mirror now serves other bytes
  const std::string got_md5 = run_command("md5sum " + bad).output.substr(0, 32);
  ASSERT_NE(expected_md5, got_md5);

  FileServer server(mirror.served);
  auto r = fetch(mirror, server.url(), data.path(), "mnist");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("REFUSED t10k-labels-idx1-ubyte.gz"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("md5 expected " + expected_md5 + ", got " + got_md5), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(data.file("mnist/t10k-labels-idx1-ubyte.gz")));
  EXPECT_FALSE(fs::exists(data.file("mnist/t10k-labels-idx1-ubyte.gz.part")));
  EXPECT_TRUE(fs::exists(data.file("mnist/train-images-idx3-ubyte.gz")));  // verified before it

  // An archive whose sha256 is not the table's: refused, nothing unpacked.
  std::ofstream(mirror.checksums, std::ios::app)
      << std::string(64, '0') << "  cifar-10-binary.tar.gz\n";
  r = fetch(mirror, server.url(), data.path(), "cifar10");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("REFUSED cifar-10-binary.tar.gz"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sha256 expected " + std::string(64, '0')), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(data.file("cifar10/cifar-10-binary.tar.gz.part")));
  EXPECT_FALSE(fs::exists(data.file("cifar10/data_batch_1.bin")));
}

}  // namespace
}  // namespace lockstep
