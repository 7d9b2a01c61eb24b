// serve/adapters.cpp — adapter scales and the models they give (see adapters.h).
#include "toy/serve/adapters.h"

#include <algorithm>

#include "toy/serve/api_error.h"

namespace toy::serve {

AdapterModels::AdapterModels(const Model& base, AdapterSetup setup)
    : base_(base), adapters_(std::move(setup.adapters)), load_base_(std::move(setup.load_base)) {
  if (adapters_.empty()) return;
  // Every adapter is checked now, those loaded at scale 0 too: a mismatch is a start-up error,
  // never a request's.
  std::vector<ScaledLora> all = adapters_;
  for (ScaledLora& a : all) a.scale = 1;
  apply_loras(*load_base_(), all);
  for (const ScaledLora& a : adapters_) global_.push_back(a.scale);
  global_model_ = make(global_);
}

std::vector<AdapterModels::Listed> AdapterModels::list() const {
  std::lock_guard lk(mu_);
  std::vector<Listed> out;
  for (size_t i = 0; i < adapters_.size(); ++i)
    out.push_back({.id = int(i), .path = adapters_[i].adapter->path, .scale = global_[i]});
  return out;
}

std::vector<float> AdapterModels::global_scales() const {
  std::lock_guard lk(mu_);
  return global_;
}

std::vector<float> AdapterModels::scales_of(const std::vector<LoraScale>& listed, const std::string& param) const {
  std::vector<float> scales(adapters_.size(), 0.0f);
  for (const LoraScale& l : listed) {
    if (l.id < 0 || l.id >= int64_t(adapters_.size()))
      throw bad_request(param, "no LoRA adapter has id " + std::to_string(l.id) + " (the server has " +
                                   std::to_string(adapters_.size()) + ": see GET /lora-adapters)");
    scales[size_t(l.id)] = l.scale;
  }
  return scales;
}

void AdapterModels::set_global_scales(const std::vector<LoraScale>& listed) {
  std::vector<float> scales = scales_of(listed, "lora-adapters");
  std::lock_guard lk(mu_);
  global_model_ = make(scales);
  global_ = std::move(scales);
}

std::vector<float> AdapterModels::request_scales(const std::optional<std::vector<LoraScale>>& listed) const {
  return listed ? scales_of(*listed, "lora") : global_scales();
}

std::shared_ptr<const Model> AdapterModels::model(const std::vector<float>& scales) {
  std::lock_guard lk(mu_);
  return make(scales);
}

std::shared_ptr<const Model> AdapterModels::make(const std::vector<float>& scales) {
  if (std::all_of(scales.begin(), scales.end(), [](float s) { return s == 0; }))
    return std::shared_ptr<const Model>(std::shared_ptr<const Model>(), &base_);  // not owned
  std::erase_if(made_, [](const auto& entry) { return entry.second.expired(); });
  if (auto it = made_.find(scales); it != made_.end()) return it->second.lock();
  std::vector<ScaledLora> applied;
  for (size_t i = 0; i < adapters_.size(); ++i)
    if (scales[i] != 0) applied.push_back({.adapter = adapters_[i].adapter, .scale = scales[i]});
  std::shared_ptr<Model> m = load_base_();
  apply_loras(*m, applied);
  m->to(base_.device());  // the adapters where the base runs
  made_[scales] = m;
  return m;
}

}  // namespace toy::serve
