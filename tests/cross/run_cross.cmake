# cmake -DSOURCE=<tests/cross> -DBINARY=<build dir> -DTOOLCHAIN=<toolchain file> -P run_cross.cmake
# Configures and builds the cross project (only tl_kernels_test), then runs it under the toolchain's
# emulator. Exits non-zero on any failure.
foreach(var SOURCE BINARY TOOLCHAIN)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_cross.cmake: -D${var}=... is required")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} -DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN}
                        -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cross configure failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY} --target tl_kernels_test -j 2 RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cross build failed (${rc})")
endif()
file(STRINGS ${BINARY}/CMakeCache.txt emu REGEX "^MCULLM_QEMU_AARCH64:")
string(REGEX REPLACE "^[^=]*=" "" emu "${emu}")
file(STRINGS ${BINARY}/CMakeCache.txt sysroot REGEX "^MCULLM_AARCH64_SYSROOT:")
string(REGEX REPLACE "^[^=]*=" "" sysroot "${sysroot}")
execute_process(COMMAND ${emu} -L ${sysroot} ${BINARY}/tl_kernels_test --gtest_brief=1 RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tl_kernels_test failed under ${emu} (${rc})")
endif()
