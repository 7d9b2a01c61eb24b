#pragma once
// kernels/vulkan/shaders.h — the SPIR-V modules compiled at build time by glslc from the .comp
// files beside this header and embedded as arrays by cmake/embed_spirv.cmake (CMakeLists.txt,
// toy_vulkan_shader).
#include <cstdint>
#include <span>

namespace toy::kernels::vulkan::spirv {
extern const std::span<const uint32_t> matvec_f32;    // matvec.comp -DWT_F32 -DTILE=1
extern const std::span<const uint32_t> matvec_f16;    // matvec.comp -DWT_F16 -DTILE=1
extern const std::span<const uint32_t> matvec_bf16;   // matvec.comp -DWT_BF16 -DTILE=1
extern const std::span<const uint32_t> matvec_q8_0;   // matvec.comp -DWT_Q8_0 -DTILE=1
extern const std::span<const uint32_t> matvec_q4_0;   // matvec.comp -DWT_Q4_0 -DTILE=1
extern const std::span<const uint32_t> matvec_q5_0;   // matvec.comp -DWT_Q5_0 -DTILE=1
extern const std::span<const uint32_t> matvec_q4_1;   // matvec.comp -DWT_Q4_1 -DTILE=1
extern const std::span<const uint32_t> matvec_q5_1;   // matvec.comp -DWT_Q5_1 -DTILE=1
extern const std::span<const uint32_t> matvec_q4_k;   // matvec.comp -DWT_Q4_K -DTILE=1
extern const std::span<const uint32_t> matvec_q5_k;   // matvec.comp -DWT_Q5_K -DTILE=1
extern const std::span<const uint32_t> matvec_q6_k;   // matvec.comp -DWT_Q6_K -DTILE=1
extern const std::span<const uint32_t> matvec8_f32;   // matvec.comp -DWT_F32 -DTILE=8
extern const std::span<const uint32_t> matvec8_f16;   // matvec.comp -DWT_F16 -DTILE=8
extern const std::span<const uint32_t> matvec8_bf16;  // matvec.comp -DWT_BF16 -DTILE=8
extern const std::span<const uint32_t> matvec8_q8_0;  // matvec.comp -DWT_Q8_0 -DTILE=8
extern const std::span<const uint32_t> matvec8_q4_0;  // matvec.comp -DWT_Q4_0 -DTILE=8
extern const std::span<const uint32_t> matvec8_q5_0;  // matvec.comp -DWT_Q5_0 -DTILE=8
extern const std::span<const uint32_t> matvec8_q4_1;  // matvec.comp -DWT_Q4_1 -DTILE=8
extern const std::span<const uint32_t> matvec8_q5_1;  // matvec.comp -DWT_Q5_1 -DTILE=8
extern const std::span<const uint32_t> matvec8_q4_k;  // matvec.comp -DWT_Q4_K -DTILE=8
extern const std::span<const uint32_t> matvec8_q5_k;  // matvec.comp -DWT_Q5_K -DTILE=8
extern const std::span<const uint32_t> matvec8_q6_k;  // matvec.comp -DWT_Q6_K -DTILE=8

extern const std::span<const uint32_t> elementwise_binary;  // elementwise.comp -DBINARY
extern const std::span<const uint32_t> elementwise_unary;   // elementwise.comp -DUNARY
extern const std::span<const uint32_t> norm_rms;            // norm.comp -DRMS
extern const std::span<const uint32_t> norm_layer;          // norm.comp -DLAYER
extern const std::span<const uint32_t> norm_l2;             // norm.comp -DL2

extern const std::span<const uint32_t> quantize_q8_0;  // quantize.comp -DQ8_0
extern const std::span<const uint32_t> quantize_q8_k;  // quantize.comp -DQ8_K
extern const std::span<const uint32_t> quantize_f16;   // quantize.comp -DF16
extern const std::span<const uint32_t> quantize_bf16;  // quantize.comp -DBF16
extern const std::span<const uint32_t> gather_f32;     // gather.comp -DWT_F32
extern const std::span<const uint32_t> gather_f16;     // gather.comp -DWT_F16
extern const std::span<const uint32_t> gather_bf16;    // gather.comp -DWT_BF16
extern const std::span<const uint32_t> gather_q8_0;    // gather.comp -DWT_Q8_0
extern const std::span<const uint32_t> gather_q4_0;    // gather.comp -DWT_Q4_0 (and likewise for
extern const std::span<const uint32_t> gather_q5_0;    // the other block types)
extern const std::span<const uint32_t> gather_q4_1;
extern const std::span<const uint32_t> gather_q5_1;
extern const std::span<const uint32_t> gather_q4_k;
extern const std::span<const uint32_t> gather_q5_k;
extern const std::span<const uint32_t> gather_q6_k;
extern const std::span<const uint32_t> convert_f32;           // convert.comp -DDST_F32
extern const std::span<const uint32_t> convert_f16;           // convert.comp -DDST_F16
extern const std::span<const uint32_t> rope_norm;             // rope.comp
extern const std::span<const uint32_t> rope_neox;             // rope.comp -DNEOX
extern const std::span<const uint32_t> attention_f32;         // attention.comp
extern const std::span<const uint32_t> attention_f16;         // attention.comp -DKV_F16
extern const std::span<const uint32_t> delta_net_conv1d;      // delta_net.comp -DCONV1D
extern const std::span<const uint32_t> delta_net_log_decay;   // delta_net.comp -DLOG_DECAY
extern const std::span<const uint32_t> delta_net_delta_rule;  // delta_net.comp -DDELTA_RULE
extern const std::span<const uint32_t> rows_scale;            // rows.comp -DSCALE
extern const std::span<const uint32_t> rows_scatter_add;      // rows.comp -DSCATTER_ADD
}  // namespace toy::kernels::vulkan::spirv
