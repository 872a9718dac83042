# BROOK_SANITIZE=address,undefined or thread instruments everything we build.
if(BROOK_SANITIZE)
  set(_san_flags -fsanitize=${BROOK_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options(${_san_flags})
  add_link_options(${_san_flags})
  message(STATUS "brook: sanitizers ${BROOK_SANITIZE}")
endif()
