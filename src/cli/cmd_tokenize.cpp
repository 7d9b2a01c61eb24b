// cli/cmd_tokenize.cpp — `toy tokenize MODEL --text T | --file F`: the ids of a text.
//
// Output (a stable interface, used by checks outside the project): the ids on one line,
// separated by single spaces; with --pieces one line per token, "ID -> 'PIECE'".
// No BOS/EOS unless --add-special; special tokens in the text only with --parse-special.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

#include "cli/cli.h"
#include "cli/common.h"
#include "toy/io/gguf.h"
#include "toy/tokenizer/tokenizer.h"
#include "toy/tokenizer/unicode.h"

namespace toy::cli {
namespace {

std::string read_input(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read " + path + ": " + std::strerror(errno));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A piece as a quoted, printable string: UTF-8 characters as they are, everything else escaped.
std::string quoted(std::string_view s) {
  std::string r = "'";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int n = unicode::utf8_check(s.substr(i));
    if (c == '\n')
      r += "\\n";
    else if (c == '\t')
      r += "\\t";
    else if (c == '\r')
      r += "\\r";
    else if (c == '\\' || c == '\'')
      r += std::string("\\") + char(c);
    else if (n > 1 || (n == 1 && c >= 0x20 && c != 0x7F)) {
      r.append(s.substr(i, size_t(n)));
      i += size_t(n);
      continue;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      r += buf;
    }
    ++i;
  }
  return r + "'";
}

int run(const Args& a) {
  const bool has_text = a.has("text"), has_file = a.has("file");
  if (has_text == has_file) throw UsageError("give exactly one of --text and --file (see toy tokenize --help)");
  const std::string text = has_text ? a.str("text") : read_input(a.str("file"));

  auto f = gguf::GgufFile::open(resolve_model(*a.positional(0)));
  std::shared_ptr<const Tokenizer> tok;
  std::vector<int32_t> ids;
  try {
    tok = Tokenizer::from_gguf(*f);
    ids = tok->encode(text, a.flag("add-special"), a.flag("parse-special"));
  } catch (const TokenizerError& e) {
    throw InputError(e.what());
  }

  std::string out;
  for (int32_t id : ids) {
    if (a.flag("pieces"))
      out += std::to_string(id) + " -> " + cli::quoted(tok->piece(id, /*special=*/true)) + "\n";
    else
      out += (out.empty() ? "" : " ") + std::to_string(id);
  }
  if (!a.flag("pieces")) out += "\n";
  std::cout << out << std::flush;
  return kOk;
}

Registrar reg({
    .name = "tokenize",
    .summary = "print the token ids the model's tokenizer gives for a text",
    .positionals = {{"MODEL", "a GGUF file with tokenizer.ggml.* metadata"}},
    .flags = {{"text", FlagType::String, "", "the text to tokenize"},
              {"file", FlagType::Path, "", "tokenize the exact bytes of this file ('-': standard input)"},
              {"pieces", FlagType::Bool, "", "print one token per line with its piece: ID -> 'PIECE'"},
              {"add-special", FlagType::Bool, "", "add BOS/EOS (CLS/SEP) as the vocabulary asks"},
              {"parse-special", FlagType::Bool, "", "recognise special tokens written in the text, e.g. <|im_start|>"}},
    .run = run,
    .details = "examples:\n  toy tokenize model.gguf --text \"Hello world\"\n"
               "  toy tokenize model.gguf --file prompt.txt --pieces",
});

}  // namespace
}  // namespace toy::cli
