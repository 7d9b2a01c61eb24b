// cmake/pch/std.h — the C++ standard headers, part of the precompiled header (json.h) that the
// targets share (CMakeLists.txt: toy_precompile, the TOY_PCH option). Marked a system header, as
// what it includes is: included from the command line (-include), GCC 12 would otherwise warn
// about libstdc++'s own code inlined into ours.
#pragma GCC system_header
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>
