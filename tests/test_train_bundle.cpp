// tests/test_train_bundle.cpp — run bundles people can trust: sealing a finished run killed
// before final.gguf, a torn event log, temporaries, the bundle lock, --run-id, bad inputs, and
// Ctrl-C (a real signal to a child `toy train`) followed by a bit-identical resume.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "fixtures.h"
#include "train_helpers.h"

using namespace toy::test;

namespace {

// The event log without its last line whose "kind" is `name`.
void drop_last_event(const fs::path& run, const std::string& name) {
  std::vector<std::string> lines;
  std::istringstream in(read_text(run / "events.jsonl"));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  for (size_t i = lines.size(); i-- > 0;)
    if (json::parse(lines[i])["kind"] == name) {
      lines.erase(lines.begin() + long(i));
      break;
    }
  std::ofstream out(run / "events.jsonl", std::ios::binary | std::ios::trunc);
  for (const auto& l : lines) out << l << "\n";
}

std::string base_command(const TrainDir& d, const std::string& corpus) {
  return "train from-scratch --corpus " + corpus + kTiny + " --runs-dir " + d.path("runs");
}

}  // namespace

TEST(TrainBundle, ResumeSealsARunKilledBeforeFinalGguf) {
  TrainDir d;
  const std::string base = base_command(d, write_corpus(d)) + " --steps 6 --eval-every 0 --checkpoint-every 3";
  auto first = run_toy(base + " --run-id r");
  ASSERT_EQ(first.code, 0) << first.err;
  // A kill after checkpoint 6 was written, before final.gguf and run_end.
  const fs::path run = d.dir / "runs/r";
  fs::remove(run / "weights/final.gguf");
  drop_last_event(run, "run_end");
  auto seal = run_toy("train --resume " + run.string() + " --no-progress");
  ASSERT_EQ(seal.code, 0) << seal.err;
  EXPECT_NE(seal.err.find("sealed"), std::string::npos) << seal.err;
  EXPECT_TRUE(loss_lines(seal.out).empty());  // nothing trained again
  EXPECT_EQ(read_bytes(run / "weights/final.gguf"), read_bytes(run / "weights/step-6.gguf"));
  const auto ev = events_of(run);
  EXPECT_EQ(ev.back()["kind"], "run_end");
  EXPECT_EQ(ev.back()["reason"], "completed");
  EXPECT_EQ(ev.back()["final_step"], 6);
  const auto lines = loss_lines(first.out);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines.back().rfind("step 6: ", 0), 0u);
  EXPECT_NEAR(ev.back()["final_loss"].get<double>(), loss_of(lines.back()), 1e-6);  // the loss of step 6, from the log
  // Sealed now: another --resume without more --steps has nothing to do (usage error).
  auto again = run_toy("train --resume " + run.string() + " --no-progress");
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.err.find("already has 6 steps"), std::string::npos) << again.err;
}

// Issue #37 item 5: a run killed before its first checkpoint was a dead end (--resume: "no
// checkpoint to resume from"; the same --run-id: "exists"). --resume trains it again from step 0
// with its config.json: the same run, bit for bit.
TEST(TrainBundle, ResumeOfARunKilledBeforeItsFirstCheckpointStartsAgain) {
  TrainDir d;
  const std::string base = base_command(d, write_corpus(d)) + " --steps 4 --eval-every 0 --checkpoint-every 4";
  auto whole = run_toy(base + " --run-id whole");
  ASSERT_EQ(whole.code, 0) << whole.err;
  // What a kill after two steps leaves: the config, the run_start and two step events, no weights.
  ASSERT_EQ(run_toy(base + " --run-id r").code, 0);
  const fs::path run = d.dir / "runs/r";
  for (const auto& f : fs::directory_iterator(run / "weights")) fs::remove(f.path());
  fs::remove(run / "loss.svg");
  {
    std::istringstream in(read_text(run / "events.jsonl"));
    std::string kept;
    int steps = 0;
    for (std::string line; std::getline(in, line);) {
      const auto j = json::parse(line);
      if (j["kind"] == "run_start" || (j["kind"] == "step" && ++steps <= 2)) kept += line + "\n";
    }
    std::ofstream(run / "events.jsonl", std::ios::binary | std::ios::trunc) << kept;
  }
  auto resumed = run_toy("train --resume " + run.string() + " --no-progress");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("has no checkpoint yet"), std::string::npos) << resumed.err;
  EXPECT_EQ(loss_lines(resumed.out), loss_lines(whole.out));
  EXPECT_EQ(read_bytes(run / "weights/final.gguf"), read_bytes(d.dir / "runs/whole/weights/final.gguf"));
  EXPECT_EQ(read_bytes(run / "weights/step-4.optim.gguf"), read_bytes(d.dir / "runs/whole/weights/step-4.optim.gguf"));
  const auto ev = events_of(run);
  EXPECT_EQ(ev.back()["kind"], "run_end");
  EXPECT_EQ(ev.back()["reason"], "completed");
  // The same with a bundle holding only its config.json and an empty log (killed at once).
  fs::remove_all(run / "weights");
  std::ofstream(run / "events.jsonl", std::ios::binary | std::ios::trunc);
  auto bare = run_toy("train --resume " + run.string() + " --no-progress");
  ASSERT_EQ(bare.code, 0) << bare.err;
  EXPECT_EQ(read_bytes(run / "weights/final.gguf"), read_bytes(d.dir / "runs/whole/weights/final.gguf"));
}

TEST(TrainBundle, ResumeRepairsATornLastEventAndKeepsTheUsersFiles) {
  TrainDir d;
  const std::string base = base_command(d, write_corpus(d)) + " --steps 6 --eval-every 0 --checkpoint-every 3";
  ASSERT_EQ(run_toy(base + " --stop-after 3 --run-id r").code, 0);
  const fs::path run = d.dir / "runs/r";
  std::ofstream(run / "events.jsonl", std::ios::binary | std::ios::app) << R"({"kind":"step","t":17644)";
  // Toy's own temporaries (removed) beside files of the user's that merely look alike (kept).
  const std::vector<fs::path> ours = {run / "config.json.tmp.4242", run / "weights/step-6.gguf.tmp.4242",
                                      run / "weights/step-6.optim.gguf.tmp.4242.7", run / "loss.svg.tmp.99"};
  const std::vector<fs::path> users = {run / "notes.tmp.txt", run / "config.json.tmp.backup",
                                       run / "weights/mine.gguf.tmp.1", run / "weights/step-6.gguf.tmp.",
                                       run / "data.tmp.5"};
  for (const auto* list : {&ours, &users})
    for (const fs::path& p : *list) std::ofstream(p) << "x";
  auto r = run_toy("train --resume " + run.string() + " --no-progress");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("torn last line"), std::string::npos) << r.err;
  std::istringstream in(read_text(run / "events.jsonl"));
  int n = 0;
  for (std::string line; std::getline(in, line); ++n) EXPECT_TRUE(json::accept(line)) << "line " << n << ": " << line;
  EXPECT_EQ(events_of(run).back()["reason"], "completed");
  for (const fs::path& p : ours) EXPECT_FALSE(fs::exists(p)) << p;
  for (const fs::path& p : users) EXPECT_TRUE(fs::exists(p)) << p;
}

TEST(TrainBundle, ASecondProcessCannotTrainTheSameRun) {
  TrainDir d;
  const std::string base = base_command(d, write_corpus(d)) + " --steps 6 --eval-every 0";
  ASSERT_EQ(run_toy(base + " --stop-after 3 --run-id r").code, 0);
  const fs::path run = d.dir / "runs/r";
  {
    // This process holds the bundle's lock, as a `toy train` training it does.
    const int fd = ::open((run / ".lock").c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
    auto r = run_toy("train --resume " + run.string() + " --no-progress");
    ::close(fd);
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NE(r.err.find("in use"), std::string::npos) << r.err;
    EXPECT_TRUE(loss_lines(r.out).empty());
  }
  auto r = run_toy("train --resume " + run.string() + " --no-progress");  // the lock is free again
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(TrainBundle, RunIdIsOneNameInsideRunsDir) {
  TrainDir d;
  const std::string base = base_command(d, write_corpus(d)) + " --steps 1 --eval-every 0";
  for (const std::string& id : std::vector<std::string>{"../x", d.path("abs"), "a/b", "..", ".", "'a\tb'"}) {
    SCOPED_TRACE(id);
    auto r = run_toy(base + " --run-id " + id);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("--run-id"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(d.dir / "x"));
  EXPECT_FALSE(fs::exists(d.dir / "abs"));
  EXPECT_FALSE(fs::exists(d.dir / "runs"));
}

TEST(TrainBundle, BadCorpusAndConfigAreInputErrors) {
  TrainDir d;
  const std::string corpus = write_corpus(d);
  fs::create_directories(d.dir / "adir");
  auto dir = run_toy("train from-scratch --corpus " + d.path("adir") + kTiny + " --runs-dir " + d.path("runs"));
  EXPECT_EQ(dir.code, 3) << dir.err;
  EXPECT_NE(dir.err.find("is a directory"), std::string::npos) << dir.err;
  auto ids = run_toy("train from-scratch --data-ids " + d.path("adir") + kTiny + " --runs-dir " + d.path("runs"));
  EXPECT_EQ(ids.code, 3) << ids.err;

  ASSERT_EQ(run_toy(base_command(d, corpus) + " --steps 4 --stop-after 2 --eval-every 0 --run-id r").code, 0);
  const fs::path cfg = d.dir / "runs/r/config.json";
  const json good = json::parse(read_text(cfg));
  auto expect = [&](const std::string& key, const json& value, const std::string& says) {
    SCOPED_TRACE(key + " = " + value.dump());
    json bad = good;
    bad[key] = value;
    std::ofstream(cfg, std::ios::trunc) << bad.dump(2);
    auto r = run_toy("train --resume " + d.path("runs/r") + " --no-progress");
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
  };
  expect("lr", "fast", "\"lr\" must be a number, got a string (\"fast\")");
  expect("steps", 1.5, "\"steps\" must be an integer, got a number (1.5)");
  expect("seed", -1, "\"seed\" must be an integer ≥ 0");
  expect("threads", 1e12, "\"threads\" must be an integer");
  expect("tied", 1, "\"tied\" must be true or false");
  expect("corpus", json::array(), "\"corpus\" must be a string, got an array");
  std::ofstream(cfg, std::ios::trunc) << "[1, 2]";
  auto r = run_toy("train --resume " + d.path("runs/r") + " --no-progress");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("JSON object"), std::string::npos) << r.err;
}

// ------------------------------------------------------------------------------------------
// Ctrl-C: a real SIGINT to a child `toy train`.

namespace {

struct Child {
  pid_t pid = -1;
  std::FILE* out = nullptr;  // its stdout
};

// Starts `toy ARGS…` with stdout on a pipe and stderr into `err_path`.
Child spawn_toy(const std::vector<std::string>& args, const std::string& err_path) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(err, 2);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv;
    const std::string bin = toy_bin();
    argv.push_back(const_cast<char*>(bin.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  return {pid, ::fdopen(fds[0], "r")};
}

std::vector<std::string> split_args(const std::string& text) {
  std::vector<std::string> r;
  std::istringstream in(text);
  for (std::string w; in >> w;) r.push_back(w);
  return r;
}

}  // namespace

TEST(TrainBundle, CtrlCCheckpointsAndResumeIsBitIdentical) {
  TrainDir d;
  const std::string base = base_command(d, write_corpus(d)) + " --steps 30 --eval-every 5 --checkpoint-every 100";
  auto full = run_toy(base + " --run-id full");
  ASSERT_EQ(full.code, 0) << full.err;

  Child child = spawn_toy(split_args(base + " --run-id part"), d.path("part.err"));
  ASSERT_GT(child.pid, 0);
  ASSERT_NE(child.out, nullptr);
  std::string out;
  char line[256];
  while (std::fgets(line, sizeof line, child.out)) {
    out += line;
    if (std::string(line).rfind("step 4:", 0) == 0) break;
  }
  // Paused mid-run, it holds the bundle: a second process may not train it.
  ASSERT_EQ(::kill(child.pid, SIGSTOP), 0);
  auto second = run_toy("train --resume " + d.path("runs/part") + " --steps 40 --no-progress");
  EXPECT_EQ(second.code, 3) << second.err;
  EXPECT_NE(second.err.find("in use"), std::string::npos) << second.err;
  ASSERT_EQ(::kill(child.pid, SIGINT), 0);
  ASSERT_EQ(::kill(child.pid, SIGCONT), 0);
  while (std::fgets(line, sizeof line, child.out)) out += line;
  std::fclose(child.out);
  int status = 0;
  ASSERT_EQ(::waitpid(child.pid, &status, 0), child.pid);
  const std::string err = read_text(d.path("part.err"));
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 130) << err;
  EXPECT_NE(err.find("toy train --resume " + d.path("runs/part")), std::string::npos) << err;
  const size_t n_done = loss_lines(out).size();
  ASSERT_GE(n_done, 4u);
  ASSERT_LT(n_done, 30u);
  const fs::path run = d.dir / "runs/part";
  const auto ev = events_of(run);
  EXPECT_EQ(ev.back()["kind"], "run_end");
  EXPECT_EQ(ev.back()["reason"], "interrupted");
  EXPECT_EQ(ev.back()["final_step"], int64_t(n_done));
  EXPECT_EQ(loss_lines(out).back().rfind("step " + std::to_string(n_done) + ": ", 0), 0u);
  EXPECT_EQ(ev.back()["exit_code"], 130);
  EXPECT_TRUE(fs::exists(run / "weights" / ("step-" + std::to_string(n_done) + ".gguf")));

  auto rest = run_toy("train --resume " + run.string() + " --no-progress");
  ASSERT_EQ(rest.code, 0) << rest.err;
  EXPECT_EQ(out + rest.out, full.out);  // every step and eval line, bit for bit
  for (const char* w : {"step-30.gguf", "step-30.optim.gguf", "final.gguf"})
    EXPECT_EQ(read_bytes(d.dir / "runs/full/weights" / w), read_bytes(run / "weights" / w)) << w;
}

// ------------------------------------------------------------------------------------------
// events.jsonl against docs/events.schema.json (the seeds' toy/v1 names).

TEST(TrainBundle, EventsValidateAgainstTheSchema) {
  if (std::system("python3 -c 'import jsonschema' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 with the jsonschema module (Debian: python3-jsonschema) is not installed";
  TrainDir d;
  const std::string base = base_command(d, write_corpus(d)) + " --steps 8 --eval-every 3 --checkpoint-every 3";
  ASSERT_EQ(run_toy(base + " --stop-after 4 --run-id r").code, 0);               // run_start … run_end "stopped"
  auto rest = run_toy("train --resume " + d.path("runs/r") + " --no-progress");  // a second run_start
  ASSERT_EQ(rest.code, 0) << rest.err;
  std::set<std::string> kinds;
  for (const json& e : events_of(d.dir / "runs/r")) kinds.insert(e["kind"].get<std::string>());
  EXPECT_EQ(kinds, (std::set<std::string>{"run_start", "step", "eval", "checkpoint", "run_end"}));

  const std::string script = d.path("validate.py");
  std::ofstream(script) << "import json, sys, jsonschema\n"
                           "schema = json.load(open(sys.argv[1]))\n"
                           "jsonschema.Draft7Validator.check_schema(schema)\n"
                           "v = jsonschema.Draft7Validator(schema)\n"
                           "bad = 0\n"
                           "for n, line in enumerate(open(sys.argv[2]), 1):\n"
                           "    for e in v.iter_errors(json.loads(line)):\n"
                           "        bad += 1\n"
                           "        print(f'line {n}: {e.message}', file=sys.stderr)\n"
                           "sys.exit(1 if bad else 0)\n";
  const std::string schema = std::string(TOY_SOURCE_DIR) + "/docs/events.schema.json";
  const std::string cmd =
      "python3 " + script + " " + schema + " " + d.path("runs/r/events.jsonl") + " 2>" + d.path("validate.err");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << read_text(d.path("validate.err"));

  // The schema is not vacuous: an event with the old field names fails it.
  std::ofstream(d.path("old.jsonl")) << R"({"event":"step","time":"2026-11-30T03:45:01.123Z","step":0,"loss":5.5})"
                                     << "\n";
  const std::string old = "python3 " + script + " " + schema + " " + d.path("old.jsonl") + " 2>/dev/null";
  EXPECT_NE(std::system(old.c_str()), 0);
}

// ------------------------------------------------------------------------------------------
// toy runs compare: two bundles side by side.

TEST(TrainBundle, RunsCompareChartsAndSummarisesTwoRuns) {
  TrainDir d;
  const std::string base = base_command(d, write_corpus(d)) + " --eval-every 3";
  auto a = run_toy(base + " --steps 6 --run-id a");
  auto b = run_toy(base + " --steps 8 --lr 1e-2 --run-id b");
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  auto r = run_toy("runs compare " + d.path("runs/a") + " " + d.path("runs/b/") + " -o " + d.path("ab.svg"));
  ASSERT_EQ(r.code, 0) << r.err;
  // One row per quantity, A's value then B's.
  auto row = [&](const std::string& name) {
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(name + "  ", 0) == 0) {
        std::istringstream words(line.substr(name.size()));
        std::vector<std::string> w;
        for (std::string x; words >> x;) w.push_back(x);
        return w;
      }
    return std::vector<std::string>{};
  };
  EXPECT_EQ(row("run"), (std::vector<std::string>{"a", "b"})) << r.out;
  EXPECT_EQ(row("steps"), (std::vector<std::string>{"6", "8"})) << r.out;
  EXPECT_EQ(row("tokens"), (std::vector<std::string>{"384", "512"})) << r.out;  // steps · B 4 · T 16
  EXPECT_EQ(row("ended"), (std::vector<std::string>{"completed", "completed"})) << r.out;
  const auto final_loss = row("final loss");
  ASSERT_EQ(final_loss.size(), 6u) << r.out;  // "X.XXXX (step N)" twice
  EXPECT_NEAR(std::stod(final_loss[0]), loss_of(loss_lines(a.out).back()), 1e-4);
  EXPECT_EQ(final_loss[2], "6)");
  EXPECT_NEAR(std::stod(final_loss[3]), loss_of(loss_lines(b.out).back()), 1e-4);
  EXPECT_EQ(row("best eval loss").size(), 6u) << r.out;
  const std::string svg = read_text(d.path("ab.svg"));
  for (const char* part :
       {"<svg", "a: train loss (6 steps)", "b: train loss (8 steps)", "b: eval loss", "#d9730d", "</svg>"})
    EXPECT_NE(svg.find(part), std::string::npos) << part;

  // Not bundles: clear input errors, and no chart.
  fs::create_directories(d.dir / "empty");
  auto not_bundle = run_toy("runs compare " + d.path("runs/a") + " " + d.path("empty") + " -o " + d.path("x.svg"));
  EXPECT_EQ(not_bundle.code, 3) << not_bundle.err;
  EXPECT_NE(not_bundle.err.find("not a run bundle (no events.jsonl"), std::string::npos) << not_bundle.err;
  auto missing = run_toy("runs compare " + d.path("nothing") + " " + d.path("runs/a") + " -o " + d.path("x.svg"));
  EXPECT_EQ(missing.code, 3) << missing.err;
  EXPECT_NE(missing.err.find("no such directory"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(d.path("x.svg")));
  EXPECT_EQ(run_toy("runs plot " + d.path("runs/a") + " " + d.path("runs/b")).code, 2);
  EXPECT_EQ(run_toy("runs compare " + d.path("runs/a")).code, 2);
}
