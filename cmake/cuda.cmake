# The CUDA backend is a plugin library loaded at run time (see NOTES.md: linking
# cuBLAS into the main binary breaks prometheus-cpp's exposer). It is built only
# when nvcc is found; otherwise everything else builds and CUDA tests SKIP.
set(BROOK_HAVE_CUDA OFF)
if(NOT BROOK_CUDA STREQUAL "OFF")
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
message(STATUS "brook: CUDA plugin ${BROOK_HAVE_CUDA}")
