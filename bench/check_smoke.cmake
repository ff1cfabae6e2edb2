# SPDX-License-Identifier: BSL-1.0
# bench-smoke.<binary>: what a user meets when running a bench binary. Fails unless
#   - --help exits 0 and lists the binary's own flags (--async_type where it takes one);
#   - a misspelt flag of ours exits 2 with a message;
#   - a tiny run exits 0 (every result verified) and saves the summary (<name>.md: a heading,
#     no line over 100 columns), a CSV whose first line is its header, and the .meta.json.
#   cmake -DBINARY=<bench binary> -DOUT=<scratch folder> -DTYPES=<0|1> "-DARGS=<a;b;...>"
#         [-DEMULATOR=<a|b>] -P check_smoke.cmake
string(REPLACE "|" ";" emulator "${EMULATOR}")
get_filename_component(name "${BINARY}" NAME)
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")

execute_process(COMMAND ${emulator} "${BINARY}" --help RESULT_VARIABLE rc OUTPUT_VARIABLE help
                ERROR_VARIABLE help)
set(flags --async_rounds --async_threads --async_items --async_csv --async_full)
if(TYPES)
  list(APPEND flags --async_type)
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_smoke: ${name} --help exited ${rc}:\n${help}")
endif()
foreach(flag IN LISTS flags)
  if(NOT help MATCHES "${flag}")
    message(FATAL_ERROR "check_smoke: ${name} --help does not list ${flag}:\n${help}")
  endif()
endforeach()

execute_process(COMMAND ${emulator} "${BINARY}" --async_rounds=x RESULT_VARIABLE rc
                OUTPUT_VARIABLE log ERROR_VARIABLE log)
if(NOT rc EQUAL 2 OR NOT log MATCHES "--async_rounds takes")
  message(FATAL_ERROR "check_smoke: ${name} --async_rounds=x: exit ${rc}, expected 2 and a "
                      "message:\n${log}")
endif()

set(csv "${OUT}/${name}.csv")
execute_process(COMMAND ${emulator} "${BINARY}" ${ARGS} "--async_csv=${csv}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE log ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_smoke: ${name} ${ARGS} exited ${rc}:\n${log}")
endif()
foreach(file IN ITEMS "${csv}" "${OUT}/${name}.md" "${OUT}/${name}.meta.json")
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "check_smoke: ${name} saved no ${file}:\n${log}")
  endif()
endforeach()
file(STRINGS "${csv}" first LIMIT_COUNT 1)
if(NOT first MATCHES "^case,implementation,")
  message(FATAL_ERROR "check_smoke: ${csv} starts with '${first}', not its header")
endif()
file(READ "${OUT}/${name}.md" summary)
if(NOT summary MATCHES "^## ${name}: ")
  message(FATAL_ERROR "check_smoke: ${name}.md has no heading:\n${summary}")
endif()
# 101 characters without a line break anywhere is a line over 100 columns. (A regular expression
# over the whole text: file(STRINGS) would split lines at semicolons; CMake's have no {n}.)
string(REPEAT "[^\n]" 101 too_long)
if(summary MATCHES "${too_long}")
  message(FATAL_ERROR "check_smoke: ${name}.md has a line over 100 columns:\n${summary}")
endif()
file(READ "${OUT}/${name}.meta.json" meta)
if(NOT meta MATCHES "\"commit\": " OR NOT meta MATCHES "\"machine\": ")
  message(FATAL_ERROR "check_smoke: ${name}.meta.json lacks the commit or machine:\n${meta}")
endif()
message(STATUS "check_smoke: ${name}: ok")
