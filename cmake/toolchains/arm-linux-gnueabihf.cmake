# SPDX-License-Identifier: BSL-1.0
# Cross build for ARMv7 (32-bit, hard float) Linux; tests run under qemu-arm.
#   apt-get install g++-arm-linux-gnueabihf qemu-user
set(ASYNC_CROSS_TRIPLE arm-linux-gnueabihf)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(ASYNC_QEMU_NAME qemu-arm)
include("${CMAKE_CURRENT_LIST_DIR}/linux-cross.cmake")
