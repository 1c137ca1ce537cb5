# ch04's NCCL lookup, for a ladder with a vendor_nccl.cu step: include() this file, then call
#   aisp_ch04_nccl_step(<ladder name for messages> <variable holding the ladder's sources>)
# before aisp_add_ladder (ch04:allreduce and ch04:collectives do).
#
# vendor_nccl needs NCCL's header at build time only: it loads libnccl.so.2 with dlopen when its setup()
# runs (common/nccl_library.hpp), so a binary built here starts on a machine without NCCL (the step is
# then SKIPPED, saying so) and a carried binary finds the library where that machine keeps it
# ($AISP_NCCL_LIBRARY). Header and library are looked for in the CUDA toolkit, the system and Python's
# site-packages (the nvidia-nccl-cu13 wheel PyTorch installs: nvidia/nccl/include and nvidia/nccl/lib).
# Without the header, vendor_nccl.cu leaves the sources, with a message.
function(aisp_ch04_nccl_step ladder srcs_var)
  aisp_ch04_find_nccl(AISP_NCCL_INCLUDE_DIR AISP_NCCL_LIBRARY)
  set(srcs ${${srcs_var}})
  if(AISP_NCCL_INCLUDE_DIR)
    message(STATUS "${ladder}: vendor_nccl with NCCL's header in ${AISP_NCCL_INCLUDE_DIR}, library hint "
                   "${AISP_NCCL_LIBRARY}")
    # Source properties belong to this directory, where the ladder's target is made next.
    set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/vendor_nccl.cu PROPERTIES
                                INCLUDE_DIRECTORIES ${AISP_NCCL_INCLUDE_DIR}
                                COMPILE_DEFINITIONS "AISP_NCCL_LIBRARY_HINT=\"${AISP_NCCL_LIBRARY}\"")
  else()
    list(FILTER srcs EXCLUDE REGEX "/vendor_nccl\\.cu$")
    message(STATUS "${ladder}: building without vendor_nccl: no nccl.h in the CUDA toolkit, /usr/include or "
                   "Python's nvidia/nccl/include (apt install libnccl-dev, or pip install nvidia-nccl-cu13)")
  endif()
  set(${srcs_var} ${srcs} PARENT_SCOPE)
endfunction()

# For a ladder whose every step calls NCCL (ch04:overlap), where a missing nccl.h leaves nothing to build:
#   aisp_ch04_nccl_ladder(<ladder name for messages> NAME <name> SOURCES <sources> [LIBRARIES <libraries>])
# makes the ladder as aisp_add_ladder(NAME ... SOURCES ... LIBRARIES ...) does, with NCCL's header on the
# include path of all its sources and the library found here as the run-time hint (common/nccl_library.hpp
# still loads it with dlopen: without it the steps are SKIPPED). Without nccl.h it makes nothing and says
# so: the ladder's GPU test is then left out too (tests/gpu/CMakeLists.txt builds a gpu_test_*.cpp only
# beside a ladder target), its CPU test (host code, no NCCL) stays.
function(aisp_ch04_nccl_ladder ladder)
  cmake_parse_arguments(L "" "NAME" "SOURCES;LIBRARIES" ${ARGN})
  aisp_ch04_find_nccl(include library)
  if(NOT include)
    message(STATUS "${ladder}: left out of this build: every step calls NCCL, and there is no nccl.h in the CUDA "
                   "toolkit, /usr/include or Python's nvidia/nccl/include (apt install libnccl-dev, or pip install "
                   "nvidia-nccl-cu13)")
    return()
  endif()
  message(STATUS "${ladder}: NCCL's header in ${include}, library hint ${library}")
  aisp_add_ladder(NAME ${L_NAME} SOURCES ${L_SOURCES} LIBRARIES ${L_LIBRARIES} ${CMAKE_DL_LIBS})
  target_include_directories(aisp_ladder_${L_NAME} PRIVATE ${include})
  target_compile_definitions(aisp_ladder_${L_NAME} PRIVATE "AISP_NCCL_LIBRARY_HINT=\"${library}\"")
endfunction()

# NCCL's header folder and library into `include_var` and `library_var` (each empty when not found), in
# the CUDA toolkit, the system and Python's site-packages (the nvidia-nccl-cu13 wheel PyTorch installs).
function(aisp_ch04_find_nccl include_var library_var)
  find_package(CUDAToolkit REQUIRED)
  set(hints ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib /usr/include
      /usr/lib/x86_64-linux-gnu)
  aisp_python_site_packages(site_packages)
  foreach(dir IN LISTS site_packages)
    list(APPEND hints ${dir}/nvidia/nccl/include ${dir}/nvidia/nccl/lib)
  endforeach()
  unset(nccl_include)  # NO_CACHE searches only for a variable not yet set, and a function sees its caller's
  unset(nccl_library)
  find_path(nccl_include nccl.h HINTS ${hints} NO_CACHE)
  find_library(nccl_library NAMES libnccl.so.2 nccl HINTS ${hints} NO_CACHE)
  set(${include_var} "" PARENT_SCOPE)
  set(${library_var} "" PARENT_SCOPE)
  if(nccl_include)
    set(${include_var} ${nccl_include} PARENT_SCOPE)
  endif()
  if(nccl_library)
    set(${library_var} ${nccl_library} PARENT_SCOPE)
  endif()
endfunction()
