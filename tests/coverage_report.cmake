# SPDX-License-Identifier: BSL-1.0
# The coverage report of include/async/ after a test run of the `coverage` preset:
#
#   cmake -DBUILD=<build dir> -DSOURCE=<repo> -DMIN_LINES=<%> -DMIN_BRANCHES=<%>
#         -DMIN_DECISIONS=<%> -P coverage_report.cmake
#
# tests/coverage_branches.py gathers the counters of every test binary (gcov's JSON), keeps
# include/async/ alone (tests, benchmarks, Catch2 and the standard library are left out) and
# writes them as an lcov tracefile, genhtml writes the HTML under
# <build>/coverage/html, and the last line printed is the summary. Fails when line or branch
# coverage, or the coverage of decision branches (see below), is below its minimum. No error of
# the tools is ignored.
find_program(LCOV lcov REQUIRED)
find_program(GENHTML genhtml REQUIRED)
set(out "${BUILD}/coverage")
file(MAKE_DIRECTORY "${out}")
# lcov's branches are of two kinds: decisions (both ways of an if, a loop, a &&) and the edges
# from calls that may throw to their landing pads. tests/coverage_branches.py separates them
# (lcov 1.16 cannot, with gcc 12's JSON) and lists every untaken decision branch, each of which
# docs/coverage.md explains. The same pass writes the lcov tracefile of include/async/ that
# genhtml and `lcov --summary` read (what `lcov --capture` gathered,
# the same numbers, in 10 s instead of 77 s on the 2-core VM).
find_package(Python3 COMPONENTS Interpreter REQUIRED)
execute_process(
  COMMAND "${Python3_EXECUTABLE}" "${SOURCE}/tests/coverage_branches.py" "${BUILD}" "${SOURCE}"
          "${out}/decisions.txt" "${out}/async.info"
  OUTPUT_VARIABLE decision_summary
  RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "coverage: tests/coverage_branches.py failed")
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
string(REGEX MATCH "decision branches of include/async: ([0-9.]+)% \\(([0-9]+ of [0-9]+)\\)"
       _ "${decision_summary}")
set(decisions "${CMAKE_MATCH_1}")
set(decisions_of "${CMAKE_MATCH_2}")
if(decisions STREQUAL "")
  message(FATAL_ERROR "coverage: no summary from tests/coverage_branches.py:\n${decision_summary}")
endif()
string(CONCAT line "coverage of include/async: lines ${lines}% (${lines_of}), branches "
       "${branches}% (${branches_of}; decisions ${decisions}% (${decisions_of}), the rest are "
       "exception edges), HTML in ${out}/html/index.html, untaken decisions in "
       "${out}/decisions.txt")
file(WRITE "${out}/summary.txt" "${line}\n")
message("${line}")
if(lines LESS MIN_LINES OR branches LESS MIN_BRANCHES OR decisions LESS MIN_DECISIONS)
  message(FATAL_ERROR "coverage: below the minimum (lines ${MIN_LINES}%, branches "
                      "${MIN_BRANCHES}%, decisions ${MIN_DECISIONS}%)")
endif()
