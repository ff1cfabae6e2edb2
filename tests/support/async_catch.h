// SPDX-License-Identifier: BSL-1.0
// Catch2 for the test binaries: v2 (one header) or v3 (a compiled library with many headers),
// whichever tests/CMakeLists.txt found (it defines ASYNC_CATCH2_V3 for v3). The tests use only
// what both versions spell the same way.
#ifndef ASYNC_TESTS_SUPPORT_ASYNC_CATCH_H
#define ASYNC_TESTS_SUPPORT_ASYNC_CATCH_H

#if defined(ASYNC_CATCH2_V3)
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
#endif

#endif // ASYNC_TESTS_SUPPORT_ASYNC_CATCH_H
