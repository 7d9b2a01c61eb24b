// tests/serve/server_process.h — start `toy serve` on an ephemeral loopback port for a test.
//
// Runs the real binary (toy_bin()) with --port 0, waits for its "listening on http://HOST:PORT"
// line and stops it with SIGTERM in the destructor (SIGKILL if it does not exit within 20 s).
// Used by tests/test_serve.cpp; header-only so the tests need no extra target.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "../fixtures.h"

namespace toy::test {

class ServerProcess {
 public:
  // `args`: shell words after `toy serve MODEL`, e.g. "--name smol --parallel 2".
  ServerProcess(const std::string& model, const std::string& args) {
    static int counter = 0;
    base_ = ::testing::TempDir() + "/toy_serve_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    const std::string cmd = "exec " + toy_bin() + " serve " + model + " --host 127.0.0.1 --port 0 " + args + " >" +
                            base_ + ".out 2>" + base_ + ".err";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const std::regex line(R"(listening on http://[^:]+:(\d+))");
    for (int i = 0; i < 600 && port_ == 0; ++i) {  // up to 60 s (model loading on a slow machine)
      std::smatch m;
      const std::string out = read_text(base_ + ".out");
      if (std::regex_search(out, m, line))
        port_ = std::stoi(m[1]);
      else if (!alive())
        break;
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~ServerProcess() {
    stop();
    std::filesystem::remove(base_ + ".out");
    std::filesystem::remove(base_ + ".err");
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }  // 0: it did not start (see log())
  std::string log() const { return read_text(base_ + ".err"); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  bool alive() {
    if (exited_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return false;
    }
    return true;
  }

  // SIGTERM (or `sig`), then waits; returns the exit code (128 + signal when killed).
  int stop(int sig = SIGTERM, int timeout_s = 20) {
    if (!alive()) return code_;
    ::kill(pid_, sig);
    for (int i = 0; i < timeout_s * 20 && alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (alive()) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      exited_ = true;
      code_ = 128 + SIGKILL;
    }
    return code_;
  }

 private:
  std::string base_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool exited_ = false;
  int code_ = -1;
};

}  // namespace toy::test
