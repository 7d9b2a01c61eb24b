#pragma once
// kernels/vulkan/variants.h — a shader compiled once per weight dtype (-DWT_Q4_K, …) and its
// pipelines on one context, each made at its first use (lavapipe compiles a pipeline in tens of
// milliseconds: a model pays only for the dtypes it holds). Only in a TOY_VULKAN build.
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "toy/kernels/vulkan/context.h"
#include "toy/tensor/dtype.h"

namespace toy::kernels::vulkan {

struct Variant {
  DType dtype;
  std::span<const uint32_t> spirv;
};

class Variants {
 public:
  Variants(Context& ctx, std::vector<Variant> variants, uint32_t n_buffers, uint32_t push_bytes)
      : ctx_(ctx), variants_(std::move(variants)), n_buffers_(n_buffers), push_bytes_(push_bytes) {}

  bool has(DType dt) const { return find(variants_, dt) != nullptr; }
  // The pipeline for dt; Error "vulkan: <op>: no shader for <dt> weights yet" where none was built.
  const Pipeline& operator()(DType dt, const char* op) {
    for (auto& [d, p] : made_)
      if (d == dt) return p;
    const Variant* v = find(variants_, dt);
    if (!v) throw Error("vulkan: " + std::string(op) + ": no shader for " + std::string(name(dt)) + " weights yet");
    return made_.emplace_back(dt, ctx_.pipeline(v->spirv, n_buffers_, push_bytes_)).second;
  }

  static const Variant* find(const std::vector<Variant>& vs, DType dt) {
    for (const Variant& v : vs)
      if (v.dtype == dt) return &v;
    return nullptr;
  }

 private:
  Context& ctx_;
  std::vector<Variant> variants_;
  uint32_t n_buffers_, push_bytes_;
  std::deque<std::pair<DType, Pipeline>> made_;  // a deque: a new one moves none of the others
};

}  // namespace toy::kernels::vulkan
