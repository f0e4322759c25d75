# dp_add_test(NAME SOURCES a_test.cc ... LIBS dp_x ...)
# One gtest binary per call; ctest runs it as one test with a per-binary timeout, so a hang fails
# fast instead of eating CI's budget. Labels let CI pick subsets (e.g. -L tsan).
#   COST n       ctest starts costlier tests first under -j (a clean CI checkout has no timing
#                history, so without it the longest suite may start last and run alone)
#   SPLIT f ...  each gtest filter becomes a ctest entry of its own, NAME_split<k>, and NAME runs
#                the rest, so that -j 2 runs a long binary's halves side by side
function(dp_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT;COST" "SOURCES;LIBS;LABELS;SPLIT" ${ARGN})
  if(NOT DUALPATH_BUILD_TESTS)
    return()
  endif()
  add_executable(${name} ${T_SOURCES})
  dp_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_COST)
    set(T_COST 0)
  endif()
  set(entries "")
  set(rest "")
  set(k 0)
  foreach(filter IN LISTS T_SPLIT)
    math(EXPR k "${k} + 1")
    add_test(NAME ${name}_split${k} COMMAND ${name} --gtest_brief=1 --gtest_filter=${filter})
    list(APPEND entries ${name}_split${k})
    string(APPEND rest ":${filter}")
  endforeach()
  if(rest)
    string(SUBSTRING "${rest}" 1 -1 rest)
    add_test(NAME ${name} COMMAND ${name} --gtest_brief=1 --gtest_filter=-${rest})
  else()
    add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
  endif()
  list(APPEND entries ${name})
  foreach(entry IN LISTS entries)
    set_tests_properties(${entry} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}" COST ${T_COST}
                         ENVIRONMENT "DUALPATH_SOURCE_DIR=${PROJECT_SOURCE_DIR};DUALPATH_SHARED_DIR=${PROJECT_SOURCE_DIR}/../shared")
    if(DUALPATH_SANITIZE MATCHES "thread")
      # UCX's memory-event hooks (UCM patching mmap/munmap/madvise) crash under ThreadSanitizer's
      # interceptors, at the first registration or when a thread's stack is released; without
      # them UCX only skips its registration cache. Child processes (nodes, peers) inherit it.
      set_property(TEST ${entry} APPEND PROPERTY ENVIRONMENT "UCX_MEM_EVENTS=no")
    endif()
  endforeach()
endfunction()
