// archs/gemma2.h — the one fact of Gemma 2 (archs/gemma2.cpp) that tests check on its own.
#pragma once

#include "toy/archs/model.h"

namespace toy {

// The attention scale: llama.cpp uses 1/√(d_model/n_head) (integer division) for Gemma-2 27B,
// which it recognises by its 46 layers; every other size uses 1/√d_head.
float gemma2_attention_scale(const ModelConfig& c);

}  // namespace toy
