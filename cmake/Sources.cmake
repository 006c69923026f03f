# Two libraries:
#  mcullm_core: freestanding (no exceptions, no RTTI, no iostream, no heap after init):
#               every src/**/*.cpp not named *_host.cpp (and not in a kernel table's own folder)
#  mcullm_host: everything that needs an OS or the C++ library. One rule in every folder: such
#               files are named *_host.cpp / *_host.h (the firmware component and its checks use it too).
#  mcullm_http: the HTTP server (src/serve/http_server_host.cpp, the embedded web page) and the
#               cpp-httplib stack it drags in (libssl, libcrypto, brotli, zlib): only `mcullm-serve`
#               links it, so the other commands start without loading those libraries.
file(GLOB_RECURSE MCULLM_ALL_SOURCES CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/src/*.cpp)
set(MCULLM_CORE_SOURCES)
set(MCULLM_HOST_SOURCES)
set(MCULLM_KERNEL_FOLDER_SOURCES)
set(MCULLM_HTTP_SOURCES)
foreach(f IN LISTS MCULLM_ALL_SOURCES)
  if(f MATCHES "/src/serve/(http_server|web_assets)_host\\.cpp$")
    list(APPEND MCULLM_HTTP_SOURCES ${f})
  elseif(f MATCHES "_host\\.cpp$")
    list(APPEND MCULLM_HOST_SOURCES ${f})
  elseif(f MATCHES "/src/kernels/[^/]+/" AND NOT f MATCHES "/src/kernels/(ref|esp32s3)/")
    # A kernel table's folder with its own instruction set: compiled by its mcullm_kernel_folder line.
    # (esp32s3 compiles to nothing off Xtensa; the firmware and targets/ builds take it in.)
    list(APPEND MCULLM_KERNEL_FOLDER_SOURCES ${f})
  else()
    list(APPEND MCULLM_CORE_SOURCES ${f})
  endif()
endforeach()

add_library(mcullm_core STATIC ${MCULLM_CORE_SOURCES})
target_include_directories(mcullm_core PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
target_compile_options(mcullm_core PRIVATE -fno-exceptions -fno-rtti)

# One line per kernel table folder (src/kernels/<folder>/): mcullm_kernel_folder(<folder> <processors>
# <define> [compile options...]) compiles the folder into the core when the target processor matches
# and sets the define its line in the registry (kernels/dispatch.cpp) sits under. The folders' kernels
# are called only after the registry's CPU check, so their flags never reach code every CPU runs.
function(mcullm_kernel_folder folder processors define)
  set(srcs ${MCULLM_KERNEL_FOLDER_SOURCES})
  list(FILTER srcs INCLUDE REGEX "/src/kernels/${folder}/")
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "${processors}" AND srcs)
    if(ARGN)
      set_source_files_properties(${srcs} PROPERTIES COMPILE_OPTIONS "${ARGN}")
    endif()
    target_sources(mcullm_core PRIVATE ${srcs})
    target_compile_definitions(mcullm_core PRIVATE ${define}=1)
  endif()
endfunction()

# AVX-512 F + BW + VL + VNNI and F16C (the LUT kernels, the block types' GEMM), behind kernels_avx512()'s
# check of all four. GCC 12 warns about its own headers' undefined pass-through vectors in the AVX-512 intrinsics.
set(avx512_flags -mavx2 -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND avx512_flags -Wno-maybe-uninitialized)
endif()
mcullm_kernel_folder(x86 "x86_64|AMD64" MCULLM_HAVE_AVX2 -mavx2)
mcullm_kernel_folder(x86_512 "x86_64|AMD64" MCULLM_HAVE_AVX512 ${avx512_flags})
mcullm_kernel_folder(arm "aarch64|arm64" MCULLM_HAVE_NEON)  # NEON is part of every aarch64 CPU: no runtime check
# The AVX-VNNI GEMM (kernels_avxvnni(): AVX2 + F16C + AVX-VNNI, no AVX-512).
set_source_files_properties(${PROJECT_SOURCE_DIR}/src/kernels/x86/gemm_avxvnni.cpp PROPERTIES
                            COMPILE_OPTIONS "-mavx2;-mf16c;-mavxvnni")
# The AVX2 GEMM without VNNI (the avx2 table's matmat_tiled; kernels_avx2() checks F16C).
set_source_files_properties(${PROJECT_SOURCE_DIR}/src/kernels/x86/gemm_avx2.cpp PROPERTIES
                            COMPILE_OPTIONS "-mavx2;-mf16c")

find_package(Threads REQUIRED)
# Host dependencies: nlohmann-json (tokenizer.json reader, the server's JSON), utf8proc (WordPiece
# normalization), cpp-httplib (the server; Debian ships it for pkg-config only).
find_package(nlohmann_json 3 CONFIG QUIET)
if(NOT nlohmann_json_FOUND)
  message(FATAL_ERROR "nlohmann-json (>= 3) not found: install the Debian package nlohmann-json3-dev "
                      "(the tokenizer.json reader and `mcullm serve` use it)")
endif()
find_package(PkgConfig QUIET)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config is missing: it finds utf8proc and cpp-httplib (apt-get install pkg-config)")
endif()
pkg_check_modules(UTF8PROC QUIET IMPORTED_TARGET libutf8proc)
if(NOT UTF8PROC_FOUND)
  message(FATAL_ERROR "utf8proc (pkg-config libutf8proc) not found: install the Debian package libutf8proc-dev "
                      "(the WordPiece tokenizer normalizes text with it)")
endif()
pkg_check_modules(CPP_HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
if(NOT CPP_HTTPLIB_FOUND)
  message(FATAL_ERROR "cpp-httplib is missing (pkg-config cpp-httplib): `mcullm serve` needs it (apt-get install libcpp-httplib-dev)")
endif()
# Asio (standalone, header-only; Debian libasio-dev): the cluster's TCP and serial transports.
find_path(MCULLM_ASIO_INCLUDE_DIR asio.hpp)
if(NOT MCULLM_ASIO_INCLUDE_DIR)
  message(FATAL_ERROR "asio.hpp not found: install the Debian package libasio-dev (the cluster's TCP and serial links use Asio)")
endif()
add_library(mcullm_host STATIC ${MCULLM_HOST_SOURCES})
# utf8proc's static archive when Debian ships it (libutf8proc-dev does): one shared object less to
# load at every start.
find_library(MCULLM_UTF8PROC_STATIC NAMES libutf8proc.a HINTS ${UTF8PROC_LIBRARY_DIRS})
if(MCULLM_UTF8PROC_STATIC AND NOT MCULLM_SANITIZE)
  set(MCULLM_UTF8PROC ${MCULLM_UTF8PROC_STATIC})
else()
  set(MCULLM_UTF8PROC PkgConfig::UTF8PROC)
endif()
target_link_libraries(mcullm_host PUBLIC mcullm_core Threads::Threads nlohmann_json::nlohmann_json
                      PRIVATE ${MCULLM_UTF8PROC})
target_include_directories(mcullm_host PRIVATE ${MCULLM_ASIO_INCLUDE_DIR})

# The freestanding contract, checked at build time: the core also compiles with no C++ standard
# library headers at all (-nostdinc++), as the Xtensa emulator build needs (C headers only).
add_library(mcullm_core_freestanding_check OBJECT ${MCULLM_CORE_SOURCES})
target_include_directories(mcullm_core_freestanding_check PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
target_compile_options(mcullm_core_freestanding_check PRIVATE -nostdinc++ -fno-exceptions -fno-rtti -fno-threadsafe-statics)

# The web page (web/*.html, *.css, *.js) compiled into the server: `mcullm serve` answers / from
# these bytes, whatever the working directory.
set(MCULLM_WEB_FILES index.html style.css app.js md5.js flash.js)
list(TRANSFORM MCULLM_WEB_FILES PREPEND ${PROJECT_SOURCE_DIR}/web/ OUTPUT_VARIABLE MCULLM_WEB_PATHS)
list(JOIN MCULLM_WEB_FILES "\\;" MCULLM_WEB_FILES_ARG)
set(MCULLM_WEB_CPP ${PROJECT_BINARY_DIR}/generated/web_assets_data.cpp)
add_custom_command(
  OUTPUT ${MCULLM_WEB_CPP}
  COMMAND ${CMAKE_COMMAND} -DOUT=${MCULLM_WEB_CPP} -DSRC_DIR=${PROJECT_SOURCE_DIR}/web "-DFILES=${MCULLM_WEB_FILES_ARG}"
          -P ${PROJECT_SOURCE_DIR}/cmake/EmbedWeb.cmake
  DEPENDS ${MCULLM_WEB_PATHS} ${PROJECT_SOURCE_DIR}/cmake/EmbedWeb.cmake
  COMMENT "Embedding web/ into the server")
add_library(mcullm_http STATIC ${MCULLM_HTTP_SOURCES} ${MCULLM_WEB_CPP})
target_link_libraries(mcullm_http PUBLIC mcullm_host PkgConfig::CPP_HTTPLIB)
