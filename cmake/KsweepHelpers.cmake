# Warnings for ksweep's own targets (not for dependencies).
function(ksweep_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow>)
    if(KSWEEP_ENABLE_NATIVE)
      # The host kernels are vectorised loops: let them use the CPU's full vector width.
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
    endif()
  endif()
endfunction()
