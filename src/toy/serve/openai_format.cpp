// serve/openai_format.cpp — response, chunk, usage and logprobs objects (see openai_format.h).
#include "toy/serve/openai_format.h"

#include <array>
#include <chrono>
#include <cmath>
#include <random>

namespace toy::serve {
namespace {

std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += hex[rng() % 16];
  return id;
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

// Chosen tokens are shown as they appear in the text; alternatives with special tokens visible,
// so an end-of-text alternative reads "</s>" rather than "".
std::string chosen_text(const Tokenizer& t, int32_t id) { return t.piece(id, /*special=*/false); }
std::string alt_text(const Tokenizer& t, int32_t id) { return t.piece(id, /*special=*/true); }

json logprob_value(double lp) { return std::isfinite(lp) ? json(lp) : json(nullptr); }

json chat_logprobs(const std::vector<TokenLogprob>& tokens, const Tokenizer& t) {
  json content = json::array();
  for (const TokenLogprob& tl : tokens) {
    json top = json::array();
    for (auto [id, lp] : tl.top)
      top.push_back({{"token", alt_text(t, id)}, {"logprob", logprob_value(lp)}, {"bytes", bytes_of(alt_text(t, id))}});
    const std::string s = chosen_text(t, tl.id);
    content.push_back(
        {{"token", s}, {"logprob", logprob_value(tl.logprob)}, {"bytes", bytes_of(s)}, {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

// Legacy completions logprobs; `offset` is the text offset of the first token (advanced).
json completion_logprobs(const std::vector<TokenLogprob>& tokens, const Tokenizer& t, size_t& offset) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  for (const TokenLogprob& tl : tokens) {
    const std::string s = chosen_text(t, tl.id);
    toks.push_back(s);
    lps.push_back(logprob_value(tl.logprob));
    if (std::isnan(tl.logprob)) {
      tops.push_back(nullptr);  // the first prompt token: nothing predicted it
    } else {
      json top = json::object();
      for (auto [id, lp] : tl.top) top[alt_text(t, id)] = logprob_value(lp);
      tops.push_back(top);
    }
    offs.push_back(offset);
    offset += s.size();
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

}  // namespace

ResponseHeader make_header(Endpoint endpoint, const std::string& model, bool include_usage) {
  return {
      .endpoint = endpoint,
      .id = random_id(endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-"),
      .created =
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(),
      .model = model,
      .include_usage = include_usage};
}

json usage_json(const CompletionResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

json timings_json(const CompletionResult& r) {
  auto rates = [](int64_t n, double seconds) {  // ms, ms per token, tokens per second
    return std::array<double, 3>{1e3 * seconds, n > 0 ? 1e3 * seconds / double(n) : 0.0,
                                 seconds > 0 ? double(n) / seconds : 0.0};
  };
  const int64_t prompt_n = r.prompt_tokens - r.cached_tokens;
  const auto [prompt_ms, prompt_per_token_ms, prompt_per_second] = rates(prompt_n, r.prompt_seconds);
  const auto [predicted_ms, predicted_per_token_ms, predicted_per_second] =
      rates(r.completion_tokens, r.generate_seconds);
  json t = {{"cache_n", r.cached_tokens},
            {"prompt_n", prompt_n},
            {"prompt_ms", prompt_ms},
            {"prompt_per_token_ms", prompt_per_token_ms},
            {"prompt_per_second", prompt_per_second},
            {"predicted_n", r.completion_tokens},
            {"predicted_ms", predicted_ms},
            {"predicted_per_token_ms", predicted_per_token_ms},
            {"predicted_per_second", predicted_per_second}};
  if (r.draft_tokens > 0) t.update({{"draft_n", r.draft_tokens}, {"draft_n_accepted", r.draft_accepted}});
  return t;
}

namespace {

// One choice of a complete answer.
json choice_json(Endpoint endpoint, int index, const CompletionResult& r, const Tokenizer& t, bool logprobs,
                 const std::string* echo) {
  if (endpoint == Endpoint::Chat) {
    json message = {{"role", "assistant"}, {"content", r.text}, {"refusal", nullptr}};
    if (!r.tool_calls.empty()) {
      if (r.text.empty()) message["content"] = nullptr;
      message["tool_calls"] = json::array();
      for (const ToolCall& c : r.tool_calls)
        message["tool_calls"].push_back(
            {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    return {{"index", index},
            {"message", std::move(message)},
            {"logprobs", logprobs ? chat_logprobs(r.tokens, t) : json(nullptr)},
            {"finish_reason", r.finish_reason}};
  }
  json lp = nullptr;
  if (logprobs) {
    size_t offset = 0;
    std::vector<TokenLogprob> all = r.prompt;  // echo: the prompt's tokens come first
    all.insert(all.end(), r.tokens.begin(), r.tokens.end());
    lp = completion_logprobs(all, t, offset);
    if (echo) {  // generated tokens start right after the echoed text, whatever the prompt pieces add up to
      size_t gen = echo->size();
      for (size_t i = r.prompt.size(); i < all.size(); ++i) {
        lp["text_offset"][i] = gen;
        gen += chosen_text(t, all[i].id).size();
      }
    }
  }
  return {
      {"text", echo ? *echo + r.text : r.text}, {"index", index}, {"logprobs", lp}, {"finish_reason", r.finish_reason}};
}

}  // namespace

CompletionResult total_usage(const std::vector<CompletionResult>& results) {
  CompletionResult total;
  total.prompt_tokens = results.at(0).prompt_tokens;
  total.cached_tokens = results[0].cached_tokens;
  total.prompt_seconds = results[0].prompt_seconds;
  for (const CompletionResult& r : results) {
    total.completion_tokens += r.completion_tokens;
    total.generate_seconds += r.generate_seconds;
    total.draft_tokens += r.draft_tokens;
    total.draft_accepted += r.draft_accepted;
  }
  return total;
}

json response_json(const ResponseHeader& h, const std::vector<CompletionResult>& results, const Tokenizer& t,
                   bool logprobs, const std::string* echo) {
  json out = {{"id", h.id},
              {"object", h.endpoint == Endpoint::Chat ? "chat.completion" : "text_completion"},
              {"created", h.created},
              {"model", h.model},
              {"system_fingerprint", "toy-" TOY_VERSION}};
  json choices = json::array();
  for (size_t index = 0; index < results.size(); ++index) {
    choices.push_back(choice_json(h.endpoint, int(index), results[index], t, logprobs, echo));
  }
  out["choices"] = std::move(choices);
  const CompletionResult total = total_usage(results);
  out["usage"] = usage_json(total);
  out["timings"] = timings_json(total);
  return out;
}

json ChunkWriter::chunk(json choice) {
  json out = {{"id", h_.id},
              {"object", h_.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
              {"created", h_.created},
              {"model", h_.model},
              {"system_fingerprint", "toy-" TOY_VERSION},
              {"choices", json::array({std::move(choice)})}};
  if (h_.include_usage) out["usage"] = nullptr;
  return out;
}

json ChunkWriter::first(const std::string& echo_text, const std::vector<TokenLogprob>& echo_tokens) {
  if (h_.endpoint == Endpoint::Chat)
    return chunk({{"index", index_},
                  {"delta", {{"role", "assistant"}, {"content", ""}}},
                  {"logprobs", nullptr},
                  {"finish_reason", nullptr}});
  json lp = nullptr;
  if (logprobs_) lp = completion_logprobs(echo_tokens, t_, offset_);
  offset_ = echo_text.size();
  return chunk({{"text", echo_text}, {"index", index_}, {"logprobs", lp}, {"finish_reason", nullptr}});
}

json ChunkWriter::delta(const Delta& d) {
  if (h_.endpoint == Endpoint::Chat)
    return chunk({{"index", index_},
                  {"delta", {{"content", d.text}}},
                  {"logprobs", logprobs_ ? chat_logprobs(d.tokens, t_) : json(nullptr)},
                  {"finish_reason", nullptr}});
  json lp = logprobs_ ? completion_logprobs(d.tokens, t_, offset_) : json(nullptr);
  return chunk({{"text", d.text}, {"index", index_}, {"logprobs", lp}, {"finish_reason", nullptr}});
}

json ChunkWriter::tool_call(const ToolCallDelta& d) {
  json call = {{"index", d.index}};
  if (!d.name.empty()) call.update({{"id", d.id}, {"type", "function"}});
  call["function"] = d.name.empty() ? json{{"arguments", d.arguments}} : json{{"name", d.name}, {"arguments", ""}};
  return chunk({{"index", index_},
                {"delta", {{"tool_calls", json::array({std::move(call)})}}},
                {"logprobs", nullptr},
                {"finish_reason", nullptr}});
}

json ChunkWriter::last(const CompletionResult& r) {
  json out = h_.endpoint == Endpoint::Chat
                 ? chunk({{"index", index_},
                          {"delta", json::object()},
                          {"logprobs", nullptr},
                          {"finish_reason", r.finish_reason}})
                 : chunk({{"text", ""}, {"index", index_}, {"logprobs", nullptr}, {"finish_reason", r.finish_reason}});
  out["timings"] = timings_json(r);
  return out;
}

json ChunkWriter::usage(const CompletionResult& r) {
  json out = chunk(json::object());
  out["choices"] = json::array();
  out["usage"] = usage_json(r);
  return out;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace toy::serve
