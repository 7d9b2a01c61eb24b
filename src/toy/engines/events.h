// engines/events.h — the run-bundle event log schema (docs/events.md).
#pragma once

namespace toy {
inline constexpr const char* kEventSchema = "toy/v1";
}
