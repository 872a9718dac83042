# BROOK_SANITIZE=address,undefined or thread instruments everything we build.
if(BROOK_SANITIZE)
  set(_san_flags -fsanitize=${BROOK_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options(${_san_flags})
  add_link_options(${_san_flags})
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
