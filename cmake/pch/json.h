// cmake/pch/json.h — std.h and nlohmann::json, precompiled for the targets that use JSON.
#pragma GCC system_header
#include "std.h"
#include <nlohmann/json.hpp>
