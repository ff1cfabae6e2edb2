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

# async_mutant_headers(<mutant> <out-var>): a copy of include/async with one change (a mutant of
# tests/det/mutate.cmake), generated into the build folder; <out-var> receives the folder to put
# first on a target's include path, and the copy's queue.h (a source of the target, so that the
# copy is made before it builds) is "<folder>/async/queue.h".
function(async_mutant_headers mutant out_var)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/mutants/${mutant}")
  file(GLOB_RECURSE inputs CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/include/async/*.h")
  add_custom_command(
    OUTPUT "${dir}/async/queue.h"
    COMMAND "${CMAKE_COMMAND}" -DMUTANT=${mutant} "-DSOURCE=${PROJECT_SOURCE_DIR}/include"
            "-DOUT=${dir}" -P "${PROJECT_SOURCE_DIR}/tests/det/mutate.cmake"
    DEPENDS ${inputs} "${PROJECT_SOURCE_DIR}/tests/det/mutate.cmake"
    COMMENT "async: headers with mutant ${mutant}")
  set(${out_var} "${dir}" PARENT_SCOPE)
endfunction()
