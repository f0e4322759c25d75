# Project-wide warnings; third-party headers come in as SYSTEM so they never trip these.
set(DP_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
    -Wimplicit-fallthrough)
# Clang checks the locking annotations (common/thread_annotations.h); a finding is an error in
# every clang build (CI's fuzz build is one), since a lock that the analysis cannot see is a bug
# or a missing annotation.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  list(APPEND DP_WARNINGS -Wthread-safety -Werror=thread-safety)
endif()
if(DUALPATH_WERROR)
  list(APPEND DP_WARNINGS -Werror)
endif()

if(DUALPATH_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link)
  add_compile_definitions(DP_FUZZING=1)
endif()
if(DUALPATH_SANITIZE)
  string(REPLACE "," ";" _dp_sans "${DUALPATH_SANITIZE}")
  foreach(_s IN LISTS _dp_sans)
    add_compile_options(-fsanitize=${_s})
    add_link_options(-fsanitize=${_s})
  endforeach()
  add_compile_options(-fno-omit-frame-pointer -fno-sanitize-recover=all)
  # Lets a test scale down its repetitions (not its checks) where every instruction costs 2-5x.
  add_compile_definitions(DP_SANITIZED=1)
  if("thread" IN_LIST _dp_sans)
    # target_clones resolvers (ifuncs) run during relocation, before the TSan runtime exists,
    # and crash instrumented: TSan builds compile the baseline kernels only.
    add_compile_definitions(DP_NO_TARGET_CLONES)
  endif()
endif()

# dp_target_defaults(target): warnings and include paths every project target gets.
function(dp_target_defaults target)
  target_compile_options(${target} PRIVATE ${DP_WARNINGS})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
endfunction()
