# SPDX-License-Identifier: BSL-1.0
# The common body of the cross toolchain files: set ASYNC_CROSS_TRIPLE, CMAKE_SYSTEM_PROCESSOR
# and ASYNC_QEMU_NAME, then include this file. Debian's cross g++ and its multiarch sysroot
# (/usr/<triple>) build the code; qemu-user runs the tests through CMAKE_CROSSCOMPILING_EMULATOR,
# so a plain `ctest` executes them.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${ASYNC_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${ASYNC_CROSS_TRIPLE}-g++)

set(CMAKE_FIND_ROOT_PATH /usr/${ASYNC_CROSS_TRIPLE})
# The benchmark peers for the target, unpacked by bench/fetch-cross-peers.sh (Debian's packages
# of the target architecture in a private sysroot). ASYNC_CROSS_PEERS names another place.
if(DEFINED ENV{ASYNC_CROSS_PEERS})
  set(ASYNC_CROSS_PEERS "$ENV{ASYNC_CROSS_PEERS}")
else()
  get_filename_component(ASYNC_CROSS_PEERS
    "${CMAKE_CURRENT_LIST_DIR}/../../.cross-peers/${ASYNC_CROSS_TRIPLE}" ABSOLUTE)
endif()
if(IS_DIRECTORY "${ASYNC_CROSS_PEERS}")
  list(APPEND CMAKE_FIND_ROOT_PATH "${ASYNC_CROSS_PEERS}")
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(ASYNC_QEMU NAMES ${ASYNC_QEMU_NAME} ${ASYNC_QEMU_NAME}-static)
if(ASYNC_QEMU)
  # -L points qemu at the target's dynamic loader and shared libraries.
  set(CMAKE_CROSSCOMPILING_EMULATOR "${ASYNC_QEMU};-L;/usr/${ASYNC_CROSS_TRIPLE}")
else()
  message(WARNING "${ASYNC_QEMU_NAME} not found (apt-get install qemu-user): "
                  "cross-built tests cannot run")
endif()
