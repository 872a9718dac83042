# The CUDA backend is a plugin library loaded at run time (see NOTES.md: linking
# cuBLAS into the main binary breaks prometheus-cpp's exposer). It is built only
# when nvcc is found; otherwise everything else builds and CUDA tests SKIP.
# BROOK_CUDA=AUTO (default) builds it when nvcc is found, ON requires it, OFF
# skips it. Sanitizer and fuzzer builds skip it under AUTO: their flags are
# host-compiler flags nvcc does not take, and the CUDA runtime is not
# instrumented anyway.
set(BROOK_HAVE_CUDA OFF)
if(BROOK_SANITIZE OR BROOK_BUILD_FUZZERS)
  if(BROOK_CUDA STREQUAL "ON")
    message(FATAL_ERROR "BROOK_CUDA=ON cannot be combined with BROOK_SANITIZE or BROOK_BUILD_FUZZERS")
  endif()
elseif(NOT BROOK_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(BROOK_HAVE_CUDA ON)
  elseif(BROOK_CUDA STREQUAL "ON")
    message(FATAL_ERROR "BROOK_CUDA=ON but no CUDA compiler was found")
  endif()
endif()

if(BROOK_HAVE_CUDA)
  # One architecture keeps the nvcc step cheap (CI has 2 cores). 90 = H100/H200
  # (SASS plus PTX, which newer GPUs JIT); a GPU older than the list fails at
  # backend creation with a message naming the value to rebuild with.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "GPU architectures of the CUDA plugin")
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "brook: CUDA plugin ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "brook: CUDA plugin OFF")
endif()
