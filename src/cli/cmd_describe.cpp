// cli/cmd_describe.cpp — `toy describe MODEL`: what is inside a GGUF file.
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli.h"
#include "cli/common.h"
#include "toy/cards/card.h"
#include "toy/io/gguf.h"

namespace toy::cli {
namespace {

using gguf::GgufFile;
using gguf::Value;
using gguf::ValueType;

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / (1ull << 30));
  else if (b >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", double(b) / (1ull << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)b);
  return buf;
}

struct TokenizerSummary {
  std::string model, pre;
  size_t n_vocab = 0;
  std::vector<std::pair<std::string, std::string>> specials;  // role -> "id (piece)"
};

TokenizerSummary tokenizer_summary(const GgufFile& f) {
  TokenizerSummary s;
  s.model = f.opt_string("tokenizer.ggml.model").value_or("");
  s.pre = f.opt_string("tokenizer.ggml.pre").value_or("");
  const auto tokens = f.get_strings("tokenizer.ggml.tokens");
  s.n_vocab = tokens.size();
  for (const char* role : {"bos", "eos", "unknown", "padding", "separator", "eot", "eom"}) {
    auto id = f.opt_int(std::string("tokenizer.ggml.") + role + "_token_id");
    if (!id) continue;
    std::string piece = *id >= 0 && size_t(*id) < tokens.size() ? std::string(tokens[size_t(*id)]) : "out of range";
    s.specials.emplace_back(role, std::to_string(*id) + " (" + piece + ")");
  }
  return s;
}

uint64_t parameter_count(const GgufFile& f) {
  uint64_t n = 0;
  for (const auto& t : f.tensors()) n += uint64_t(numel(t.shape));
  return n;
}

// An algorithm card (Markdown) given as MODEL: its configuration, or the card re-rendered.
int describe_card(const std::string& path, const Args& a) {
  try {
    const card::Card c = card::load(path);
    std::cout << (a.flag("json") ? json_text(card::to_json(c)) + "\n" : for_terminal(card::render(c), true));
  } catch (const card::CardError& e) {
    throw InputError(e.what());
  }
  return kOk;
}

int run(const Args& a) {
  if (card::is_card_file(*a.positional(0))) return describe_card(*a.positional(0), a);
  const std::string path = resolve_model(*a.positional(0));
  auto f = GgufFile::open(path);
  if (a.flag("card")) {  // with --json: the configuration the card holds
    try {
      const card::Card c = card::from_gguf(*f);
      std::cout << (a.flag("json") ? json_text(card::to_json(c)) + "\n" : for_terminal(card::render(c), true));
    } catch (const card::CardError& e) {
      throw InputError(e.what());
    }
    return kOk;
  }
  const std::string arch = f->architecture();
  const TokenizerSummary tok = tokenizer_summary(*f);

  if (a.flag("json")) {
    nlohmann::ordered_json j;
    j["file"] = path;
    j["gguf_version"] = f->version();
    j["architecture"] = arch;
    j["name"] = f->opt_string("general.name").value_or("");
    j["parameters"] = parameter_count(*f);
    j["file_bytes"] = f->file_size();
    nlohmann::ordered_json hp = nlohmann::ordered_json::object();
    for (const auto& [k, v] : f->metadata())
      if (!arch.empty() && k.rfind(arch + ".", 0) == 0) hp[k.substr(arch.size() + 1)] = gguf::to_json(v);
    j["hyperparameters"] = hp;
    nlohmann::ordered_json tj{{"model", tok.model}, {"pre", tok.pre}, {"n_vocab", tok.n_vocab}};
    for (const auto& [role, id] : tok.specials)
      tj["special"][role] = f->get_int("tokenizer.ggml." + role + "_token_id");
    j["tokenizer"] = tj;
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : f->metadata())
      if (k != "tokenizer.ggml.tokens" && k != "tokenizer.ggml.scores" && k != "tokenizer.ggml.token_type" &&
          k != "tokenizer.ggml.merges")
        meta[k] = gguf::to_json(v);
    j["metadata"] = meta;
    nlohmann::ordered_json ts = nlohmann::ordered_json::array();
    for (const auto& t : f->tensors())
      ts.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", std::string(name(t.dtype))}, {"bytes", t.nbytes}});
    j["tensors"] = ts;
    std::cout << json_text(j) << "\n";
    return kOk;
  }

  std::ostringstream out;
  out << path << "\n  GGUF v" << f->version() << ", " << human_bytes(f->file_size()) << ", " << f->tensors().size()
      << " tensors, " << parameter_count(*f) << " parameters\n";
  out << "\narchitecture: " << (arch.empty() ? "(none)" : arch);
  if (auto n = f->opt_string("general.name")) out << "  (" << *n << ")";
  out << "\n";
  bool any = false;
  for (const auto& [k, v] : f->metadata())
    if (!arch.empty() && k.rfind(arch + ".", 0) == 0) {
      if (!any) out << "\nhyper-parameters:\n";
      any = true;
      out << "  " << k.substr(arch.size() + 1) << " = " << v.to_display() << "\n";
    }
  out << "\ntokenizer: ";
  if (tok.model.empty())
    out << "(none)\n";
  else {
    out << tok.model << (tok.pre.empty() ? "" : " / " + tok.pre) << ", " << tok.n_vocab << " tokens\n";
    for (const auto& [role, id] : tok.specials) out << "  " << role << ": " << id << "\n";
    if (f->has("tokenizer.chat_template")) out << "  chat template: yes\n";
  }
  if (!f->tensors().empty()) {
    out << "\ntensors:\n";
    size_t w = 4;
    for (const auto& t : f->tensors()) w = std::max(w, t.name.size());
    out << std::left << "  " << std::setw(int(w)) << "name"
        << "  " << std::setw(20) << "shape"
        << "  " << std::setw(5) << "dtype"
        << "  bytes\n";
    for (const auto& t : f->tensors())
      out << "  " << std::setw(int(w)) << t.name << "  " << std::setw(20) << to_string(t.shape) << "  " << std::setw(5)
          << name(t.dtype) << "  " << t.nbytes << "\n";
  }
  // Names, values and pieces come from the file: printed with their control characters escaped.
  std::cout << for_terminal(out.str(), /*multiline=*/true);
  return kOk;
}

Registrar reg({
    .name = "describe",
    .summary = "show what a GGUF file holds: architecture, hyper-parameters, tokenizer, tensors",
    .positionals = {{"MODEL", "a GGUF file, or an algorithm card (CARD.md)"}},
    .flags = {{"json", FlagType::Bool, "", "print one JSON object instead of text"},
              {"card", FlagType::Bool, "",
               "print the model's algorithm card: formal pseudocode with this file's hyper-parameters (Markdown)"}},
    .run = run,
    .details = "examples:\n  toy describe models/toy-stories.gguf --json\n  toy describe model.gguf --card > CARD.md\n"
               "  toy describe CARD.md --json      the configuration a card describes",
});

}  // namespace
}  // namespace toy::cli
