// cli/cmd_export.cpp — `toy export MODEL --lora A.gguf -o merged.gguf`: a model with its LoRA
// adapters merged into the weights (W + scale·(alpha/r)·B·A), a plain GGUF any llama.cpp loads.
//
// Every key of MODEL is kept (architecture, tokenizer, chat template, …) but general.file_type;
// each tensor keeps its dtype, or takes the one --dtype gives by llama-quantize's rules. Adapted
// weights are merged in F32 and then rounded to that dtype.
#include <cstdio>
#include <filesystem>

#include "cli/common.h"
#include "toy/io/file_type.h"
#include "toy/tensor/quant.h"

namespace toy::cli {
namespace {

int run(const Args& a) {
  apply_threads(a);
  const std::string out = a.str("output");
  if (out.empty()) throw UsageError("give -o FILE");
  if (a.all("lora").empty() && a.all("lora-scaled").empty()) throw UsageError("give --lora FILE (what to merge)");
  std::optional<gguf::FileType> ft;
  if (a.has("dtype")) {
    ft = gguf::file_type(a.str("dtype"));
    if (!ft)
      throw UsageError("--dtype " + a.str("dtype") + " cannot be written (try " + std::string(gguf::file_type_names()) +
                       ")");
  }
  Loaded l = load_model_and_tokenizer(a);
  if (std::filesystem::exists(out) && std::filesystem::equivalent(out, l.file->path()))
    throw UsageError("-o " + out + " is the input model");
  apply_lora_flags(a, *l.model);

  gguf::GgufWriter w;
  for (const auto& [key, value] : l.file->metadata())
    if (key != "general.file_type" && key != "general.alignment") w.set(key, value);
  if (ft) w.set("general.file_type", gguf::Value::of_u32(ft->general_file_type));
  const ModelConfig& cfg = l.model->config();
  const int n_expert = int(l.file->opt_int(l.file->architecture() + ".expert_count").value_or(0));
  std::vector<Tensor> kept;  // merged and converted tensors stay alive until the write
  l.model->for_each_param([&](Tensor& t) {
    const DType target =
        ft ? gguf::tensor_dtype(*ft, t.name(), t.shape(), int(cfg.n_layer), cfg.tied_output, n_expert) : t.dtype();
    if (!t.impl()->low_rank && target == t.dtype()) {  // as it is in MODEL
      w.add_tensor(t.name(), t);
      return;
    }
    if (!can_quantize(target))
      throw UsageError(t.name() + ": toy cannot write " + std::string(toy::name(target)) + "; give --dtype");
    const Tensor merged = merged_weight(t);  // F32
    Tensor q = Tensor::empty(t.shape(), target);
    quantize(target, merged.data(), q.raw_mut(), t.numel());
    kept.push_back(q);
    w.add_tensor(t.name(), q);
  });
  w.write(out);
  std::fprintf(stderr, "export: wrote %s\n", out.c_str());
  return kOk;
}

Registrar reg({
    .name = "export",
    .summary = "write a model with LoRA adapters merged into its weights (optionally in another dtype)",
    .positionals = {{"MODEL", "the base GGUF model", true}},
    .flags = {lora_flag(),
              lora_scaled_flag(),
              {"dtype", FlagType::String, "",
               "write the matrices in this dtype (F32, F16, BF16, Q8_0, Q4_0, …, Q4_K_M) instead of MODEL's"},
              {"output", FlagType::Path, "", "the merged model to write", 'o'},
              threads_flag()},
    .run = run,
    .details = "example: toy export base.gguf --lora runs/<id>/adapters/final.gguf --dtype Q8_0 -o merged.gguf",
});

}  // namespace
}  // namespace toy::cli
