// cmake/pch/tests.h — json.h and GoogleTest, precompiled for the test binary.
#pragma GCC system_header
#include "json.h"
#include <gtest/gtest.h>
