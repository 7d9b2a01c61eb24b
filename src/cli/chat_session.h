// cli/chat_session.h — a conversation with a model on the command line (`toy chat`, `toy infer
// --chat`): messages rendered by the model's own chat template, the KV cache kept between turns.
#pragma once

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/generation.h"
#include "toy/serve/chat_prompt.h"

namespace toy::cli {

class ChatSession {
 public:
  // Warns on stderr when the model has no chat template (ChatML is used, as llama.cpp does).
  // With `spec` (cli/generation.h's drafting), answers are decoded speculatively.
  ChatSession(const Loaded& l, const SamplerConfig& sc, int64_t n_ctx, DType kv_type, std::string system,
              Speculation* spec = nullptr);

  // Adds `user` to the conversation, streams the answer to `out` and keeps it. The oldest turns
  // are dropped (with a note on stderr) when the conversation outgrows the context; a message that
  // alone does not fit is an InputError and leaves the conversation as it was. `limit` bounds the
  // answer (Budget::n = 0: up to the end of the context).
  Streamed answer(const std::string& user, Budget limit, bool ignore_eos, std::FILE* out,
                  const std::atomic<bool>* stop);

  void clear();  // forgets every turn but the system message

 private:
  std::vector<int32_t> render(bool add_generation_prompt) const;  // messages_ -> prompt tokens

  const Loaded& model_;
  serve::ChatPrompter prompter_;
  DecodeEngine engine_;
  Sampler sampler_;
  std::string system_;
  Speculation* spec_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
  std::vector<int32_t> cached_;  // the tokens in the engine's KV cache, in order
};

// `toy infer --chat`: the prompt as one user message, the answer on stdout.
int one_chat_turn(const Args& a, const Loaded& l, const SamplerConfig& sc, int64_t n_ctx, Budget limit);

}  // namespace toy::cli
