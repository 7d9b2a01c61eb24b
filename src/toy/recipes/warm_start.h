// recipes/warm_start.h — L5: a small model started from a larger model's token embedding.
//
//   toy train warm-start --donor DONOR.gguf [--arch A --d-model D …] …
//
// The new model takes over the donor's vocabulary and tokenizer. Its token embedding is the
// donor's table E [n_vocab, donor_d] (any dtype, read in place, frozen) times a learned lens
// [donor_d, d_model], scaled: token_embd = c·E·lens, c = 32 / (rms(E)·√donor_d), the lens started
// at N(0, (0.02/32)²) — so c·E·lens starts as small as a random embedding and, under Adam, the
// lens learns 32 times faster than the other weights (warm_start.cpp says why). The row of
// token id is c·E[id]·lens (primitives.h: an embedding's low-rank term), so the product
// [n_vocab, d_model] is never formed while training.
//   trained: the lens and every weight of the new model except token_embd (AdamW, as from-scratch;
//            the lens is a 2-D weight, so it is decayed)
//   frozen:  the donor's table (not a parameter: no gradient, no optimizer state)
// With --train-embd (c.train_embd) token_embd = W + c·E·lens and the new model's own W [n_vocab,
// d_model] trains too, from zero: the donor's structure first, the freedom of a full table later.
// The output projection is untied and starts random, as from-scratch. An architecture without an
// output matrix (gemma2) computes its logits through c·E·lens instead (linear() adds the term).
// Every checkpoint folds the lens: weights/step-N.gguf holds token_embd = c·E·lens and output.weight,
// an ordinary GGUF that `toy infer` and llama.cpp load. The lens itself (with every exact weight)
// is in step-N.optim.gguf, which --resume reads.
// Everything else (data, schedule, events, checkpoints, determinism) is the Trainer's.
#pragma once

#include <string>

#include "toy/recipes/run_config.h"
#include "toy/recipes/trainer.h"

namespace toy::recipes {

// Throws ConfigError (usage), toy::DataError / gguf::GgufError (a missing or malformed donor, a
// vocabulary other than the donor's) and std::runtime_error (I/O, a diverged loss), as train_run.
RunResult train_warm_start(const TrainRunConfig& c, const RunOutput& io, const std::string& resume_dir = "");

}  // namespace toy::recipes
