#pragma once
// kernels/vulkan/shaders.h — the SPIR-V modules compiled at build time by glslc from the .comp
// files beside this header and embedded as arrays by cmake/embed_spirv.cmake (CMakeLists.txt,
// toy_vulkan_shader).
#include <cstdint>
#include <span>

namespace toy::kernels::vulkan::spirv {
extern const std::span<const uint32_t> matvec_f32;   // matvec.comp -DWT_F32
extern const std::span<const uint32_t> matvec_f16;   // matvec.comp -DWT_F16
extern const std::span<const uint32_t> matvec_q8_0;  // matvec.comp -DWT_Q8_0

extern const std::span<const uint32_t> elementwise_binary;  // elementwise.comp -DBINARY
extern const std::span<const uint32_t> elementwise_unary;   // elementwise.comp -DUNARY
extern const std::span<const uint32_t> norm_rms;            // norm.comp -DRMS
extern const std::span<const uint32_t> norm_layer;          // norm.comp -DLAYER
}  // namespace toy::kernels::vulkan::spirv
