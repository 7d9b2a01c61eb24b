// serve/handle_completion.cpp — POST /v1/completions and /v1/chat/completions.
//
// Order matters for the status codes: the request's JSON, fields and model name are checked first
// and answered with 4xx; only a valid request waits for a slot (503 when the queue is full). With
// the slot, its prompt is rendered (chat template) and tokenized, so --parallel bounds how many
// templates run at once, and a prompt too long is 400. The prompt is then fed on the HTTP thread and
// the tokens generated in the decode loop, batched with the other slots' (decode_loop.h); a
// streamed answer is written by httplib's chunked content provider as the text comes. A client
// that goes away (a failed write, or a closed socket noticed while waiting) ends generation and
// frees the slot within one step.
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>

#include "toy/serve/completion.h"
#include "toy/serve/decode_loop.h"
#include "toy/serve/openai_format.h"
#include "toy/serve/server_impl.h"

namespace toy::serve {
namespace {

// What a validated request turns into before it needs a slot.
struct Job {
  CompletionRequest req;
  std::vector<int32_t> prompt;
  GenerationSettings settings;
  std::string echo_text;               // completions with echo: the prompt as text
  bool tools = false;                  // chat with tools that may be called: calls are parsed out of the answers
  bool forced = false;                 // tool_choice required or named: the answers are calls, under a grammar
  std::shared_ptr<const Model> model;  // the served model with the request's LoRA scales
};

// "12 + 40 tokens, 0.31 s" for the log.
std::string summary(const CompletionResult& r) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "prompt %lld (%lld cached) + completion %lld tokens (%s), %.2f s%s",
                (long long)r.prompt_tokens, (long long)r.cached_tokens, (long long)r.completion_tokens,
                r.finish_reason.c_str(), r.prompt_seconds + r.generate_seconds,
                r.cancelled ? ", client went away" : "");
  return buf;
}

// " choice 2" in the log when a request asks for several choices.
std::string choice_name(const Job& job, int index) { return job.req.n > 1 ? " choice " + std::to_string(index) : ""; }

// The prompt as token ids. Text is tokenized like llama.cpp's server: BOS as the tokenizer says,
// special tokens written in the text (<|im_start|>) recognised.
std::vector<int32_t> prompt_tokens(const Server::Impl& s, Job& job) {
  const CompletionRequest& r = job.req;
  const Tokenizer& t = *s.tokenizer;
  if (r.endpoint == Endpoint::Chat) {
    std::string text;
    try {
      text = s.prompter.render(r.messages, r.tool_choice.mode == ToolChoice::None ? nlohmann::ordered_json() : r.tools);
      if (job.forced) text += forced_call_prefix(s.tool_format);
    } catch (const std::exception& e) {  // TemplateError, or anything else the messages provoke: never a 5xx
      throw ApiError(400,
                     "The chat template (" + s.prompter.source().origin + ") cannot render these messages: " + e.what(),
                     "messages", "chat_template_error");
    }
    return t.encode(text, /*add_special=*/true, /*parse_special=*/true);
  }
  if (r.prompt_is_ids) {
    for (int32_t id : r.prompt_ids)
      if (id >= t.n_vocab())
        throw bad_request("prompt", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                        std::to_string(t.n_vocab()) + ")");
    if (r.echo) job.echo_text = t.decode(r.prompt_ids);
    return r.prompt_ids;
  }
  if (r.echo) job.echo_text = r.prompt_text;
  return t.encode(r.prompt_text, /*add_special=*/true, /*parse_special=*/true);
}

// What can be checked about a request before it waits for a slot (its JSON, fields, model name);
// throws ApiError (4xx).
Job prepare(Server::Impl& s, const std::string& body, Endpoint endpoint) {
  if (s.stopping) throw ApiError(503, "The server is shutting down", "", "shutting_down");
  Job job;
  job.req = parse_request(parse_json_body(body), endpoint, s.adapters.size());
  const CompletionRequest& r = job.req;
  // `model` selects nothing: one model is loaded, and it answers whatever name the client uses
  // (as llama-server does); answers carry the served model's id.
  job.tools = !r.tools.is_null() && r.tool_choice.mode != ToolChoice::None;
  job.forced = job.tools && (r.tool_choice.mode == ToolChoice::Required || r.tool_choice.mode == ToolChoice::Named);
  if (job.forced) {
    if (r.grammar)
      throw bad_request("tool_choice", "a forced tool call cannot be combined with 'grammar' or 'response_format'");
    try {
      job.req.grammar = Grammar::parse(tool_call_grammar(s.tool_format, r.tools, r.tool_choice, r.parallel_tool_calls));
    } catch (const GrammarError& e) {
      throw ApiError(400, std::string("invalid 'tools': ") + e.what(), "tools", "invalid_json_schema");
    }
  }
  for (const auto& [id, bias] : r.sampling.logit_bias)
    if (id >= s.tokenizer->n_vocab())
      throw bad_request("logit_bias", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                          std::to_string(s.tokenizer->n_vocab()) + ")");
  job.model = s.adapters.model(s.adapters.request_scales(r.lora));
  return job;
}

// The prompt (through the chat template) and the generation settings; throws ApiError (4xx). Runs
// once the request holds a slot: a template from a model file may be slow or hungry (within its
// budgets, chat_prompt.h), and only --parallel requests may render at once.
void prepare_prompt(const Server::Impl& s, Job& job) {
  const CompletionRequest& r = job.req;
  const Endpoint endpoint = r.endpoint;
  job.prompt = prompt_tokens(s, job);
  const char* prompt_param = endpoint == Endpoint::Chat ? "messages" : "prompt";
  if (job.prompt.empty()) throw bad_request(prompt_param, "the prompt is empty", "empty_prompt");

  // Length: prompt + completion must fit one slot's context. max_tokens beyond what is left is
  // capped (finish_reason "length" then), but a prompt with no room for one token is refused.
  const int64_t n_ctx = s.slots.n_ctx(), P = int64_t(job.prompt.size());
  const int64_t wanted =
      r.max_tokens.value_or(endpoint == Endpoint::Chat ? n_ctx : 16);  // OpenAI's completions default: 16
  if (P + (wanted > 0 ? 1 : 0) > n_ctx)
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(n_ctx) + " tokens, but the prompt has " +
                       std::to_string(P) + " tokens" + (wanted > 0 ? " and needs room for at least one more" : ""),
                   prompt_param, "context_length_exceeded");
  GenerationSettings& g = job.settings;
  g.max_tokens = std::min(wanted, n_ctx - P);
  g.sampler = r.sampling;  // the seed per choice: choice_settings()
  for (const auto& [text, bias] : r.logit_bias_text)
    for (int32_t id : s.tokenizer->encode(text)) g.sampler.logit_bias.emplace_back(id, bias);
  if (g.sampler.dry_multiplier > 0)
    g.sampler.dry_sequence_breakers =
        dry_breakers(*s.tokenizer, r.dry_sequence_breakers.value_or(default_dry_breakers()));
  g.stop = r.stop;
  g.logprobs = r.logprobs;
  g.prompt_logprobs = r.echo && r.logprobs >= 0;
  g.ignore_eos = r.ignore_eos;
  g.cache_prompt = r.cache_prompt;
  if (r.grammar) g.grammar = std::make_shared<const GrammarMatcher>(r.grammar, s.trie);
  g.speculation = s.config.speculation;  // the drafter is the slot's: generate()
  if (r.draft_max) g.speculation.n_max = *r.draft_max;
  if (r.draft_min) g.speculation.n_min = *r.draft_min;
  if (r.draft_p_min) g.speculation.p_min = *r.draft_p_min;
  if (g.speculation.n_min > g.speculation.n_max)
    throw ApiError(400,
                   "'speculative.n_min' (" + std::to_string(g.speculation.n_min) + ") exceeds 'speculative.n_max' (" +
                       std::to_string(g.speculation.n_max) + ")",
                   "speculative.n_min", "invalid_value");
}

// The settings of choice `index` (n > 1): its own seed, seed + index when the request gave one,
// so that every choice is reproducible and the choices differ.
GenerationSettings choice_settings(const Job& job, int index) {
  GenerationSettings g = job.settings;
  g.sampler.seed = job.req.seed ? *job.req.seed + uint64_t(index) : std::random_device{}();
  return g;
}

// What the ids of choice `choice`'s tool calls are drawn from: the request's seed when given.
uint64_t tool_call_seed(const Job& job, int choice) {
  return job.req.seed ? *job.req.seed + uint64_t(choice) : std::random_device{}();
}

// Chat with tools: the calls in the answer's text become its tool_calls (finish_reason
// "tool_calls"); the text left is the content.
void take_tool_calls(const Server::Impl& s, const Job& job, uint64_t seed, CompletionResult& r) {
  if (!job.tools || r.cancelled) return;
  ToolAnswer a = parse_tool_calls(r.text, s.tool_format, job.req.tools, seed);
  if (a.calls.empty()) return;
  r.text = std::move(a.content);
  r.tool_calls = std::move(a.calls);
  if (!a.cut) r.finish_reason = "tool_calls";  // cut: "length" (or "stop"), with the finished calls
}

// A request's generation (one choice) on the slot of `lease`: its prompt here, on its HTTP thread,
// then its tokens in the decode loop (batched with the other slots'). on_prompt gets the prompt's
// logprobs and on_delta the text as it is released (streamed requests); alive() is asked whenever
// nothing came for 100 ms. Any of them returning false means the client is gone: generation stops
// within one step. The slot comes back into `lease` for the next choice (a request keeps its slot
// for all its choices); when generation failed, it is given back and this throws.
CompletionResult generate(Server::Impl& s, std::optional<SlotPool::Lease>& lease, const Job& job, int choice,
                          bool stream, const std::function<bool(const std::vector<TokenLogprob>&)>& on_prompt,
                          const std::function<bool(const Delta&)>& on_delta, const std::function<bool()>& alive) {
  lease->use_model(job.model);
  GenerationSettings settings = choice_settings(job, choice);
  if (!s.drafters.empty()) settings.speculation.drafter = s.drafters[size_t(lease->slot())].get();
  Completion c(lease->engine(), *s.tokenizer, job.prompt, std::move(settings));
  const std::vector<TokenLogprob>& prompt_scores = c.prefill();
  if (on_prompt && !on_prompt(prompt_scores)) {
    c.cancel();
    return c.result();
  }
  std::shared_ptr<Run> run = s.decoder.start(std::move(*lease), std::move(c), stream);
  lease.reset();
  bool here = true;
  for (bool ended = false; !ended;) {
    std::vector<Delta> deltas;
    ended = run->wait(std::chrono::milliseconds(100), deltas);
    if (!here) continue;  // cancelled: wait for the Run to end
    for (const Delta& d : deltas) here = here && on_delta(d);
    if (deltas.empty() && !ended) here = alive();
    if (!here) run->cancel();
  }
  if (!run->error().empty()) throw std::runtime_error(run->error());
  lease.emplace(run->take_lease());
  CompletionResult r = run->result();
  if (!r.grammar_error.empty())  // the client's grammar, not the server, is at fault: 400, not retried
    throw ApiError(400, "The answer cannot follow the grammar within the server's bounds: " + r.grammar_error, "",
                   "grammar_too_complex");
  r.cancelled = r.cancelled || !here;
  return r;
}

// Streams the answer as server-sent events. httplib calls the provider after this returns; it
// runs once and writes every chunk itself. State is shared because httplib copies the provider;
// the slot is freed by whichever ends first: the generation, or the releaser when the connection
// fails before the provider runs.
void stream_answer(Server::Impl& s, httplib::Response& res, SlotPool::Lease lease, Job job, ResponseHeader header,
                   const std::string& route) {
  struct Stream {
    std::optional<SlotPool::Lease> lease;
    Job job;
    ChunkWriter writer;
  };
  const bool logprobs = job.req.logprobs >= 0;
  auto st = std::make_shared<Stream>(
      Stream{std::move(lease), std::move(job), ChunkWriter(std::move(header), *s.tokenizer, logprobs)});
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // proxies: do not buffer the event stream
  res.set_chunked_content_provider(
      "text/event-stream",
      [&s, st, route](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& text) { return sink.write(text.data(), text.size()); };
        std::vector<CompletionResult> results;
        bool ok = true;
        try {
          // The choices one after the other, on the slot taken before the answer began.
          const int slot = st->lease->slot();
          for (int i = 0; ok && i < st->job.req.n; ++i) {
            st->writer.set_choice(i);
            const uint64_t seed = tool_call_seed(st->job, i);
            ToolCallStream calls(s.tool_format, st->job.req.tools, seed);  // with tools: calls go out as written
            // The first chunk carries the role (chat) or the echoed prompt with its logprobs
            // (completions), so it goes out once the prompt is evaluated.
            CompletionResult r = generate(
                s, st->lease, st->job, i, /*stream=*/true,
                [&](const std::vector<TokenLogprob>& prompt_scores) {
                  return ok = write(sse(st->writer.first(st->job.echo_text, prompt_scores)));
                },
                [&](const Delta& d) {
                  if (!st->job.tools) return ok = write(sse(st->writer.delta(d)));
                  ToolCallStream::Update u = calls.push(d.text);
                  Delta content = d;
                  content.text = std::move(u.content);
                  if (!content.text.empty() || !content.tokens.empty())
                    ok = ok && write(sse(st->writer.delta(content)));
                  for (const ToolCallDelta& c : u.calls) ok = ok && write(sse(st->writer.tool_call(c)));
                  return ok;
                },
                [&] { return ok = sink.is_writable(); });
            if (st->job.tools && ok && !r.cancelled) {  // the held text: calls, or content after all
              take_tool_calls(s, st->job, seed, r);
              if (r.tool_calls.empty() && calls.calls_started() == 0 && !calls.held().empty())
                ok = write(sse(st->writer.delta({calls.held(), {}})));
              for (const ToolCallDelta& c : calls.finish(r.tool_calls)) ok = ok && write(sse(st->writer.tool_call(c)));
            }
            ok = ok && !r.cancelled && write(sse(st->writer.last(r)));
            r.cancelled = r.cancelled || !ok;
            s.log(route + " (stream) slot " + std::to_string(slot) + choice_name(st->job, i) + ": " + summary(r));
            s.metrics.count_completion(r);
            results.push_back(std::move(r));
          }
          st->lease.reset();
          if (ok && st->job.req.include_usage) ok = write(sse(st->writer.usage(total_usage(results))));
          ok = ok && write("data: [DONE]\n\n");
        } catch (const ApiError& e) {  // the grammar's bounds: its error event, and no [DONE]
          s.log(route + ": " + e.what());
          ok = ok && write(sse(e.body()));
        } catch (const std::exception& e) {  // after the headers: an error event, and no [DONE]
          s.log(route + ": generation failed: " + e.what());
          ok = ok &&
               write(sse(ApiError(500, std::string("Generation failed: ") + e.what(), "", "internal_error").body()));
        }
        if (!ok) return false;  // the client is gone: abort the connection
        sink.done();
        return true;
      },
      [st](bool) { st->lease.reset(); });
}

}  // namespace

void Server::Impl::handle_completion(const httplib::Request& http_req, const std::string& body, httplib::Response& res,
                                     Endpoint endpoint) {
  Job job;
  try {
    job = prepare(*this, body, endpoint);
  } catch (const ApiError& e) {
    return send_error(res, e);
  }
  warn_ignored_fields(http_req.path, job.req.ignored_fields);

  auto lease = slots.acquire();
  if (!lease) return send_error(res, no_slot());
  try {
    prepare_prompt(*this, job);
  } catch (const ApiError& e) {
    return send_error(res, e);  // the lease goes back as it leaves scope
  }
  ResponseHeader header = make_header(endpoint, config.model_name, job.req.include_usage);
  if (job.req.stream)
    return stream_answer(*this, res, std::move(*lease), std::move(job), std::move(header), http_req.path);
  const int fd = client_socket();
  std::vector<CompletionResult> results;
  const int slot = lease->slot();
  for (int i = 0; i < job.req.n; ++i) {  // the choices one after the other, on the one slot
    CompletionResult r;
    try {
      r = generate(*this, lease, job, i, /*stream=*/false, nullptr, nullptr, [fd] { return client_alive(fd); });
    } catch (const ApiError& e) {  // the grammar's bounds
      return send_error(res, e);
    }
    take_tool_calls(*this, job, tool_call_seed(job, i), r);
    log(http_req.path + " slot " + std::to_string(slot) + choice_name(job, i) + ": " + summary(r));
    metrics.count_completion(r);
    if (r.cancelled) return;  // the client closed its side: httplib writes nothing to such a socket
    results.push_back(std::move(r));
  }
  lease.reset();
  send_json(res,
            response_json(header, results, *tokenizer, job.req.logprobs >= 0, job.req.echo ? &job.echo_text : nullptr));
}

}  // namespace toy::serve
