# Version and git commit, baked into `brook --version`, metrics and manifests.
# $BROOK_GIT_COMMIT wins: an image build has no .git (docker/build.sh passes
# the commit in as a build argument).
if(NOT "$ENV{BROOK_GIT_COMMIT}" STREQUAL "")
  set(BROOK_GIT_COMMIT "$ENV{BROOK_GIT_COMMIT}")
else()
  execute_process(COMMAND git rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    OUTPUT_VARIABLE BROOK_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
if(NOT BROOK_GIT_COMMIT)
  set(BROOK_GIT_COMMIT "unknown")
endif()
configure_file(${PROJECT_SOURCE_DIR}/common/version.h.in ${PROJECT_BINARY_DIR}/common/version_gen.h @ONLY)
