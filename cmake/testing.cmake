# dp_add_test(NAME SOURCES a_test.cc ... LIBS dp_x ...)
# One gtest binary per call; ctest runs it as one test with a per-binary timeout, so a hang fails
# fast instead of eating CI's budget. Labels let CI pick subsets (e.g. -L tsan).
function(dp_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT DUALPATH_BUILD_TESTS)
    return()
  endif()
  add_executable(${name} ${T_SOURCES})
  dp_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
                       ENVIRONMENT "DUALPATH_SOURCE_DIR=${PROJECT_SOURCE_DIR};DUALPATH_SHARED_DIR=${PROJECT_SOURCE_DIR}/../shared")
  if(DUALPATH_SANITIZE MATCHES "thread")
    # UCX's memory-event hooks (UCM patching mmap/munmap/madvise) crash under ThreadSanitizer's
    # interceptors, at the first registration or when a thread's stack is released; without them
    # UCX only skips its registration cache. Child processes (nodes, peers) inherit the setting.
    set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT "UCX_MEM_EVENTS=no")
  endif()
endfunction()
