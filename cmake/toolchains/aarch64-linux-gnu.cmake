# Cross-compiling for 64-bit ARM Linux with Debian's gcc-aarch64-linux-gnu / g++-aarch64-linux-gnu,
# running the results under qemu-aarch64 (Debian's qemu-user). Generic: use it for any CMake project,
#   cmake -S <src> -B <build> -DCMAKE_TOOLCHAIN_FILE=<repo>/cmake/toolchains/aarch64-linux-gnu.cmake
# CMAKE_CROSSCOMPILING_EMULATOR is set when qemu-aarch64 is found, so add_test(), gtest_discover_tests()
# and try_run() run aarch64 programs transparently; by hand: qemu-aarch64 -L /usr/aarch64-linux-gnu ./prog
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(MCULLM_AARCH64_PREFIX aarch64-linux-gnu CACHE STRING "Prefix of the aarch64 cross tools")
set(CMAKE_C_COMPILER ${MCULLM_AARCH64_PREFIX}-gcc)
set(CMAKE_CXX_COMPILER ${MCULLM_AARCH64_PREFIX}-g++)

# Libraries and headers come from the cross sysroot only; programs (code generators) from the host.
set(MCULLM_AARCH64_SYSROOT /usr/${MCULLM_AARCH64_PREFIX} CACHE PATH "Target libraries for the emulator (-L)")
set(CMAKE_FIND_ROOT_PATH ${MCULLM_AARCH64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(MCULLM_QEMU_AARCH64 qemu-aarch64)
if(MCULLM_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${MCULLM_QEMU_AARCH64} -L ${MCULLM_AARCH64_SYSROOT})
endif()
