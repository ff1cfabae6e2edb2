# SPDX-License-Identifier: BSL-1.0
# Cross build for ARMv7 (32-bit, hard float) Linux with Debian's cross g++ (g++-arm-linux-gnueabihf). Tests run under
# qemu-user through CMAKE_CROSSCOMPILING_EMULATOR, so a plain `ctest` executes them.
#   apt-get install g++-arm-linux-gnueabihf qemu-user
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(ASYNC_CROSS_TRIPLE arm-linux-gnueabihf)
set(CMAKE_C_COMPILER ${ASYNC_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${ASYNC_CROSS_TRIPLE}-g++)

# The target's libraries live in Debian's multiarch sysroot folder.
set(CMAKE_FIND_ROOT_PATH /usr/${ASYNC_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(ASYNC_QEMU NAMES qemu-arm qemu-arm-static)
if(ASYNC_QEMU)
  # -L points qemu at the target's dynamic loader and shared libraries.
  set(CMAKE_CROSSCOMPILING_EMULATOR "${ASYNC_QEMU};-L;/usr/${ASYNC_CROSS_TRIPLE}")
else()
  message(WARNING "qemu-arm not found (apt-get install qemu-user): cross-built tests cannot run")
endif()
