// recipes/jsonl_data.h — L5: fine-tuning data, one JSON object a line, in the formats mlx-lm and
// TRL users have (`toy train … --data FILE.jsonl`):
//
//   {"text": "…"}                                        every token counted
//   {"prompt": "…", "completion": "…"}                   prompt + completion (+ EOS), as TRL joins them
//   {"messages": [{"role": "user", "content": "…"}, …]}  through the model's own chat template
//
// With mask_prompt (the default) the loss counts only the completion's tokens, and of a chat its
// last message, which must be the assistant's: the prompt is messages[:-1] rendered with the
// generation prompt (what `toy serve` sends the model), the answer the rest of the full rendering.
// The prompt and the answer are tokenized apart and joined, so the tokens trained are exactly
// those the model sees and writes at inference.
//
// Sequences are padded, not packed: each example is one sequence of T + 1 ids, cut at T + 1
// (counted in a warning) or padded with EOS that the loss does not count; an example with nothing
// left to count after the cut is dropped (also counted). Step s's batch holds examples
// s·B … s·B + B − 1 of an endless list of epochs, each a permutation of the training examples
// drawn from (seed, epoch): a pure function of the step, as the Trainer requires. The last
// eval_fraction of the examples (in file order) is held out for evaluation.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "toy/recipes/trainer.h"

namespace toy::recipes {

struct JsonlExamples {
  // Token ids of each example; those the loss does not predict written as masked_id(id).
  std::vector<std::vector<int32_t>> sequences;
  int64_t text = 0, completions = 0, chats = 0;  // examples of each format
};

// Reads and tokenizes `path`. `chat_template`: the Jinja source chats are rendered with. Blank
// lines are skipped. Throws DataError "PATH:LINE: …" for a line that is not a JSON object of one
// of the three formats (or whose chat the template cannot render), and for a file with no example.
JsonlExamples read_jsonl_examples(const std::string& path, const Tokenizer& tok, const std::string& chat_template,
                                  bool mask_prompt);

// --data: the examples of c.data as training batches and held-out batches; the chat template is
// that of the GGUF the tokenizer comes from (c.tokenizer, else c.init_weights), else ChatML.
// Throws DataError, ConfigError (no tokenizer).
TrainingData load_jsonl_data(const TrainRunConfig& c, const Tokenizer* tok, std::FILE* err);

// load_jsonl_data with --data, else load_training_data: a Recipe's data.
TrainingData load_any_training_data(const TrainRunConfig& c, const Tokenizer* tok, int64_t n_vocab, std::FILE* err);

}  // namespace toy::recipes
