# SPDX-License-Identifier: BSL-1.0
# Cross build for ARMv8 (AArch64) Linux; tests run under qemu-aarch64.
#   apt-get install g++-aarch64-linux-gnu qemu-user
set(ASYNC_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(ASYNC_QEMU_NAME qemu-aarch64)
include("${CMAKE_CURRENT_LIST_DIR}/linux-cross.cmake")
