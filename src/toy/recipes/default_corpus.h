// recipes/default_corpus.h — the text `toy train` trains on when given neither --corpus nor
// --data-ids, so that `toy train from-scratch --steps 20` works on a fresh clone: the first 200 KB
// of Tiny Shakespeare (public domain; source and licence in data/README.md). CMake compiles
// data/tinyshakespeare-200k.txt into the library (cmake/default_corpus.cpp.in), so it is found
// wherever the binary is installed or run from.
#pragma once

#include <string_view>

namespace toy::recipes {

inline constexpr std::string_view kDefaultCorpusName = "tinyshakespeare-200k";
std::string_view default_corpus_text();

}  // namespace toy::recipes
