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
  find_package(CUDAToolkit REQUIRED)
  set(hints ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib /usr/include
      /usr/lib/x86_64-linux-gnu)
  aisp_python_site_packages(site_packages)
  foreach(dir IN LISTS site_packages)
    list(APPEND hints ${dir}/nvidia/nccl/include ${dir}/nvidia/nccl/lib)
  endforeach()
  find_path(AISP_NCCL_INCLUDE_DIR nccl.h HINTS ${hints} NO_CACHE)
  find_library(AISP_NCCL_LIBRARY NAMES libnccl.so.2 nccl HINTS ${hints} NO_CACHE)
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
