# SPDX-License-Identifier: BSL-1.0
# The release facts that live in CMakeLists.txt's project() and nowhere else, checked where
# other files repeat them for their readers: the README names this version and tags it in its
# FetchContent snippet, CHANGELOG.md has a section for it, and the snippet clones this
# repository (its URL, once it has one), never the original's.
#
#   cmake -DSOURCE=<repository> -DVERSION=<x.y.z> -DURL=<homepage or empty> -P check_release_facts.cmake
foreach(var IN ITEMS SOURCE VERSION)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "check_release_facts: -D${var}= is required")
  endif()
endforeach()

set(failures "")
file(READ "${SOURCE}/README.md" readme)
file(READ "${SOURCE}/CHANGELOG.md" changelog)

string(FIND "${readme}" "Version ${VERSION} " at)
if(at EQUAL -1)
  string(APPEND failures "README.md does not say \"Version ${VERSION} \" (project() says ${VERSION})\n")
endif()
string(REGEX MATCH "GIT_TAG +v[0-9]+\\.[0-9]+\\.[0-9]+" tag_line "${readme}")
if(NOT tag_line MATCHES "v${VERSION}$")
  string(APPEND failures "README.md's FetchContent snippet pins '${tag_line}', not v${VERSION}\n")
endif()
string(FIND "${changelog}" "## [${VERSION}] - " at)
if(at EQUAL -1)
  string(APPEND failures "CHANGELOG.md has no section \"## [${VERSION}] - <date>\"\n")
endif()
string(REGEX MATCH "GIT_REPOSITORY +[^\n]*" repo_line "${readme}")
if(repo_line MATCHES "d36u9")
  string(APPEND failures "README.md's FetchContent snippet clones the original library: ${repo_line}\n")
endif()
if(NOT "${URL}" STREQUAL "" AND NOT repo_line MATCHES "GIT_REPOSITORY +${URL}")
  string(APPEND failures "README.md's FetchContent snippet does not clone ${URL}: ${repo_line}\n")
endif()

if(failures)
  message(FATAL_ERROR "check_release_facts:\n${failures}")
endif()
message(STATUS "check_release_facts: README.md and CHANGELOG.md agree with project(): ${VERSION}")
