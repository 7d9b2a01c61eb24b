// tests/test_sampler.cpp — the Sampler against the chain written a second time in NumPy
// (scripts/reference/samplers.py, which states the shared conventions; its output is
// scripts/reference/samplers.json), then the parts the reference does not cover: names of
// stages, DRY's breakers from a tokenizer, vocabularies of one or two tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "fixtures.h"
#include "toy/engines/sampler.h"
#include "toy/io/gguf.h"
#include "toy/tokenizer/tokenizer.h"

using namespace toy;
using json = nlohmann::json;

namespace {

const json& reference() {
  static const json ref =
      json::parse(test::read_text(std::string(TOY_SOURCE_DIR) + "/scripts/reference/samplers.json"));
  return ref;
}

float number(const json& v) {
  if (v.is_string() && v.get<std::string>() == "-inf") return -std::numeric_limits<float>::infinity();
  return v.get<float>();
}

SamplerConfig config(const json& c) {
  SamplerConfig s{.temperature = c["temperature"].get<float>(),
                  .top_k = c["top_k"].get<int>(),
                  .top_p = c["top_p"].get<float>(),
                  .min_p = c["min_p"].get<float>(),
                  .typical_p = c["typical_p"].get<float>(),
                  .top_n_sigma = c["top_n_sigma"].get<float>(),
                  .xtc_probability = c["xtc_probability"].get<float>(),
                  .xtc_threshold = c["xtc_threshold"].get<float>(),
                  .min_keep = c["min_keep"].get<int>(),
                  .repeat_penalty = c["repeat_penalty"].get<float>(),
                  .repeat_last_n = c["repeat_last_n"].get<int>(),
                  .frequency_penalty = c["frequency_penalty"].get<float>(),
                  .presence_penalty = c["presence_penalty"].get<float>(),
                  .dry_multiplier = c["dry_multiplier"].get<float>(),
                  .dry_base = c["dry_base"].get<float>(),
                  .dry_allowed_length = c["dry_allowed_length"].get<int>(),
                  .dry_penalty_last_n = c["dry_penalty_last_n"].get<int>(),
                  .dry_sequence_breakers = c["dry_sequence_breakers"].get<std::vector<std::vector<int32_t>>>(),
                  .mirostat = c["mirostat"].get<int>(),
                  .mirostat_tau = c["mirostat_tau"].get<float>(),
                  .mirostat_eta = c["mirostat_eta"].get<float>(),
                  .logit_bias = {},
                  .chain = {},
                  .seed = c["seed"].get<uint64_t>()};
  for (const json& b : c["logit_bias"]) s.logit_bias.emplace_back(b[0].get<int32_t>(), number(b[1]));
  std::string names;
  for (const json& n : c["chain"]) names += n.get<std::string>() + ";";
  s.chain = parse_sampler_names(names);
  return s;
}

// The script's logits_stream(): a second mt19937_64 (seed + 1), z = spread · (2u − 1) as float.
std::vector<float> next_logits(std::mt19937_64& g, int64_t vocab, double spread, bool ties) {
  std::vector<float> z(static_cast<size_t>(vocab));
  for (float& x : z) {
    const double v = spread * (2 * (double(g() >> 11) * 0x1.0p-53) - 1);
    x = float(ties ? std::floor(v + 0.5) : v);
  }
  return z;
}

}  // namespace

TEST(Sampler, DrawsTheTokensOfTheNumPyReference) {
  const json& ref = reference();
  ASSERT_GE(ref["cases"].size(), 15u);
  for (const json& c : ref["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const SamplerConfig sc = config(c["config"]);
    Sampler sampler(sc);
    std::mt19937_64 logits_rng(sc.seed + 1);
    std::vector<int32_t> history = c["history"].get<std::vector<int32_t>>();
    const std::vector<int32_t> expected = c["tokens"].get<std::vector<int32_t>>();
    for (size_t step = 0; step < expected.size(); ++step) {
      const std::vector<float> z =
          next_logits(logits_rng, c["vocab"].get<int64_t>(), c["spread"].get<double>(), c["ties"].get<bool>());
      const int32_t got = sampler.sample(z, history);
      ASSERT_EQ(got, expected[step]) << "step " << step;
      history.push_back(got);
    }
  }
}

TEST(Sampler, NamesAndLettersOfTheStagesAsLlamaCpp) {
  EXPECT_EQ(sampler_chain_names(default_sampler_chain()),
            "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature");
  EXPECT_EQ(sampler_chain_names(parse_sampler_letters("edskypmxt")), sampler_chain_names(default_sampler_chain()));
  EXPECT_EQ(sampler_chain_names(parse_sampler_names("Top-K;topp;nucleus;temp;typical;typ;min_p;top-n-sigma")),
            "top_k;top_p;top_p;temperature;typ_p;typ_p;min_p;top_n_sigma");
  EXPECT_THROW(parse_sampler_names("top_k;mirostat"), std::invalid_argument);
  EXPECT_THROW(parse_sampler_letters("kq"), std::invalid_argument);
  EXPECT_TRUE(parse_sampler_names("").empty());
}

TEST(Sampler, OneOrTwoTokensAndEveryTokenBanned) {
  for (int mirostat : {0, 1, 2}) {
    SamplerConfig sc{.temperature = 1.0f,
                     .top_p = 0.5f,
                     .typical_p = 0.5f,
                     .top_n_sigma = 0.5f,
                     .xtc_probability = 1.0f,
                     .mirostat = mirostat};
    Sampler one(sc);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(one.sample(std::vector<float>{0.3f}, {}), 0);
    Sampler two(sc);
    for (int i = 0; i < 20; ++i) {
      const int32_t id = two.sample(std::vector<float>{1.0f, 1.5f}, {});
      EXPECT_TRUE(id == 0 || id == 1);
    }
    sc.logit_bias = {{0, -INFINITY}, {1, -INFINITY}};
    Sampler banned(sc);
    EXPECT_EQ(banned.sample(std::vector<float>{1.0f, 1.5f}, {}), 0);  // nothing left: the first id, no crash
  }
}

TEST(Sampler, DryBreakersFromAVocabulary) {
  TOY_REQUIRE_FIXTURE(path, "real/llama-2-tiny-random.gguf");  // a real 32000-token vocabulary
  const std::shared_ptr<const Tokenizer> t = Tokenizer::from_gguf(*gguf::GgufFile::open(path.string()));
  const std::vector<std::vector<int32_t>> b = dry_breakers(*t, {"\n", "ab"});
  ASSERT_FALSE(b.empty());
  for (const std::vector<int32_t>& seq : b) {
    const std::string head = t->piece(seq[0], true);
    if (seq.size() == 1) {  // a token holding "\n" or "ab" whole
      EXPECT_TRUE(head.find('\n') != std::string::npos || head.find("ab") != std::string::npos) << head;
      continue;
    }
    EXPECT_EQ(head.back(), 'a') << head;  // a token ending in "a", then the tokens of "b"
    EXPECT_EQ(t->decode(std::span<const int32_t>(seq).subspan(1)), "b");
  }
  for (int32_t id = 0; id < t->n_vocab(); ++id) {  // every token that holds "\n" is one
    if (t->piece(id, true).find('\n') == std::string::npos) continue;
    EXPECT_NE(std::find(b.begin(), b.end(), std::vector<int32_t>{id}), b.end()) << id;
  }
}
