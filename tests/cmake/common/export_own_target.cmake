# SPDX-License-Identifier: BSL-1.0
# Included by the consumer projects that embed async (add_subdirectory, FetchContent). The
# consumer installs and exports a library of its own that links async::async, with a package of
# its own, as a library built on async would: CMake must accept the export (it refuses one whose
# dependency is in no installed export set), and a downstream project must build and run against
# the installed result, where find_package(consumer) finds async with find_dependency.
if(ASYNC_BUILD_TESTS)
  message(FATAL_ERROR "async must not build its tests when it is embedded")
endif()
if(NOT ASYNC_INSTALL)
  message(FATAL_ERROR "async's install rules must be on when it is embedded (ASYNC_INSTALL)")
endif()

include(GNUInstallDirs)
add_library(consumer_lib INTERFACE)
target_link_libraries(consumer_lib INTERFACE async::async)
install(TARGETS consumer_lib EXPORT consumerTargets)
install(EXPORT consumerTargets NAMESPACE consumer::
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/cmake/consumer")
file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/consumerConfig.cmake"
  "include(CMakeFindDependencyMacro)\n"
  "find_dependency(async 2.0 CONFIG)\n"
  "include(\"\${CMAKE_CURRENT_LIST_DIR}/consumerTargets.cmake\")\n")
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/consumerConfig.cmake"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/cmake/consumer")

set(stage "${CMAKE_CURRENT_BINARY_DIR}/stage")
add_test(NAME install
  COMMAND "${CMAKE_COMMAND}" --install "${CMAKE_BINARY_DIR}" --prefix "${stage}")
set_tests_properties(install PROPERTIES FIXTURES_SETUP staged)
add_test(NAME downstream
  COMMAND "${CMAKE_CTEST_COMMAND}" --build-and-test
          "${CMAKE_CURRENT_LIST_DIR}/../downstream" "${CMAKE_CURRENT_BINARY_DIR}/downstream"
          --build-generator "${CMAKE_GENERATOR}" --build-makeprogram "${CMAKE_MAKE_PROGRAM}"
          --build-options "-DCMAKE_PREFIX_PATH=${stage}" "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}"
          --test-command "${CMAKE_CTEST_COMMAND}" --output-on-failure)
set_tests_properties(downstream PROPERTIES FIXTURES_REQUIRED staged)
