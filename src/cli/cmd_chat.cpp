// cli/cmd_chat.cpp — `toy chat [MODEL]`: an interactive conversation (llama-cli's conversation
// mode, `ollama run`, `mlx_lm.chat`). Ctrl-C stops the answer being written, not the program.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/chat_session.h"

namespace toy::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void on_sigint(int) { g_interrupted = true; }

// One line from standard input without its '\n'; nullopt at the end of input. Ctrl-C while
// waiting throws the partial line away and gives "". The wait is a poll that wakes every 100 ms
// to look at the flag: a Ctrl-C that lands just before the wait begins would not interrupt a
// blocking read().
std::optional<std::string> read_line() {
  std::string line;
  for (;;) {
    if (g_interrupted.exchange(false)) return std::string();
    pollfd in{.fd = 0, .events = POLLIN, .revents = 0};
    if (::poll(&in, 1, 100) <= 0) continue;  // time out or EINTR: look at the flag again
    char c;
    const ssize_t n = ::read(0, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return line.empty() ? std::nullopt : std::optional<std::string>(line);
    if (c == '\n') return line;
    line += c;
  }
}

const char* kHelp =
    "  /clear   forget the conversation (the system message stays)\n"
    "  /exit    leave (also /quit, /bye, Ctrl-D)\n"
    "  end a line with \\ to continue on the next; \"\"\" starts and ends a block of lines\n"
    "  Ctrl-C stops the answer being written\n";

int run(const Args& a) {
  apply_threads(a);
  Loaded l = load_model_and_tokenizer(a);
  apply_lora_flags(a, *l.model);
  place_model(a, *l.model);
  const SamplerConfig sc = sampler_config(a, l.tokenizer.get());
  const int64_t n_ctx = context_size(a, l.model->config());
  const Budget limit = budget(a);
  const std::unique_ptr<Drafting> draft = drafting(a, l, n_ctx);
  ChatSession chat(l, sc, n_ctx, kv_type(a), a.str("system"), draft ? &draft->spec : nullptr);

  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a Ctrl-C interrupts the read of the next message
  sigaction(SIGINT, &sa, nullptr);

  const bool tty = ::isatty(0);
  if (tty)
    std::cout << "toy chat with " << for_terminal(l.file->path()) << " (" << n_ctx
              << " tokens of context); /help for commands\n";
  for (;;) {
    std::cout << "> " << std::flush;
    std::optional<std::string> line = read_line();
    if (!line) break;
    std::string message = *line;
    if (message == "\"\"\"") {  // a block: everything up to the next """ line
      message.clear();
      for (std::optional<std::string> more; (more = read_line()) && *more != "\"\"\"";)
        message += (message.empty() ? "" : "\n") + *more;
    }
    while (!message.empty() && message.back() == '\\') {  // a line continued on the next
      message.back() = '\n';
      std::cout << ". " << std::flush;
      std::optional<std::string> more = read_line();
      if (!more) break;
      message += *more;
    }
    if (message.empty()) continue;
    if (message == "/exit" || message == "/quit" || message == "/bye") break;
    if (message == "/clear") {
      chat.clear();
      std::cout << "(conversation cleared)\n";
      continue;
    }
    if (message == "/help" || message == "/?") {
      std::cout << kHelp;
      continue;
    }
    if (message[0] == '/') {
      std::cout << "unknown command " << for_terminal(message) << "; /help lists them\n";
      continue;
    }
    g_interrupted = false;
    try {
      const Streamed s =
          chat.answer(message, limit.soft ? Budget{0, false} : limit, a.flag("ignore-eos"), stdout, &g_interrupted);
      std::cout << (s.ending == Ending::Interrupted ? " [stopped]\n" : "\n");
      if (s.ending == Ending::ContextFull) std::cout << "(the context is full; /clear starts again)\n";
    } catch (const InputError& e) {
      std::cout << "error: " << e.what() << "\n";
    }
    g_interrupted = false;
  }
  if (tty) std::cout << "\n";
  return kOk;
}

std::vector<Flag> flags() {
  std::vector<Flag> f = {model_flag(), {"system", FlagType::String, "", "the system message"}};
  for (Flag& g : generation_flags())
    if (g.name == "n-predict")
      f.push_back({"n-predict", FlagType::Int, "0", "most tokens per answer (0: up to the end of the context)", 'n'});
    else
      f.push_back(std::move(g));
  f.push_back(lora_flag());
  f.push_back(lora_scaled_flag());
  return f;
}

Registrar reg({
    .name = "chat",
    .summary = "talk with a model: each message answered through the model's own chat template",
    .positionals = {{"MODEL", "a GGUF file or a model name (see toy list; default: the embedded story model)", false}},
    .flags = flags(),
    .run = run,
    .details = "Type a message and press Enter; the answer streams as it is written. The conversation is kept\n"
               "while it fits the context (the oldest turns go first). Commands:\n" +
               std::string(kHelp) +
               "A model without a chat template gets ChatML, with a warning.\n"
               "examples:\n  toy chat qwen2.5:0.5b --system \"Answer briefly.\"\n"
               "  toy chat hf:bartowski/SmolLM2-135M-Instruct-GGUF:Q8_0 --temp 0.7",
});

}  // namespace
}  // namespace toy::cli
