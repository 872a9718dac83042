# BROOK_SANITIZE=address,undefined or thread instruments everything we build.
if(BROOK_SANITIZE)
  set(_san_flags -fsanitize=${BROOK_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options(${_san_flags})
  add_link_options(${_san_flags})
  # ASan + UBSan executables link position-dependent: as PIEs, the loader
  # applied ~1.3 M relocations to their instrumentation data (35 MB of
  # .data at -O0) on every start, ~0.2 s of the ~0.4 s each of the ~800 test
  # processes and every spawned `brook` took to start. TSan keeps PIE, which
  # its memory layout expects.
  if(NOT BROOK_SANITIZE MATCHES "thread")
    add_link_options(-no-pie)
  endif()
  message(STATUS "brook: sanitizers ${BROOK_SANITIZE}")
endif()

# Fuzzer builds instrument every library for coverage (fuzzer-no-link) and
# ASan+UBSan; only the fuzz executables link libFuzzer's main.
if(BROOK_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "BROOK_BUILD_FUZZERS needs clang (CC=clang CXX=clang++)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
