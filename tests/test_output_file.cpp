// tests/test_output_file.cpp — writing a file the user named (io/output_file.h): FIFOs and devices
// are written in place, symbolic links are followed and kept, regular files are replaced through a
// unique temporary that never outlives a failure. Then the writers that use it: GgufWriter and
// `toy eval --dump-logits`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "fixtures.h"
#include "toy/io/gguf.h"
#include "toy/io/output_file.h"

namespace fs = std::filesystem;
using toy::write_output_file;
using toy::test::read_text;
using toy::test::run_toy;

namespace {

struct OutputFile : testing::Test {
  fs::path dir;
  void SetUp() override {
    dir = fs::path(testing::TempDir()) / ("toy_output_" + std::to_string(::getpid()) + "_" +
                                          testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::vector<std::string> names() const {  // what is in `dir`, sorted
    std::vector<std::string> r;
    for (const auto& e : fs::directory_iterator(dir)) r.push_back(e.path().filename().string());
    std::sort(r.begin(), r.end());
    return r;
  }
};

// Reads a FIFO to its end in a thread, as a consumer of the output would. The read end is open
// from the start (so a writer never waits), and the reader gives up after 20 s instead of hanging
// when nothing ever writes to the FIFO (the writer replaced it instead).
struct FifoReader {
  std::string got;
  int fd = -1;
  std::thread t;
  explicit FifoReader(const fs::path& p) {
    EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0);
    fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK);
    EXPECT_GE(fd, 0);
    t = std::thread([this] {
      char buf[65536];
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (std::chrono::steady_clock::now() < until) {
        pollfd q{fd, POLLIN, 0};
        if (::poll(&q, 1, 100) <= 0) continue;  // no writer yet
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n == 0) break;  // the writer closed
        if (n > 0) got.append(buf, size_t(n));
      }
      ::close(fd);
    });
  }
  std::string finish() {
    t.join();
    return got;
  }
};

}  // namespace

TEST_F(OutputFile, ReplacesARegularFileKeepingItsPermissions) {
  const fs::path p = dir / "out.bin";
  write_output_file(p.string(), "old");
  fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  write_output_file(p.string(), "new contents");
  EXPECT_EQ(read_text(p), "new contents");
  EXPECT_EQ(fs::status(p).permissions(), fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(names(), std::vector<std::string>{"out.bin"});  // no temporary left
}

TEST_F(OutputFile, WritesIntoAFifoInPlace) {
  const fs::path p = dir / "pipe";
  FifoReader reader(p);
  write_output_file(p.string(), std::string(100000, 'x'));  // more than a pipe buffer
  EXPECT_EQ(reader.finish(), std::string(100000, 'x'));
  EXPECT_TRUE(fs::is_fifo(p));
  EXPECT_EQ(names(), std::vector<std::string>{"pipe"});
}

TEST_F(OutputFile, WritesADeviceInPlace) {
  write_output_file("/dev/null", "discarded");
  EXPECT_EQ(fs::symlink_status("/dev/null").type(), fs::file_type::character);
  // A device that fails every write: an error, and the node is still there (as root, a
  // rename over it replaced /dev/full).
  if (fs::exists("/dev/full")) {
    EXPECT_THROW(write_output_file("/dev/full", "x"), std::runtime_error);
    EXPECT_EQ(fs::symlink_status("/dev/full").type(), fs::file_type::character);
  }
}

TEST_F(OutputFile, FollowsASymlinkAndKeepsIt) {
  const fs::path target = dir / "target.bin", link = dir / "link.bin", chain = dir / "chain.bin";
  write_output_file(target.string(), "old");
  fs::create_symlink("target.bin", link);
  fs::create_symlink(link, chain);  // absolute, to a link
  write_output_file(chain.string(), "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_symlink(chain));
  EXPECT_EQ(read_text(target), "new");
  // A dangling link: its target is created.
  fs::create_symlink("later.bin", dir / "dangling.bin");
  write_output_file((dir / "dangling.bin").string(), "made");
  EXPECT_TRUE(fs::is_symlink(dir / "dangling.bin"));
  EXPECT_EQ(read_text(dir / "later.bin"), "made");
  // A link to a FIFO: the FIFO is written.
  const fs::path pipe = dir / "pipe";
  FifoReader reader(pipe);
  fs::create_symlink("pipe", dir / "to_pipe");
  write_output_file((dir / "to_pipe").string(), "through");
  EXPECT_EQ(reader.finish(), "through");
  EXPECT_TRUE(fs::is_fifo(pipe));
  // A loop is an error, not a hang.
  fs::create_symlink("loop_b", dir / "loop_a");
  fs::create_symlink("loop_a", dir / "loop_b");
  EXPECT_THROW(write_output_file((dir / "loop_a").string(), "x"), std::runtime_error);
}

TEST_F(OutputFile, FailureLeavesTheOldFileAndNoTemporary) {
  const fs::path p = dir / "out.bin";
  write_output_file(p.string(), "old");
  EXPECT_THROW(write_output_file(p.string(),
                                 [](std::FILE* f) {
                                   std::fputs("partial", f);
                                   return false;  // as a full disk would
                                 }),
               std::runtime_error);
  EXPECT_EQ(read_text(p), "old");
  EXPECT_EQ(names(), std::vector<std::string>{"out.bin"});
  // A directory is refused, a missing parent is an error; neither leaves anything.
  fs::create_directory(dir / "sub");
  EXPECT_THROW(write_output_file((dir / "sub").string(), "x"), std::runtime_error);
  EXPECT_THROW(write_output_file((dir / "missing" / "x").string(), "x"), std::runtime_error);
  EXPECT_EQ(names(), (std::vector<std::string>{"out.bin", "sub"}));
  EXPECT_TRUE(fs::is_empty(dir / "sub"));
}

TEST_F(OutputFile, GgufWriterKeepsAFifoAndASymlink) {
  std::vector<float> w(64, 0.5f);
  toy::gguf::GgufWriter g;
  g.set("general.architecture", toy::gguf::Value::of_string("llama"));
  g.add_tensor("token_embd.weight", {8, 8}, toy::DType::F32, w.data());
  const fs::path target = dir / "model.gguf", link = dir / "link.gguf", pipe = dir / "pipe.gguf";
  g.write(target.string());
  const std::string bytes = read_text(target);
  fs::create_symlink("model.gguf", link);
  g.write(link.string());
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_text(target), bytes);
  FifoReader reader(pipe);
  g.write(pipe.string());
  EXPECT_EQ(reader.finish(), bytes);
  EXPECT_TRUE(fs::is_fifo(pipe));
  EXPECT_EQ(names(), (std::vector<std::string>{"link.gguf", "model.gguf", "pipe.gguf"}));
}

TEST_F(OutputFile, EvalDumpLogitsKeepsSpecialFiles) {
  TOY_REQUIRE_FIXTURE(model, "real/llama-2-tiny-random.gguf");
  const size_t expected = 2 * 32000 * 4;  // [T=2][V=32000] float32
  const fs::path pipe = dir / "logits.pipe", target = dir / "logits.f32", link = dir / "link.f32";
  FifoReader reader(pipe);
  auto r = run_toy("eval " + model.string() + " --ids 1,2 --dump-logits " + pipe.string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(reader.finish().size(), expected);
  EXPECT_TRUE(fs::is_fifo(pipe));

  write_output_file(target.string(), "old");
  fs::create_symlink("logits.f32", link);
  r = run_toy("eval " + model.string() + " --ids 1,2 --dump-logits " + link.string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(fs::file_size(target), expected);
  EXPECT_EQ(names(), (std::vector<std::string>{"link.f32", "logits.f32", "logits.pipe"}));

  if (fs::exists("/dev/full")) {
    r = run_toy("eval " + model.string() + " --ids 1,2 --dump-logits /dev/full");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("/dev/full"), std::string::npos) << r.err;
    EXPECT_EQ(fs::symlink_status("/dev/full").type(), fs::file_type::character);
  }
}
