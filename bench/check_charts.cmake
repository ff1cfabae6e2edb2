# SPDX-License-Identifier: BSL-1.0
# bench-smoke.charts: bench/plot.py over the CSVs of a committed run (those of its subfolders
# too, one per binary's commit), in a fresh folder. Fails unless it exits 0, draws both kinds
# of chart (measured values, and ours / peer with ranges), and writes an index.md that shows
# every chart under a title in words.
#   cmake -DPYTHON=<python with matplotlib> -DPLOT=<plot.py> -DRUN=<results folder>
#         -DOUT=<scratch folder> -P check_charts.cmake
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
file(GLOB_RECURSE csvs "${RUN}/*.csv")
if(NOT csvs)
  message(FATAL_ERROR "check_charts: no CSV in ${RUN}")
endif()
file(COPY ${csvs} DESTINATION "${OUT}")
execute_process(COMMAND "${PYTHON}" "${PLOT}" "${OUT}" RESULT_VARIABLE rc OUTPUT_VARIABLE log
                ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_charts: plot.py exited ${rc}:\n${log}")
endif()
foreach(chart IN ITEMS throughput.png throughput_ratio.png funnel_13p1c_ratio.png
                       ping_pong_round_trip_ratio.png pool_window_post_s_1_ratio.png)
  if(NOT EXISTS "${OUT}/charts/${chart}")
    message(FATAL_ERROR "check_charts: plot.py drew no ${chart}:\n${log}")
  endif()
endforeach()
# The index shows every chart drawn, each under a title in words.
if(NOT EXISTS "${OUT}/charts/index.md")
  message(FATAL_ERROR "check_charts: plot.py wrote no charts/index.md:\n${log}")
endif()
file(READ "${OUT}/charts/index.md" index)
file(GLOB charts RELATIVE "${OUT}/charts" "${OUT}/charts/*.png")
foreach(chart IN LISTS charts)
  string(FIND "${index}" "](${chart})" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check_charts: charts/index.md does not show ${chart}")
  endif()
endforeach()
if(index MATCHES "## [a-z_]+/[a-z]+:[0-9]")
  message(FATAL_ERROR "check_charts: a title is a case id, not words:\n${index}")
endif()
message(STATUS "check_charts: ok")
