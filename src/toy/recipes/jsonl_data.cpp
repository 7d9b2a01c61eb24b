// recipes/jsonl_data.cpp — JSONL fine-tuning examples: parsed, rendered, tokenized, masked and
// laid out as the Trainer's batches.
#include "toy/recipes/jsonl_data.h"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <sstream>

#include "toy/chat/chat_template.h"
#include "toy/engines/train_data.h"
#include "toy/io/gguf.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::recipes {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

// A line that is not a usable example: the caller adds "PATH:LINE: ".
struct BadLine {
  std::string what;
};

const std::string& string_field(const ordered_json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw BadLine{where + "has no \"" + key + "\""};
  if (!j[key].is_string()) throw BadLine{where + "\"" + key + "\" must be a string, got " + j[key].type_name()};
  return j[key].get_ref<const std::string&>();
}

// The ids of `prompt` (with BOS when the vocabulary asks for it) followed by those of `answer`,
// the prompt's masked when `mask_prompt`.
std::vector<int32_t> join(const Tokenizer& tok, const std::string& prompt, const std::string& answer,
                          bool mask_prompt) {
  std::vector<int32_t> ids = tok.encode(prompt, /*add_special=*/true, /*parse_special=*/true);
  if (mask_prompt) std::transform(ids.begin(), ids.end(), ids.begin(), masked_id);
  const std::vector<int32_t> a = tok.encode(answer, false, true);
  ids.insert(ids.end(), a.begin(), a.end());
  return ids;
}

std::vector<int32_t> chat_example(const ordered_json& messages, const Tokenizer& tok, const chat::ChatTemplate& tmpl,
                                  bool mask_prompt) {
  if (!messages.is_array() || messages.empty()) throw BadLine{"\"messages\" must be a non-empty array"};
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "] ";
    if (!messages[i].is_object()) throw BadLine{where + "must be an object"};
    string_field(messages[i], "role", where);
    string_field(messages[i], "content", where);
  }
  if (messages.back()["role"] != "assistant")
    throw BadLine{"the last message is the one trained on: its role must be \"assistant\", got \"" +
                  messages.back()["role"].get<std::string>() + "\""};
  chat::ChatOptions o;
  if (tok.bos() >= 0) o.bos_token = std::string(tok.token_text(tok.bos()));
  if (tok.eos() >= 0) o.eos_token = std::string(tok.token_text(tok.eos()));
  o.strip_leading_bos = tok.add_bos();
  o.today = "2026-01-01";  // a date the template may print: fixed, so the data does not change with the day
  std::string prompt, full;
  try {
    o.add_generation_prompt = true;
    prompt = tmpl.apply(ordered_json(messages.begin(), messages.end() - 1), o);
    o.add_generation_prompt = false;
    full = tmpl.apply(messages, o);
  } catch (const chat::TemplateError& e) {
    throw BadLine{std::string("the chat template fails on it: ") + e.what()};
  }
  if (full.compare(0, prompt.size(), prompt) != 0)
    throw BadLine{"the chat template does not render this conversation as its prompt followed by the answer"};
  return join(tok, prompt, full.substr(prompt.size()), mask_prompt);
}

std::string chat_template_of(const TrainRunConfig& c) {
  const std::string& path = !c.tokenizer.empty() ? c.tokenizer : c.init_weights;
  if (!path.empty()) {
    const auto t = gguf::GgufFile::open(path)->opt_string("tokenizer.chat_template");
    if (t && !t->empty()) return *t;
  }
  return chat::chatml_template();  // llama.cpp's fallback, as `toy serve`
}

}  // namespace

JsonlExamples read_jsonl_examples(const std::string& path, const Tokenizer& tok, const std::string& chat_template,
                                  bool mask_prompt) {
  std::unique_ptr<chat::ChatTemplate> tmpl;  // parsed at the first chat
  JsonlExamples r;
  std::istringstream in(read_file(path));
  int64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      const ordered_json j = ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) throw BadLine{"not JSON"};
      if (!j.is_object()) throw BadLine{std::string("not a JSON object but ") + j.type_name()};
      if (j.contains("messages")) {
        if (!tmpl) try {
            tmpl = std::make_unique<chat::ChatTemplate>(chat_template);
          } catch (const chat::TemplateError& e) {
            throw DataError("the chat template does not parse: " + std::string(e.what()));
          }
        r.sequences.push_back(chat_example(j["messages"], tok, *tmpl, mask_prompt));
        ++r.chats;
      } else if (j.contains("prompt") || j.contains("completion")) {
        std::vector<int32_t> ids =
            join(tok, string_field(j, "prompt", ""), string_field(j, "completion", ""), mask_prompt);
        if (tok.eos() >= 0) ids.push_back(tok.eos());
        r.sequences.push_back(std::move(ids));
        ++r.completions;
      } else if (j.contains("text")) {
        std::vector<int32_t> ids = tok.encode(string_field(j, "text", ""), true, true);
        if (tok.eos() >= 0) ids.push_back(tok.eos());
        r.sequences.push_back(std::move(ids));
        ++r.text;
      } else {
        throw BadLine{"has none of \"text\", \"prompt\"/\"completion\", \"messages\""};
      }
    } catch (const BadLine& e) {
      throw DataError(path + ":" + std::to_string(line_no) + ": " + e.what);
    }
  }
  if (r.sequences.empty()) throw DataError(path + ": no examples (one JSON object a line)");
  return r;
}

TrainingData load_jsonl_data(const TrainRunConfig& c, const Tokenizer* tok, std::FILE* err) {
  if (!tok) throw ConfigError("--data needs a tokenizer: give --tokenizer FILE");
  const int64_t B = c.batch, T = c.context;
  JsonlExamples ex = read_jsonl_examples(c.data, *tok, chat_template_of(c), c.mask_prompt);

  // One row of T + 1 ids each: cut, padded with uncounted EOS, dropped when nothing is counted.
  const int32_t pad = masked_id(tok->eos() >= 0 ? tok->eos() : 0);
  std::vector<std::vector<int32_t>> rows;
  int64_t cut = 0, dropped = 0;
  for (std::vector<int32_t>& s : ex.sequences) {
    if (int64_t(s.size()) > T + 1) s.resize(size_t(T + 1)), ++cut;
    if (std::none_of(s.begin() + 1, s.end(), [](int32_t id) { return id >= 0; })) {
      ++dropped;
      continue;
    }
    s.resize(size_t(T + 1), pad);
    rows.push_back(std::move(s));
  }
  if (cut || dropped)
    std::fprintf(err,
                 "warning: %s: %lld examples longer than --context + 1 = %lld tokens were cut, %lld dropped "
                 "with no counted token left\n",
                 c.data.c_str(), (long long)cut, (long long)(T + 1), (long long)dropped);
  const int64_t n_held = int64_t(double(rows.size()) * c.eval_fraction);
  auto train = std::make_shared<std::vector<std::vector<int32_t>>>(rows.begin(), rows.end() - n_held);
  if (train->empty()) throw DataError(c.data + ": no example left to train on");

  TrainingData d;
  d.batch_ids = [train, B, seed = c.seed](int64_t s) {
    const int64_t n = int64_t(train->size());
    std::vector<int32_t> ids;
    std::vector<int64_t> order(static_cast<size_t>(n));
    int64_t epoch = -1;
    for (int64_t k = s * B; k < (s + 1) * B; ++k) {
      if (k / n != epoch) {  // the permutation of this epoch: examples sorted by a hash of (seed, epoch, index)
        epoch = k / n;
        std::iota(order.begin(), order.end(), 0);
        const uint64_t key = mix64(mix64(seed) ^ uint64_t(epoch));
        std::sort(order.begin(), order.end(),
                  [key](int64_t a, int64_t b) { return mix64(key ^ uint64_t(a)) < mix64(key ^ uint64_t(b)); });
      }
      const std::vector<int32_t>& row = (*train)[size_t(order[size_t(k % n)])];
      ids.insert(ids.end(), row.begin(), row.end());
    }
    return ids;
  };
  for (int64_t i = int64_t(rows.size()) - n_held; i < int64_t(rows.size()) && int64_t(d.eval.size()) < c.eval_batches;
       i += B) {
    const int64_t b = std::min(B, int64_t(rows.size()) - i);
    std::vector<int32_t> ids;
    for (int64_t j = i; j < i + b; ++j) ids.insert(ids.end(), rows[size_t(j)].begin(), rows[size_t(j)].end());
    d.eval.push_back(make_batch(ids, b, T));
  }
  std::fprintf(err, "data %s: %zu examples (%lld text, %lld completions, %lld chats), %zu held out%s\n", c.data.c_str(),
               ex.sequences.size(), (long long)ex.text, (long long)ex.completions, (long long)ex.chats, size_t(n_held),
               c.mask_prompt ? ", loss on the completions only" : "");
  d.summary = {{"source", "jsonl"},
               {"path", c.data},
               {"examples", rows.size()},
               {"text", ex.text},
               {"completions", ex.completions},
               {"chats", ex.chats},
               {"cut", cut},
               {"dropped", dropped},
               {"held_out_examples", n_held},
               {"mask_prompt", c.mask_prompt}};
  return d;
}

TrainingData load_any_training_data(const TrainRunConfig& c, const Tokenizer* tok, int64_t n_vocab, std::FILE* err) {
  return c.data.empty() ? load_training_data(c, tok, n_vocab, err) : load_jsonl_data(c, tok, err);
}

}  // namespace toy::recipes
