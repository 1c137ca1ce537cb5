# The install tree works on its own (CTest install_tree; cmake/packaging.cmake). Run as:
#   cmake -DBUILD_DIR=<build> -DPREFIX=<scratch prefix> -DCUDA_LIBRARY_DIR=<toolkit lib dir>
#         -DBUNDLED=<comma-separated sonames of lib/aisp> -P check_install.cmake
# Installs (stripped) into PREFIX, then runs PREFIX/bin/aisp from a folder outside the source tree with
# AISP_SOURCE_DIR=/nonexistent, so that the checkout it was built from is not found and the installed
# data must be: the situation of the .deb on another machine. Removes PREFIX when everything passed.
foreach(var BUILD_DIR PREFIX CUDA_LIBRARY_DIR BUNDLED)
  if(NOT ${var})
    message(FATAL_ERROR "pass -D${var}=...")
  endif()
endforeach()

string(REPLACE "," ";" BUNDLED "${BUNDLED}")
file(REMOVE_RECURSE "${PREFIX}")
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${PREFIX}" --strip
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
string(TIMESTAMP t1 "%s")
math(EXPR seconds "${t1} - ${t0}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc}): ${err}")
endif()
message(STATUS "installed into ${PREFIX} in ${seconds} s")

set(aisp "${PREFIX}/bin/aisp")
set(failures 0)
macro(fail text)
  message(SEND_ERROR "${text}")
  math(EXPR failures "${failures} + 1")
endmacro()

set(work "${PREFIX}/cwd")  # no chapters/ here: the fallback ./chapters must not be what is found
file(MAKE_DIRECTORY "${work}")
function(run_aisp out_var rc_var)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env AISP_SOURCE_DIR=/nonexistent "${aisp}" ${ARGN}
                  WORKING_DIRECTORY "${work}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 60)
  set(${out_var} "${out}${err}" PARENT_SCOPE)
  set(${rc_var} "${rc}" PARENT_SCOPE)
endfunction()

# --version: the release, the commit, and the chapters found in the prefix.
run_aisp(out rc --version)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^aisp [0-9]+\\.[0-9]+\\.[0-9]+ \\(git [0-9a-f]+")
  fail("aisp --version: exit ${rc}, output: ${out}")
endif()
file(REAL_PATH "${PREFIX}/share/aisp/chapters" expected_chapters)
if(NOT out MATCHES "chapters: ([^\n]*) \\(installed\\)")
  fail("aisp --version does not report installed chapters: ${out}")
else()
  file(REAL_PATH "${CMAKE_MATCH_1}" found_chapters)
  if(NOT found_chapters STREQUAL expected_chapters)
    fail("aisp found its chapters in ${found_chapters}, expected ${expected_chapters}")
  endif()
endif()

# list-targets: the registry works from the installed binary.
run_aisp(out rc bench list-targets)
if(NOT rc EQUAL 0 OR NOT out MATCHES "ch07:copy:03_vectorized")
  fail("aisp bench list-targets: exit ${rc}, output starts: ${out}")
endif()

# The data the commands read: every ladder's expectations and READMEs.
file(GLOB_RECURSE expectations RELATIVE "${PREFIX}/share/aisp/chapters"
     "${PREFIX}/share/aisp/chapters/*/expectations_*.json")
list(LENGTH expectations n_expectations)
if(n_expectations EQUAL 0 OR NOT EXISTS "${PREFIX}/share/aisp/chapters/ch07_memory_access/copy/README.md")
  fail("no expectations files (${n_expectations}) or READMEs under ${PREFIX}/share/aisp/chapters")
endif()

# The libraries: each bundled one present, and nothing resolved from the toolkit's folder.
foreach(soname IN LISTS BUNDLED)
  if(NOT EXISTS "${PREFIX}/lib/aisp/${soname}")
    fail("missing ${PREFIX}/lib/aisp/${soname}")
  endif()
endforeach()
find_program(LDD ldd)
if(LDD)
  execute_process(COMMAND ${LDD} "${aisp}" OUTPUT_VARIABLE ldd_out RESULT_VARIABLE rc)
  file(REAL_PATH "${CUDA_LIBRARY_DIR}" cuda_real)
  string(REGEX MATCHALL "=> [^ ]+" resolved "${ldd_out}")
  foreach(entry IN LISTS resolved)
    string(SUBSTRING "${entry}" 3 -1 path)
    if(path STREQUAL "not")
      fail("ldd: a library of aisp is not found:\n${ldd_out}")
    elseif(EXISTS "${path}")
      file(REAL_PATH "${path}" real)
      if(real MATCHES "^${cuda_real}/" OR path MATCHES "^${CUDA_LIBRARY_DIR}/")
        fail("installed aisp resolves ${path} from the toolkit, not lib/aisp (bundle it in cmake/packaging.cmake)")
      endif()
    endif()
  endforeach()
endif()

# Stripped: no .debug_info left in the installed binary.
find_program(READELF readelf)
if(READELF)
  execute_process(COMMAND ${READELF} -S --wide "${aisp}" OUTPUT_VARIABLE sections)
  if(sections MATCHES "\\.debug_info")
    fail("${aisp} is not stripped")
  endif()
  execute_process(COMMAND ${READELF} -d "${aisp}" OUTPUT_VARIABLE dynamic)
  if(NOT dynamic MATCHES "\\(RPATH\\)[^\n]*\\$ORIGIN/\\.\\./lib/aisp")
    fail("${aisp} lacks DT_RPATH $ORIGIN/../lib/aisp:\n${dynamic}")
  endif()
endif()

if(NOT EXISTS "${PREFIX}/share/bash-completion/completions/aisp")
  fail("no bash completion installed")
endif()

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} install check(s) failed; the tree is left in ${PREFIX}")
endif()
file(REMOVE_RECURSE "${PREFIX}")
message(STATUS "install tree ok (${n_expectations} expectations files)")
