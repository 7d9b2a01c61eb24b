// serve/adapters.h — the LoRA adapters a server applies (--lora, --lora-scaled), their global
// scales (GET/POST /lora-adapters) and the model each set of scales gives.
//
// As in llama-server, adapter i has id i; each has a global scale (1 for --lora, S for
// --lora-scaled FILE S) that POST /lora-adapters changes, and a request uses the global scales
// unless it names its own (`lora`: [{"id", "scale"}], the adapters it leaves out at 0). Adapters
// are applied at run time, never merged: the model of a set of scales is the base loaded again
// (its weights stay the mapped ones, nothing is copied) with the adapters of non-zero scale
// attached, or the base itself when every scale is 0. Such a model is made when first asked for
// and lives while the global scales or a slot use it; a slot that changes models forgets its
// cached prompt (SlotPool::Lease::use_model).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "toy/archs/lora.h"
#include "toy/archs/model.h"
#include "toy/serve/request.h"

namespace toy::serve {

struct AdapterSetup {
  std::vector<ScaledLora> adapters;  // id = index; scale: the global one at start
  // The base model once more (needed when adapters is not empty), on its device: its weights shared
  // with the base (Model::share_params), the adapters moved there after they are attached.
  std::function<std::unique_ptr<Model>()> load_base;
};

class AdapterModels {
 public:
  // `base` is the model without adapters and must outlive this. Checks every adapter against the
  // base (lora.h apply_loras) and throws gguf::GgufError naming the one that does not fit.
  AdapterModels(const Model& base, AdapterSetup setup);

  struct Listed {
    int id = 0;
    std::string path;
    float scale = 0;  // the global scale
  };
  std::vector<Listed> list() const;
  size_t size() const { return adapters_.size(); }
  std::vector<float> global_scales() const;
  // POST /lora-adapters: the listed adapters get their scale, the others 0. ApiError 400 for an
  // unknown id.
  void set_global_scales(const std::vector<LoraScale>& listed);
  // A request's scales: the global ones when it names none, else the listed ones and 0 for the
  // others. ApiError 400 for an unknown id.
  std::vector<float> request_scales(const std::optional<std::vector<LoraScale>>& listed) const;
  // The model that applies `scales` (one per adapter).
  std::shared_ptr<const Model> model(const std::vector<float>& scales);

 private:
  std::vector<float> scales_of(const std::vector<LoraScale>& listed, const std::string& param) const;
  std::shared_ptr<const Model> make(const std::vector<float>& scales);  // with mu_ held

  const Model& base_;
  std::vector<ScaledLora> adapters_;
  std::function<std::unique_ptr<Model>()> load_base_;
  mutable std::mutex mu_;
  std::vector<float> global_;                                      // one scale per adapter
  std::shared_ptr<const Model> global_model_;                      // keeps the global scales' model alive
  std::map<std::vector<float>, std::weak_ptr<const Model>> made_;  // scales -> the model, while someone holds it
};

}  // namespace toy::serve
