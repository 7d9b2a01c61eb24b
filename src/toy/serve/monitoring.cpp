// serve/monitoring.cpp — GET /metrics (Prometheus text), /props and /slots (llama-server's shapes).
#include <filesystem>

#include "toy/serve/openai_format.h"
#include "toy/serve/server_impl.h"

namespace toy::serve {

bool Server::Impl::model_id(const std::string& id) const {
  if (id == config.model_name) return true;
  if (config.model_file.empty()) return false;
  const std::filesystem::path file(config.model_file);
  return id == file.filename().string() || id == file.stem().string();
}

void Server::Impl::monitoring_routes() {
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.prometheus(slots.stats()), "text/plain; version=0.0.4");
  });
  http.Get("/props", [this](const httplib::Request&, httplib::Response& res) {
    // What a request gets when it sets nothing (OpenAI's defaults, request.h).
    const CompletionRequest defaults;
    send_json(res, {{"default_generation_settings",
                     {{"n_ctx", slots.n_ctx()},
                      {"params",
                       {{"temperature", defaults.sampling.temperature},
                        {"top_p", defaults.sampling.top_p},
                        {"top_k", defaults.sampling.top_k},
                        {"min_p", defaults.sampling.min_p},
                        {"typical_p", defaults.sampling.typical_p},
                        {"top_n_sigma", defaults.sampling.top_n_sigma},
                        {"xtc_probability", defaults.sampling.xtc_probability},
                        {"xtc_threshold", defaults.sampling.xtc_threshold},
                        {"repeat_penalty", defaults.sampling.repeat_penalty},
                        {"repeat_last_n", defaults.sampling.repeat_last_n},
                        {"presence_penalty", defaults.sampling.presence_penalty},
                        {"frequency_penalty", defaults.sampling.frequency_penalty},
                        {"dry_multiplier", defaults.sampling.dry_multiplier},
                        {"dry_base", defaults.sampling.dry_base},
                        {"dry_allowed_length", defaults.sampling.dry_allowed_length},
                        {"dry_penalty_last_n", defaults.sampling.dry_penalty_last_n},
                        {"mirostat", defaults.sampling.mirostat},
                        {"mirostat_tau", defaults.sampling.mirostat_tau},
                        {"mirostat_eta", defaults.sampling.mirostat_eta},
                        {"samplers", sampler_chain_names(defaults.sampling.chain)},
                        {"cache_prompt", defaults.cache_prompt}}}}},
                    {"total_slots", config.parallel},
                    {"model_alias", config.model_name},
                    {"model_path", config.model_file},
                    {"chat_template", prompter.source().template_source},
                    {"chat_template_origin", prompter.source().origin},
                    {"build_info", "toy " TOY_VERSION}});
  });
  http.Get("/slots", [this](const httplib::Request&, httplib::Response& res) {
    json out = json::array();
    const std::vector<SlotPool::SlotState> states = slots.slot_states();
    for (size_t i = 0; i < states.size(); ++i)
      out.push_back({{"id", i},
                     {"n_ctx", slots.n_ctx()},
                     {"is_processing", states[i].busy},
                     {"n_cached_tokens", states[i].busy ? json(nullptr) : json(states[i].n_cached)}});
    send_json(res, out);
  });
}

}  // namespace toy::serve
