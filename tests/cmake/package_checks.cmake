# SPDX-License-Identifier: BSL-1.0
# Checks of the package on machines unlike the developer's, run by ctest in script mode:
#   -DCHECK=no_catch2  a plain `cmake -S . -B build && cmake --install build` where Catch2 cannot
#                      be found: the configure skips the tests with a message and the install
#                      works (the Debian locations of Catch2 are hidden with CMAKE_IGNORE_PATH).
#   -DCHECK=catch2_v3  configuring the tests against a Catch2 v3 package layout staged here (a
#                      CMake package of version 3 with the Catch2::Catch2 target): the tests
#                      accept it and build for v3.
#   -DCHECK=pkg_config compiling and running a consumer with the flags of the installed async.pc.
#   -DCHECK=pkg_config_datadir  the same with a data folder two levels deep (share/async/data),
#                      installed here: the prefix that async.pc derives from its own place.
# Other inputs: SOURCE (the async checkout), WORK (a scratch folder), GENERATOR, CXX, and for
# pkg_config PKG_CONFIG, PREFIX (where async was installed) and PROGRAM (the consumer's source).
cmake_minimum_required(VERSION 3.14)

function(run)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  set(out "${out}${err}" PARENT_SCOPE)
  set(rc "${rc}" PARENT_SCOPE)
endfunction()

# expect(<what went wrong> <condition...>)
function(expect what)
  if(NOT (${ARGN}))
    message(FATAL_ERROR "async package check ${CHECK}: ${what}\n${out}")
  endif()
endfunction()

# Compiles and runs PROGRAM with the flags of the async.pc found in `pc_dir`.
function(consume_with_pkg_config pc_dir)
  set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
  run("${PKG_CONFIG}" --cflags --libs async)
  expect("pkg-config does not know async (${pc_dir})" rc EQUAL 0)
  string(STRIP "${out}" flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run("${CXX}" -std=c++14 ${flags} "${PROGRAM}" -o "${WORK}/consumer")
  expect("the consumer does not compile with the flags of ${pc_dir}/async.pc" rc EQUAL 0)
  run("${WORK}/consumer")
  expect("the consumer built with pkg-config flags failed" rc EQUAL 0)
endfunction()

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

if(CHECK STREQUAL "no_catch2")
  # Catch2's package disabled, and the folders where its v2 header lives on Debian and in
  # /usr/local hidden (a list: given through a cache file).
  file(WRITE "${WORK}/hide-catch2.cmake"
    "set(CMAKE_DISABLE_FIND_PACKAGE_Catch2 ON CACHE BOOL \"\")\n"
    "set(CMAKE_IGNORE_PATH \"/usr/include;/usr/local/include\" CACHE STRING \"\")\n")
  run("${CMAKE_COMMAND}" -C "${WORK}/hide-catch2.cmake" -S "${SOURCE}" -B "${WORK}/build"
      -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX}")
  expect("the configure failed without Catch2" rc EQUAL 0)
  string(FIND "${out}" "Catch2 not found: the tests are skipped" said)
  expect("the configure did not say that the tests are skipped" NOT said EQUAL -1)
  run("${CMAKE_COMMAND}" --install "${WORK}/build" --prefix "${WORK}/prefix")
  expect("the install failed" rc EQUAL 0)
  foreach(file include/async/queue.h share/cmake/async/asyncConfig.cmake
               share/pkgconfig/async.pc)
    expect("the install has no ${file}" EXISTS ${WORK}/prefix/${file})
  endforeach()
elseif(CHECK STREQUAL "catch2_v3")
  set(stage "${WORK}/catch2-v3")
  file(WRITE "${stage}/include/catch2/catch_all.hpp" "#error staged layout: configure only\n")
  file(WRITE "${stage}/lib/cmake/Catch2/Catch2ConfigVersion.cmake"
    "set(PACKAGE_VERSION 3.7.1)\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n")
  file(WRITE "${stage}/lib/cmake/Catch2/Catch2Config.cmake"
"if(NOT TARGET Catch2::Catch2)
  add_library(Catch2::Catch2 INTERFACE IMPORTED)
  set_target_properties(Catch2::Catch2 PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES \"${stage}/include\")
  add_library(Catch2::Catch2WithMain INTERFACE IMPORTED)
  set_target_properties(Catch2::Catch2WithMain PROPERTIES
    INTERFACE_LINK_LIBRARIES Catch2::Catch2)
endif()
")
  run("${CMAKE_COMMAND}" -S "${SOURCE}" -B "${WORK}/build" -G "${GENERATOR}"
      "-DCMAKE_CXX_COMPILER=${CXX}" -DASYNC_BUILD_TESTS=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
      "-DCMAKE_PREFIX_PATH=${stage}")
  expect("the configure failed against Catch2 v3" rc EQUAL 0)
  string(FIND "${out}" "tests use Catch2 3.7.1" said)
  expect("the tests did not pick the staged Catch2 v3" NOT said EQUAL -1)
  file(READ "${WORK}/build/compile_commands.json" commands)
  string(FIND "${commands}" "ASYNC_CATCH2_V3=1" v3)
  expect("the test sources are not compiled for Catch2 v3" NOT v3 EQUAL -1)
elseif(CHECK STREQUAL "pkg_config")
  consume_with_pkg_config("${PREFIX}/share/pkgconfig")
elseif(CHECK STREQUAL "pkg_config_datadir")
  run("${CMAKE_COMMAND}" -S "${SOURCE}" -B "${WORK}/build" -G "${GENERATOR}"
      "-DCMAKE_CXX_COMPILER=${CXX}" -DASYNC_BUILD_TESTS=OFF -DCMAKE_INSTALL_DATADIR=share/async/data)
  expect("the configure failed" rc EQUAL 0)
  run("${CMAKE_COMMAND}" --install "${WORK}/build" --prefix "${WORK}/prefix")
  expect("the install failed" rc EQUAL 0)
  consume_with_pkg_config("${WORK}/prefix/share/async/data/pkgconfig")
else()
  message(FATAL_ERROR "unknown CHECK '${CHECK}'")
endif()
message(STATUS "async package check ${CHECK}: ok")
