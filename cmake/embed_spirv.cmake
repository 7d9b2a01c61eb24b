# cmake -DSPV=in.spv -DOUT=out.cpp -DNAME=symbol -P embed_spirv.cmake
# Writes one SPIR-V module as a C++ array of 32-bit words, toy::kernels::vulkan::spirv::<NAME>
# (src/toy/kernels/vulkan/shaders.h declares them), so the binary needs no shader file at run time.
# SPIR-V is a stream of little-endian words, and so are the hosts toy builds for.
file(READ ${SPV} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR words "${n} / 8")
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f]+u,){8})" "\\1\n" body "${body}")
file(WRITE ${OUT} "// Generated from ${SPV} by cmake/embed_spirv.cmake.\n#include <cstdint>\n#include <span>\n\n"
     "namespace toy::kernels::vulkan::spirv {\nnamespace {\nconst uint32_t words[${words}] = {\n${body}};\n}\n"
     "extern const std::span<const uint32_t> ${NAME}{words, ${words}};\n}  // namespace toy::kernels::vulkan::spirv\n")
