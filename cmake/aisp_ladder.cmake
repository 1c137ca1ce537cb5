# aisp_add_ladder(NAME <chNN_ladder> SOURCES <variant .cu files> [LIBRARIES <libs>])
#
# One helper per concept (docs/style.md, rule 18). A ladder is an OBJECT library: its variants register
# themselves through static objects, which a static library would let the linker drop. Every binary that
# embeds the ladders (aisp, aisp_gpu_tests, aisp_selftest) links the objects of all of them, and the GPU
# correctness test (tests/gpu) then covers every registered variant automatically.
function(aisp_add_ladder)
  cmake_parse_arguments(L "" "NAME" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT L_NAME OR NOT L_SOURCES)
    message(FATAL_ERROR "aisp_add_ladder needs NAME and SOURCES")
  endif()
  set(tgt aisp_ladder_${L_NAME})
  add_library(${tgt} OBJECT ${L_SOURCES})
  aisp_target_defaults(${tgt})
  target_link_libraries(${tgt} PUBLIC aisp_device ${L_LIBRARIES})
  set_property(GLOBAL APPEND PROPERTY AISP_LADDERS ${tgt})
endfunction()

# Python's site-packages folders, into `out` (a list; empty without python3): where NVIDIA's wheels
# (nvidia-cudnn-cu13, nvidia-nccl-cu13, as PyTorch installs them) keep headers and libraries that a
# ladder's vendor step may load at run time.
function(aisp_python_site_packages out)
  find_program(AISP_PYTHON3 NAMES python3)
  set(dirs "")
  if(AISP_PYTHON3)
    execute_process(
      COMMAND ${AISP_PYTHON3} -c
              "import site, sysconfig; print(';'.join(site.getsitepackages() + [sysconfig.get_paths()['purelib']]))"
      OUTPUT_VARIABLE dirs OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  set(${out} ${dirs} PARENT_SCOPE)
endfunction()

# Links every ladder registered so far into `tgt`.
function(aisp_link_ladders tgt)
  get_property(ladders GLOBAL PROPERTY AISP_LADDERS)
  foreach(l IN LISTS ladders)
    target_sources(${tgt} PRIVATE $<TARGET_OBJECTS:${l}>)
    target_link_libraries(${tgt} PRIVATE ${l})
  endforeach()
endfunction()

# aisp_add_sass_check(LADDER <chNN_ladder> EXPECTED <n> [INSTRUCTION HGMMA|QGMMA] [STEP_REGEX <regex>])
#
# A CTest (label cpu, no GPU needed) that the ladder's wgmma steps really run on the wgmma path: their
# objects' SASS must contain INSTRUCTION (cmake/check_hgmma.cmake: default HGMMA, objects 04_* to 09_*),
# and EXPECTED such objects must exist. Named <chNN_ladder>_sass_has_<instruction, lower case>. cuobjdump
# comes from the toolkit, or from .tools/ where scripts/setup.sh installs NVIDIA's PyPI package; without
# one the test reports SKIPPED with the reason.
function(aisp_add_sass_check)
  cmake_parse_arguments(S "" "LADDER;EXPECTED;INSTRUCTION;STEP_REGEX" "" ${ARGN})
  if(NOT S_LADDER OR S_EXPECTED STREQUAL "")
    message(FATAL_ERROR "aisp_add_sass_check needs LADDER and EXPECTED")
  endif()
  if(NOT S_INSTRUCTION)
    set(S_INSTRUCTION HGMMA)
  endif()
  find_package(CUDAToolkit REQUIRED)
  file(GLOB pypi_cuda_bins ${PROJECT_SOURCE_DIR}/.tools/cuda-binutils/nvidia/cu*/bin)
  find_program(AISP_CUOBJDUMP cuobjdump HINTS ${CUDAToolkit_BIN_DIR} ${pypi_cuda_bins})
  set(args -DCUOBJDUMP=${AISP_CUOBJDUMP} -DEXPECTED=${S_EXPECTED} -DINSTRUCTION=${S_INSTRUCTION})
  if(S_STEP_REGEX)
    list(APPEND args "-DSTEP_REGEX=${S_STEP_REGEX}")
  endif()
  string(TOLOWER ${S_INSTRUCTION} instruction)
  set(name ${S_LADDER}_sass_has_${instruction})
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} ${args} "-DOBJECTS=$<TARGET_OBJECTS:aisp_ladder_${S_LADDER}>"
                   -P ${PROJECT_SOURCE_DIR}/cmake/check_hgmma.cmake)
  set_tests_properties(${name} PROPERTIES LABELS cpu SKIP_REGULAR_EXPRESSION "SKIPPED:")
endfunction()
