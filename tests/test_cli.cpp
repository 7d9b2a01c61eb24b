// tests/test_cli.cpp — the toy binary end to end: help, version, describe, exit codes.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "fixtures.h"

using toy::test::run_toy;

TEST(Cli, HelpAndVersion) {
  auto h = run_toy("--help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("describe"), std::string::npos);
  auto v = run_toy("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("toy ", 0), 0u);
  EXPECT_EQ(run_toy("no-such-command").code, 2);
  EXPECT_EQ(run_toy("describe").code, 2);                 // missing MODEL
  EXPECT_EQ(run_toy("describe x.gguf --bogus").code, 2);  // unknown flag
}

TEST(Cli, DescribeEveryFixture) {
  auto files = toy::test::fixture_files("models", ".gguf");
  auto tok = toy::test::fixture_files("tokenizer", ".gguf");
  files.insert(files.end(), tok.begin(), tok.end());
  if (files.empty()) GTEST_SKIP() << "fixtures not found (set TOY_FIXTURES)";
  for (const auto& p : files) {
    SCOPED_TRACE(p.string());
    auto r = run_toy("describe " + p.string() + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_FALSE(j["architecture"].get<std::string>().empty());
    EXPECT_GT(j["tokenizer"]["n_vocab"].get<int>(), 0);
    auto t = run_toy("describe " + p.string());
    EXPECT_EQ(t.code, 0);
    EXPECT_NE(t.out.find("tokenizer:"), std::string::npos);
  }
}

TEST(Cli, BadModelFileExitsThree) {
  const std::string bad = testing::TempDir() + "/bad.gguf";
  FILE* f = fopen(bad.c_str(), "wb");
  fputs("GGUF\x03\0\0\0garbage", f);
  fclose(f);
  auto r = run_toy("describe " + bad);
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find(bad), std::string::npos);
  EXPECT_EQ(run_toy("describe /nonexistent.gguf").code, 3);
}
