# SPDX-License-Identifier: BSL-1.0
# bench-smoke.charts: bench/plot.py over the CSVs of a committed run (those of its subfolders
# too, one per binary's commit), in a fresh folder. Fails unless it exits 0 and draws both kinds
# of chart: measured values and ours / peer with ranges.
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
message(STATUS "check_charts: ok")
