// SPDX-License-Identifier: BSL-1.0
// The one translation unit that holds Catch2's main; every test binary links it.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
