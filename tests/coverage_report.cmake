# SPDX-License-Identifier: BSL-1.0
# The coverage report of include/async/ after a test run of the `coverage` preset:
#
#   cmake -DBUILD=<build dir> -DSOURCE=<repo> -DMIN_LINES=<%> -DMIN_BRANCHES=<%> -P coverage_report.cmake
#
# lcov gathers the counters of every test binary, keeps include/async/ alone (tests, benchmarks,
# Catch2 and the standard library are left out), genhtml writes the HTML under
# <build>/coverage/html, and the last line printed is the summary. Fails when line or branch
# coverage is below the minimum. No error of the tools is ignored.
find_program(LCOV lcov REQUIRED)
find_program(GENHTML genhtml REQUIRED)
set(out "${BUILD}/coverage")
file(MAKE_DIRECTORY "${out}")
execute_process(
  COMMAND "${LCOV}" --quiet --capture --directory "${BUILD}" --output-file "${out}/async.info"
          --rc lcov_branch_coverage=1 --include "${SOURCE}/include/async/*"
  RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "coverage: lcov could not read the counters")
endif()
execute_process(
  COMMAND "${GENHTML}" --quiet --branch-coverage --legend --title "async: include/async"
          --prefix "${SOURCE}" --output-directory "${out}/html" "${out}/async.info"
  RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "coverage: genhtml failed")
endif()
execute_process(
  COMMAND "${LCOV}" --summary "${out}/async.info" --rc lcov_branch_coverage=1
  OUTPUT_VARIABLE summary ERROR_VARIABLE summary)
string(REGEX MATCH "lines[.]*: ([0-9.]+)% \\(([0-9]+) of ([0-9]+)" _ "${summary}")
set(lines "${CMAKE_MATCH_1}")
set(lines_of "${CMAKE_MATCH_2} of ${CMAKE_MATCH_3}")
string(REGEX MATCH "branches[.]*: ([0-9.]+)% \\(([0-9]+) of ([0-9]+)" _ "${summary}")
set(branches "${CMAKE_MATCH_1}")
set(branches_of "${CMAKE_MATCH_2} of ${CMAKE_MATCH_3}")
if(lines STREQUAL "" OR branches STREQUAL "")
  message(FATAL_ERROR "coverage: no summary from lcov:\n${summary}")
endif()
string(CONCAT line "coverage of include/async: lines ${lines}% (${lines_of}), branches "
       "${branches}% (${branches_of}), HTML in ${out}/html/index.html")
file(WRITE "${out}/summary.txt" "${line}\n")
message("${line}")
if(lines LESS MIN_LINES OR branches LESS MIN_BRANCHES)
  message(FATAL_ERROR "coverage: below the minimum (lines ${MIN_LINES}%, branches "
                      "${MIN_BRANCHES}%)")
endif()
