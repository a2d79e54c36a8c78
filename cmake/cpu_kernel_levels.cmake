# The CPU kernel, compiled once per instruction-set level (src/cpu/isa.hpp) and chosen at run time,
# so one binary runs the AVX-512 kernel where there is AVX-512 and still starts on an SSE2 machine.
#
# Each level is an object library built with its own -march, with ATTNFUSE_CPU_ISA_NS naming the
# namespace its code lives in. Its objects are then partially linked into one object in which every
# symbol outside that namespace is made local: the standard library's templates instantiated by
# the level (std::vector growth, std::stable_sort's buffers) are compiled with its instructions,
# and as shared weak definitions the linker could keep the AVX-512 copy for the whole program.
#
# In:  ATTNFUSE_NATIVE (adds -mtune=native to the x86-64 levels).
# Out: ATTNFUSE_CPU_KERNEL_SOURCES (compiled here, not into the library directly),
#      ATTNFUSE_CPU_LEVEL_OBJECTS (the library's sources), ATTNFUSE_CPU_LEVEL_DEFINITIONS (for
#      src/cpu/isa.cpp: which levels exist).

set(ATTNFUSE_CPU_KERNEL_SOURCES ${CMAKE_SOURCE_DIR}/src/cpu/fused_kernel.cpp ${CMAKE_SOURCE_DIR}/src/cpu/unfused.cpp)

if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(levels avx512 avx2 baseline)
  set(flags_avx512 -march=x86-64-v4)
  set(flags_avx2 -march=x86-64-v3)
  set(flags_baseline -march=x86-64)
  if(ATTNFUSE_NATIVE)
    foreach(level IN LISTS levels)
      list(APPEND flags_${level} -mtune=native)
    endforeach()
  endif()
else()
  set(levels baseline)  # the library's own flags (-march=native with ATTNFUSE_NATIVE)
  set(flags_baseline "")
endif()
set(enum_avx512 Avx512)
set(enum_avx2 Avx2)
set(enum_baseline Baseline)

find_program(ATTNFUSE_OBJCOPY NAMES objcopy REQUIRED)
find_program(ATTNFUSE_LD NAMES ld REQUIRED)

set(ATTNFUSE_CPU_LEVEL_OBJECTS "")
set(ATTNFUSE_CPU_LEVEL_DEFINITIONS "")
foreach(level IN LISTS levels)
  set(target attnfuse_cpu_${level})
  add_library(${target} OBJECT ${ATTNFUSE_CPU_KERNEL_SOURCES})
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_BINARY_DIR}/generated
                                               ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(${target} PRIVATE OpenMP::OpenMP_CXX fmt::fmt)
  target_compile_definitions(${target} PRIVATE ATTNFUSE_CPU_ISA_NS=isa_${level}
                                               ATTNFUSE_CPU_ISA_LEVEL=${enum_${level}})
  # The kernel is the product: let the compiler vectorize it hard. -Wno-psabi: the 64-byte vector
  # type passes differently without AVX-512, which matters only across levels, and none is crossed.
  target_compile_options(${target} PRIVATE -O3 -ffp-contract=fast -fno-math-errno -Wno-psabi ${flags_${level}})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)

  # _ZN8attnfuse3cpu<length>isa_<level>: the mangled prefix of the level's namespace.
  string(LENGTH "isa_${level}" ns_length)
  set(object ${CMAKE_BINARY_DIR}/cpu_kernel/${level}.o)
  add_custom_command(OUTPUT ${object}
    COMMAND ${ATTNFUSE_LD} -r --force-group-allocation -o ${object}.partial $<TARGET_OBJECTS:${target}>
    COMMAND ${ATTNFUSE_OBJCOPY} --wildcard --keep-global-symbol=_ZN8attnfuse3cpu${ns_length}isa_${level}*
            ${object}.partial ${object}
    DEPENDS $<TARGET_OBJECTS:${target}>
    COMMAND_EXPAND_LISTS VERBATIM
    COMMENT "CPU kernel, ${level}: one object, the symbols outside its namespace local")
  list(APPEND ATTNFUSE_CPU_LEVEL_OBJECTS ${object})
  string(TOUPPER ${level} upper)
  list(APPEND ATTNFUSE_CPU_LEVEL_DEFINITIONS ATTNFUSE_CPU_HAVE_${upper})
endforeach()
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/cpu_kernel)
