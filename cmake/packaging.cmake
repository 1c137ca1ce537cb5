# Installing aisp like a tool (docs/install.md): `cmake --install <build> --prefix <dir>` and
# `cpack -G DEB` put the same tree into a prefix:
#   bin/aisp                                     stripped by `--strip` / the package
#   lib/aisp/                                    the CUDA libraries aisp needs, private to it
#   share/aisp/chapters/chNN_*/<ladder>/         expectations_*.json and READMEs (cli/chapters_dir.cpp)
#   share/bash-completion/completions/aisp       generated from the binary (cli/cmd_completion.cpp)
#   share/doc/aisp/README.md
# The paths are fixed, not GNUInstallDirs': the binary finds its libraries at $ORIGIN/../lib/aisp and
# its data at <exe dir>/../share/aisp, so bin/, lib/aisp and share/aisp must stay siblings.
find_package(CUDAToolkit REQUIRED)

set(AISP_INSTALL_PRIVATE_LIBDIR lib/aisp)

# --- the binary ---------------------------------------------------------------------------------
# DT_RPATH, not the linker's default DT_RUNPATH: a RUNPATH serves only the executable's own lookups,
# while libnvrtc (which has none) must also find libnvrtc-builtins.so in the private folder when it
# loads it at run time; the executable's DT_RPATH is searched for that too. Checked in a clean Debian 12:
# with RUNPATH, NVRTC fails with "failed to open libnvrtc-builtins.so.13.0". The price: an RPATH comes
# before LD_LIBRARY_PATH, so the bundled libraries cannot be swapped that way (rebuild instead).
target_link_options(aisp PRIVATE "LINKER:--disable-new-dtags")
set_target_properties(aisp PROPERTIES INSTALL_RPATH "$ORIGIN/../${AISP_INSTALL_PRIVATE_LIBDIR}")
install(TARGETS aisp RUNTIME DESTINATION bin)

# --- the CUDA libraries ---------------------------------------------------------------------------
# A machine with only the NVIDIA driver (libcuda, libnvidia-ml: never bundled, they must match the
# kernel module) lacks the toolkit's libraries, so the package carries the ones aisp uses. NVIDIA's
# CUDA EULA (Attachment A, "Redistributable Software") lists cuBLAS, cuBLASLt, NVRTC (with its builtins
# library) and CUPTI as redistributable with an application. cudart is linked statically.
#   linked:    libcublas, libcublasLt (ladders' vendor references), libnvrtc (ch14:jit_specialize)
#   dlopen'ed: libnvrtc-builtins (by libnvrtc, to compile), libcupti (the launch audit of every
#              `bench run`; without it results are audited by timing only)
# Not carried: cuDNN (ch18's vendor_cudnn only, ~1 GB; it loads libcudnn.so.9 from $AISP_CUDNN_LIBRARY
# or the loader's path and reports SKIPPED otherwise), cuFile (ch05's 03_cufile, $AISP_CUFILE_LIB),
# NVML (part of the driver). A new CUDA library linked into aisp fails the install test (its ldd check)
# until it is listed here.
set(aisp_cuda_major ${CUDAToolkit_VERSION_MAJOR})
set(aisp_bundled_cuda_libraries
  libcublas.so.${aisp_cuda_major}
  libcublasLt.so.${aisp_cuda_major}
  libnvrtc.so.${aisp_cuda_major}
  libnvrtc-builtins.so.${aisp_cuda_major}.${CUDAToolkit_VERSION_MINOR}
  libcupti.so.${aisp_cuda_major})
get_target_property(aisp_cupti_location CUDA::cupti IMPORTED_LOCATION)
get_filename_component(aisp_cupti_dir "${aisp_cupti_location}" DIRECTORY)
foreach(soname IN LISTS aisp_bundled_cuda_libraries)
  find_file(aisp_lib_${soname} ${soname} HINTS ${CUDAToolkit_LIBRARY_DIR} ${aisp_cupti_dir}
            NO_DEFAULT_PATH NO_CACHE)
  if(NOT aisp_lib_${soname})
    message(FATAL_ERROR "packaging: ${soname} not found in ${CUDAToolkit_LIBRARY_DIR} or ${aisp_cupti_dir}")
  endif()
  # The soname is often a link to libX.so.13.0.N: install the file itself under the soname.
  get_filename_component(real "${aisp_lib_${soname}}" REALPATH)
  install(FILES "${real}" DESTINATION ${AISP_INSTALL_PRIVATE_LIBDIR} RENAME ${soname})
endforeach()

# --- data and completion ----------------------------------------------------------------------------
# What commands read from the chapters: the stored expectations (bench check, bench compare's
# context, report) and the ladder READMEs (report --update-readme). Sources stay in the repository.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/chapters/ DESTINATION share/aisp/chapters
        FILES_MATCHING PATTERN "expectations_*.json" PATTERN "README.md")
install(FILES ${AISP_BASH_COMPLETION} DESTINATION share/bash-completion/completions RENAME aisp)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION share/doc/aisp)

# --- the Debian package -------------------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME aisp)
set(CPACK_PACKAGE_VENDOR "aisp")
set(CPACK_PACKAGE_CONTACT "aisp maintainers")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "GPU performance lab: benchmark harness, kernel ladders and tools for CUDA (Hopper)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES TRUE)  # strips bin/aisp (install(TARGETS)); NVIDIA's libraries ship stripped
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# Debian's libraries (libcpp-httplib0.11, libsqlite3-0, libssl3, ...) as dpkg-shlibdeps finds them; the
# bundled CUDA libraries are the package's own, found through the binary's $ORIGIN RPATH in the staging
# tree, and the private folder is named so that dpkg-shlibdeps never asks a package for them.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS usr/${AISP_INSTALL_PRIVATE_LIBDIR})
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "bash-completion")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "\
aisp validates and times CUDA kernels against references and measured hardware ceilings, runs a
curriculum of kernel ladders (baseline, one idea per step, vendor reference), gates regressions
against stored expectations and writes reports. Benchmarks need an NVIDIA GPU and its driver.
Listing targets and the tools that need no GPU work anywhere. Carries the CUDA libraries it uses
(cuBLAS, cuBLASLt, NVRTC, CUPTI) in /usr/lib/aisp.")
# The package version carries the commit the binary was built from, read at `cpack` time from the header
# the build wrote (cmake/git_info.cmake), so it matches `aisp --version` even after commits that did not
# re-run configure: 0.1.0+git1a2b3c4 (Debian orders it after 0.1.0).
set(CPACK_AISP_BUILD_INFO ${AISP_GIT_INFO_HPP})
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_BINARY_DIR}/aisp_cpack_config.cmake)
file(CONFIGURE OUTPUT ${CPACK_PROJECT_CONFIG_FILE} @ONLY CONTENT [=[
# Generated by cmake/packaging.cmake: run by cpack before it builds a package.
if(EXISTS "${CPACK_AISP_BUILD_INFO}")
  file(STRINGS "${CPACK_AISP_BUILD_INFO}" aisp_sha_line REGEX "git_sha = ")
  file(STRINGS "${CPACK_AISP_BUILD_INFO}" aisp_dirty_line REGEX "git_dirty = ")
  if(aisp_sha_line MATCHES "\"([0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f])")
    set(CPACK_DEBIAN_PACKAGE_VERSION "${CPACK_PACKAGE_VERSION}+git${CMAKE_MATCH_1}")
    if(aisp_dirty_line MATCHES "\"true\"")
      string(APPEND CPACK_DEBIAN_PACKAGE_VERSION ".dirty")
    endif()
  endif()
endif()
]=])
include(CPack)

# --- tests ---------------------------------------------------------------------------------------------
# Both tests look for ch07's targets and data: a targeted build without ch07 (AISP_CHAPTERS) leaves them
# out instead of failing them (found on an H100 run of a build limited to ch10, ch18 and ch19).
if(AISP_BUILD_TESTS AND (NOT AISP_CHAPTERS OR AISP_CHAPTERS MATCHES "ch07_memory_access"))
  # Installs this build into a scratch prefix and runs the installed aisp from outside the source tree,
  # with the source tree hidden (AISP_SOURCE_DIR=/nonexistent): version, list-targets, the data found
  # in the prefix, the libraries resolved from lib/aisp, the completion script in place.
  string(REPLACE ";" "," aisp_bundled_list "${aisp_bundled_cuda_libraries}")  # one argument
  add_test(NAME install_tree
           COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR}
                   -DPREFIX=${CMAKE_BINARY_DIR}/install-test -DCUDA_LIBRARY_DIR=${CUDAToolkit_LIBRARY_DIR}
                   -DBUNDLED=${aisp_bundled_list}
                   -P ${PROJECT_SOURCE_DIR}/cmake/check_install.cmake)
  set_tests_properties(install_tree PROPERTIES LABELS cpu TIMEOUT 300 RUN_SERIAL TRUE)
  # The generated completion script: bash accepts it, and it completes commands, options and targets.
  add_test(NAME bash_completion
           COMMAND bash ${PROJECT_SOURCE_DIR}/cmake/check_completion.sh $<TARGET_FILE:aisp>)
  set_tests_properties(bash_completion PROPERTIES LABELS cpu)
endif()
