# Provenance: the git SHA and dirty flag are read at *build* time (not configure time), so a binary
# built after an edit says so. The generated header changes only when the values change.
set(AISP_GIT_INFO_HPP ${CMAKE_BINARY_DIR}/generated/aisp_build_info.hpp)
add_custom_target(aisp_git_info ALL
  COMMAND ${CMAKE_COMMAND}
          -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${AISP_GIT_INFO_HPP}
          -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
          -DCXX_ID=${CMAKE_CXX_COMPILER_ID}-${CMAKE_CXX_COMPILER_VERSION}
          "-DCUDA_ID=${CMAKE_CUDA_COMPILER_ID}-${CMAKE_CUDA_COMPILER_VERSION}"
          "-DCUDA_ARCHS=${CMAKE_CUDA_ARCHITECTURES}"
          -P ${PROJECT_SOURCE_DIR}/cmake/write_build_info.cmake
  BYPRODUCTS ${AISP_GIT_INFO_HPP}
  COMMENT "Reading git SHA and dirty flag")
