// io/card_facts.h — internal to the card module: what each architecture is made of, as data.
//
// One row per architecture (card_facts.cpp) drives both the tensor list and the pseudocode, so
// the two cannot disagree. The facts are those of ../shared/fixtures/models/CONVENTIONS.md.
#pragma once

#include <string>

#include "toy/io/card.h"

namespace toy::card::detail {

enum class Norm { Rms, Layer };  // RMSNorm (no bias) or LayerNorm (weight + bias)
enum class Positions { RopeNorm, RopeNeox, Learned };
enum class QkNorm { None, PerHead, FullWidth };  // RMSNorm of q and k before rope
enum class Ffn { SwiGlu, GeGlu, GeluMlp, Moe };

struct Facts {
  const char* arch;      // GGUF general.architecture
  const char* hf_class;  // e.g. "LlamaForCausalLM"
  Norm norm;
  Positions positions;
  bool fused_qkv;    // one attn_qkv projection (gpt2)
  bool qkv_bias;     // biases on the q/k/v projections
  bool output_bias;  // biases on attn_output, ffn_up, ffn_down (gpt2)
  QkNorm qk_norm;
  bool sandwich;  // post_attention_norm / post_ffw_norm on each sub-layer's output (gemma2)
  Ffn ffn;
  bool embed_scale;     // X ← X·√d_model after the lookup (gemma2)
  bool softcap;         // attention and final logit soft-capping (gemma2)
  bool sliding_window;  // local attention on every other layer (gemma2)
};

const Facts* find_facts(const std::string& arch);  // nullptr when unknown
const Facts& facts_of(const Card& c);              // throws CardError naming the known ones

// The sizes a card's formulas use, read from its `<arch>.*` keys with llama.cpp's defaults.
struct Dims {
  int64_t n_vocab, d_model, n_layer, n_head, n_kv_head, d_head, d_value, d_ff, n_ctx, n_rot;
  int64_t n_expert = 0, n_expert_used = 0;
  int64_t window = 0, window_pattern = 0;  // gemma2 sliding window
  double eps = 0, rope_base = 10000;
  double attn_cap = 0, final_cap = 0;  // gemma2 soft-caps
};
Dims dims_of(const Card& c);  // throws CardError for a missing or unusable key

// Shortest decimal text that reads back to the same float (f32) or double.
std::string short_float(double v, bool f32);

// The Markdown sections after the hyper-parameter block: notation, parameters, algorithms.
std::string render_algorithms(const Card& c);

}  // namespace toy::card::detail
