// cli/cli.h — declarative commands: one table per command drives parsing, --help and --manifest.
//
// Each command lives in its own file (cmd_<name>.cpp) and registers a Command at static
// initialisation. Flags are typed; every flag has a default shown in --help; the manifest is
// printed from the same tables, so documentation and parser cannot drift.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace toy::cli {

// Exit codes (docs/cli.md).
enum Exit : int { kOk = 0, kFailure = 1, kUsage = 2, kBadInput = 3, kNetwork = 4, kDevice = 5, kInterrupted = 130 };

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};  // exit 2
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};  // exit 3
struct NetworkError : std::runtime_error {
  using std::runtime_error::runtime_error;
};  // exit 4

enum class FlagType { Bool, Int, Float, String, Path };

struct Flag {
  std::string name;  // without dashes: "prompt" -> --prompt
  FlagType type;
  std::string def;  // default as text ("" = none); Bool flags default to "false"
  std::string help;
  char short_name = 0;  // optional: 'n' -> -n
  // Other spellings, dashes included, for the habits of other tools: "--ctx-size", "-ngl".
  std::vector<std::string> aliases = {};
  int arity = 1;            // values after the flag: --lora-scaled FILE SCALE has 2
  bool repeatable = false;  // may be given several times (Args::all)
};

struct Positional {
  std::string name;  // "MODEL"
  std::string help;
  bool required = true;
};

class Args {
 public:
  bool has(const std::string& flag) const { return given_.count(flag) > 0; }  // given on the command line
  std::string str(const std::string& flag) const;
  long long integer(const std::string& flag) const;
  double number(const std::string& flag) const;
  bool flag(const std::string& flag) const;
  // Every value of a repeatable flag in command-line order (arity values per use, flattened).
  std::vector<std::string> all(const std::string& flag) const;
  const std::vector<std::string>& positionals() const { return pos_; }
  std::optional<std::string> positional(size_t i) const {
    return i < pos_.size() ? std::optional<std::string>(pos_[i]) : std::nullopt;
  }

 private:
  friend Args parse_args(const struct Command&, const std::vector<std::string>&);
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> given_;
  std::map<std::string, std::vector<std::string>> all_;
  std::vector<std::string> pos_;
};

struct Command {
  std::string name;
  std::string summary;
  std::vector<Positional> positionals;
  std::vector<Flag> flags;
  std::function<int(const Args&)> run;
  std::string details;  // extra text for --help (examples)
};

void register_command(Command c);
const std::vector<Command>& commands();
struct Registrar {
  explicit Registrar(Command c) { register_command(std::move(c)); }
};

Args parse_args(const Command& c, const std::vector<std::string>& argv);  // throws UsageError
std::string help_text(const Command& c);
const Command* find_command(const std::string& name);

// The candidate closest to `word` by edit distance, when it is close enough to be a likely typo
// (at most a third of the word's letters, and at least one, differ); "" otherwise.
std::string closest(const std::string& word, const std::vector<std::string>& candidates);

// Checks the environment variables toy reads (TOY_THREADS, TOY_SIMD, TOY_FLOAT_TILE, TOY_DEVICE,
// TOY_DEFAULT_MODEL, HF_ENDPOINT): a value that would be ignored or misread is a UsageError naming the variable.
void check_environment();
std::string manifest_json();

// Model argument resolution shared by commands: an explicit path, else the embedded default.
std::string default_model_path();

}  // namespace toy::cli
