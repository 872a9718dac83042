# Common compile flags and the brook_cc_library() helper.
set(BROOK_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wno-unused-parameter
    -Wno-missing-field-initializers -Werror=unused-result -Werror=return-type)
if(BROOK_WERROR)
  list(APPEND BROOK_WARNING_FLAGS -Werror)
endif()

# brook_unity(target): batch the target's sources when BROOK_UNITY is on.
function(brook_unity target)
  if(BROOK_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON
                                               UNITY_BUILD_BATCH_SIZE ${BROOK_UNITY_BATCH})
  endif()
endfunction()

# brook_cc_library(NAME name SRCS ... DEPS ...): one library per folder; DEPS
# mirror the layers of docs/architecture.md so the build enforces the layering.
function(brook_cc_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  if(NOT ARG_SRCS)
    # A folder whose issue has not come yet: keep the target so dependents link.
    set(ARG_SRCS ${PROJECT_BINARY_DIR}/brook_empty.cc)
    file(WRITE ${ARG_SRCS} "// empty\n")
  endif()
  add_library(${ARG_NAME} STATIC ${ARG_SRCS})
  target_include_directories(${ARG_NAME} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_options(${ARG_NAME} PRIVATE ${BROOK_WARNING_FLAGS})
  target_link_libraries(${ARG_NAME} PUBLIC ${ARG_DEPS})
  brook_unity(${ARG_NAME})
endfunction()

# Flags for test code alone: BROOK_TEST_OPT, and no libFuzzer coverage
# instrumentation in a fuzzer build (only the fuzz targets use it; in the
# test sources it cost as much compile time as ASan and UBSan together).
set(BROOK_TEST_ONLY_FLAGS ${BROOK_TEST_OPT})
if(BROOK_BUILD_FUZZERS)
  list(APPEND BROOK_TEST_ONLY_FLAGS -fno-sanitize=fuzzer-no-link)
endif()

# brook_cc_test(NAME name SRCS ... DEPS ... [LABELS ...]): a GoogleTest binary
# whose cases are registered with CTest one by one, run from the repo root so
# tests can reach ../shared/data.
function(brook_cc_test)
  cmake_parse_arguments(ARG "SERIAL" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  # SERIAL: CTest runs these tests with nothing beside them (measurements
  # that other tests' load would distort).
  set(_serial "")
  if(ARG_SERIAL)
    set(_serial RUN_SERIAL TRUE)
  endif()
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_compile_options(${ARG_NAME} PRIVATE ${BROOK_WARNING_FLAGS} ${BROOK_TEST_ONLY_FLAGS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  if(BROOK_UNITY_TESTS)
    set_target_properties(${ARG_NAME} PROPERTIES UNITY_BUILD ON
                                                 UNITY_BUILD_BATCH_SIZE ${BROOK_UNITY_BATCH})
  endif()
  include(GoogleTest)
  gtest_discover_tests(${ARG_NAME}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT} ${_serial}
               ENVIRONMENT "BROOK_BINARY=$<TARGET_FILE:brook>;BROOK_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()
