# SPDX-License-Identifier: BSL-1.0
# Removes the coverage counters (*.gcda) under DIR, so that a report counts one run only.
file(GLOB_RECURSE counters "${DIR}/*.gcda")
if(counters)
  file(REMOVE ${counters})
endif()
