// SPDX-License-Identifier: BSL-1.0
// The one translation unit that holds Catch2's main; every test binary links it.
#if defined(ASYNC_CATCH2_V3)
#include <catch2/catch_session.hpp>

int main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
#else
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
