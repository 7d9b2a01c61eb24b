// cli/cmd_quantize.cpp — `toy quantize IN.gguf OUT.gguf --dtype Q4_K_M`: llama-quantize's job, with
// its file types and per-tensor rules (io/file_type.h), e.g. for every F32 checkpoint toy trains.
#include <cstdio>
#include <filesystem>

#include "cli/cli.h"
#include "toy/io/file_type.h"
#include "toy/io/gguf.h"
#include "toy/io/progress.h"

namespace toy::cli {
namespace {

namespace fs = std::filesystem;

double megabytes(uintmax_t bytes) { return double(bytes) / 1e6; }

int run(const Args& a) {
  const std::string in_path = *a.positional(0), out_path = *a.positional(1);
  const auto ft = gguf::file_type(a.str("dtype"));
  if (a.str("dtype").empty()) throw UsageError("give --dtype (" + std::string(gguf::file_type_names()) + ")");
  if (!ft)
    throw UsageError("--dtype " + a.str("dtype") + " cannot be written (try " + std::string(gguf::file_type_names()) +
                     ")");
  if (!fs::exists(in_path)) throw InputError(in_path + ": no such file");
  std::error_code ec;
  if (fs::equivalent(in_path, out_path, ec))
    throw UsageError(out_path + " is the input file: write the quantized model to another path");
  auto in = gguf::GgufFile::open(in_path);
  Progress bar("quantize: " + std::string(ft->name), int64_t(in->tensors().size()), Progress::Unit::Count, "tensors",
               !a.flag("quiet"));
  Progress written("quantize: " + out_path, 0, Progress::Unit::Bytes, "", !a.flag("quiet"));
  gguf::quantize_file(
      *in, *ft, out_path,
      [&](const gguf::QuantizeStep& s) {
        bar.update(int64_t(s.index),
                   std::string(s.name) + " " + std::string(name(s.from)) + " -> " + std::string(name(s.to)));
        if (s.index == s.count) bar.finish();  // before the write's own progress
      },
      &written);
  written.finish();
  std::fprintf(stderr, "quantize: wrote %s (%s, general.file_type %u): %.1f MB -> %.1f MB\n", out_path.c_str(),
               std::string(ft->name).c_str(), ft->general_file_type, megabytes(fs::file_size(in_path)),
               megabytes(fs::file_size(out_path, ec)));
  return kOk;
}

Registrar reg({
    .name = "quantize",
    .summary = "write a GGUF model in another dtype, with llama-quantize's file types and per-tensor rules",
    .positionals = {{"IN", "the model to convert (any dtype toy reads)"}, {"OUT", "the GGUF file to write"}},
    .flags = {{"dtype", FlagType::String, "",
               "file type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q6_K, Q5_K, Q4_K (= Q4_K_S), Q5_K_M or "
               "Q4_K_M; 1-D tensors (norms, biases) stay F32"},
              {"quiet", FlagType::Bool, "", "no progress on stderr (a bar on a terminal, else a line every 10%)"}},
    .run = run,
    .details = "Matrices get the type's dtype; the _M mixes give output.weight (token_embd when tied) and the\n"
               "attn_v / ffn_down of some layers Q6_K, as llama-quantize does without an importance matrix;\n"
               "rows that do not split into blocks fall back as in llama-quantize. Every metadata key is kept\n"
               "(general.file_type and general.quantization_version are set). OUT must not be IN.\n\n"
               "example: toy quantize runs/r/weights/final.gguf model-q4_k_m.gguf --dtype Q4_K_M",
});

}  // namespace
}  // namespace toy::cli
