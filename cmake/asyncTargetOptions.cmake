# SPDX-License-Identifier: BSL-1.0
# Warnings and sanitizers for the project's own tests and benchmarks. Never applied to the
# INTERFACE target: users keep their own flags.

function(async_target_options target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Werror)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # C++14 `new` silently ignores over-alignment; make every such use an error.
      target_compile_options(${target} PRIVATE -Waligned-new=all)
      # Out-of-class definitions of constexpr static members are redundant, and deprecated,
      # from C++17 on (users' builds with -Wdeprecated saw them in the headers).
      target_compile_options(${target} PRIVATE -Wdeprecated)
      if(CMAKE_SYSTEM_PROCESSOR MATCHES "^arm")
        # 32-bit ARM: g++ notes on every std::vector<64-bit> instantiation that GCC 7.1 changed
        # how such iterators are passed (only mixing objects from before 7.1 could notice);
        # the notes buried the build log of the armv7 preset.
        target_compile_options(${target} PRIVATE -Wno-psabi)
      endif()
    endif()
    if(ASYNC_COVERAGE)
      # -fprofile-update=atomic: the tests are multi-threaded, and plain counter increments
      # race (gcov then reads torn or negative counts).
      target_compile_options(${target} PRIVATE --coverage -fprofile-update=atomic)
      if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
        # Only the library's functions get counters (the report covers include/async alone):
        # the tests' own loops, Catch2 and the standard library ran every atomic counter
        # increment for nothing, and the stress tests' threads contended on those counters.
        target_compile_options(${target} PRIVATE "-fprofile-filter-files=.*/include/async/.*")
        # Forked children that abort write their counters first (tests/support/test_support.h).
        target_compile_definitions(${target} PRIVATE ASYNC_TEST_GCOV_DUMP=1)
      endif()
      target_link_options(${target} PRIVATE --coverage)
    endif()
    if(ASYNC_SANITIZE)
      target_compile_options(${target} PRIVATE
        -fsanitize=${ASYNC_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
      target_link_options(${target} PRIVATE -fsanitize=${ASYNC_SANITIZE})
    endif()
  elseif(MSVC)
    target_compile_options(${target} PRIVATE /W4 /WX)
  endif()
endfunction()
