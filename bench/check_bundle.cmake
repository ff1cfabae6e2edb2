# SPDX-License-Identifier: BSL-1.0
# The test of a self-contained benchmark folder: copies its binaries and libraries to a fresh
# folder elsewhere (as a user copies them to a board), asks the dynamic loader where each library
# of every binary comes from, and fails unless all but glibc's resolve inside the copy; then
# starts each copied binary once.
#
#   cmake -DFOLDER=<build>/bench -DCOPY=<scratch folder> [-DEMULATOR=<cmd>|<arg>...] -P check_bundle.cmake
cmake_minimum_required(VERSION 3.21)

foreach(var FOLDER COPY)
  if(NOT ${var})
    message(FATAL_ERROR "check_bundle.cmake: ${var} not set")
  endif()
endforeach()
string(REPLACE "|" ";" emulator "${EMULATOR}")

file(REMOVE_RECURSE "${COPY}")
file(MAKE_DIRECTORY "${COPY}")
file(GLOB binaries "${FOLDER}/bench_*")
file(GLOB libraries "${FOLDER}/*.so*")
list(FILTER libraries EXCLUDE REGEX "/\\.[^/]*$")
if(NOT binaries)
  message(FATAL_ERROR "check_bundle.cmake: no bench_* in ${FOLDER}")
endif()
file(COPY ${binaries} ${libraries} "${FOLDER}/sweep.sh" DESTINATION "${COPY}"
     USE_SOURCE_PERMISSIONS)

set(glibc_re "^(libc|libm|libmvec|libdl|libpthread|librt|libresolv|libutil|libanl)\\.so\\.[0-9]+$|^ld-linux")
file(GLOB copied "${COPY}/bench_*")
set(problems "")
foreach(bin IN LISTS copied)
  get_filename_component(name "${bin}" NAME)
  # The loader lists what it would map, "<soname> => <path> (address)", and runs nothing.
  # Under qemu-user the variable must reach the emulated program, not qemu's own loader.
  if(emulator)
    set(trace_cmd ${emulator} -E LD_TRACE_LOADED_OBJECTS=1 "${bin}")
  else()
    set(trace_cmd "${CMAKE_COMMAND}" -E env LD_TRACE_LOADED_OBJECTS=1 "${bin}")
  endif()
  execute_process(COMMAND ${trace_cmd} OUTPUT_VARIABLE trace ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(APPEND problems "${name}: the loader failed (${rc}): ${err}\n")
    continue()
  endif()
  string(REGEX MATCHALL "[^ \t\n]+ => [^ \t\n]+" links "${trace}")
  if(NOT links)
    string(APPEND problems "${name}: the loader listed nothing:\n${trace}\n")
  endif()
  foreach(link IN LISTS links)
    string(REGEX REPLACE " => .*" "" soname "${link}")
    string(REGEX REPLACE ".* => " "" path "${link}")
    if(soname MATCHES "${glibc_re}")
      continue()
    endif()
    get_filename_component(dir "${path}" DIRECTORY)
    if(NOT dir STREQUAL COPY)
      string(APPEND problems "${name}: ${soname} comes from ${path}, not from the folder\n")
    endif()
  endforeach()
  execute_process(COMMAND ${emulator} "${bin}" --benchmark_list_tests
    OUTPUT_VARIABLE listed ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT listed)
    string(APPEND problems "${name}: does not start from the copy (${rc}): ${err}\n")
  endif()
endforeach()
file(REMOVE_RECURSE "${COPY}")
if(problems)
  message(FATAL_ERROR "check_bundle.cmake: the folder is not self-contained:\n${problems}")
endif()
list(LENGTH copied n)
message(STATUS "check_bundle.cmake: ${n} binaries start from a copy of the folder, and every "
               "library but glibc's comes from the copy")
