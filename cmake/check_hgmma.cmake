# cmake -DCUOBJDUMP=<path> -DOBJECTS=<;-separated object files> -DEXPECTED=<n> [-DINSTRUCTION=QGMMA]
#       [-DSTEP_REGEX=<regex of the checked objects' names>] -P check_hgmma.cmake
#
# A ladder's Hopper steps (ch10:hgemm 04-08, ch18:flash_attention 04-08, ch19:fp8_gemm 02-11) must run on
# the wgmma path: their SASS must contain HGMMA (a build without sm_90a, or a step that fell back to
# mma.sync, would show only HMMA or nothing), and the wgmma must not have been serialized by ptxas. When
# ptxas finds a non-wgmma instruction that may touch the registers of a wgmma in flight (its info C7514),
# it makes every wgmma wait for the one before: each instruction then carries the gsb0 scoreboard, where
# a pipelined kernel issues several per commit group and only the last carries it. Every step here issues
# at least four per group, so "all of them carry gsb0" is the serialization, and fails the check.
# Checks the objects named 04_* to 09_* by default; EXPECTED is how many such steps the ladder has, so a
# step whose object went missing fails too.
# Prints "SKIPPED:" (the test's skip pattern) when no cuobjdump is available. INSTRUCTION names the SASS
# opcode to look for (default HGMMA, the bf16/fp16 form; QGMMA is the FP8 form, ch19:fp8_gemm) and
# STEP_REGEX which objects are the wgmma steps (default 04_* to 09_*).
if(NOT INSTRUCTION)
  set(INSTRUCTION HGMMA)
endif()
if(NOT STEP_REGEX)
  set(STEP_REGEX "^0[4-9]_.*\\.cu\\.o$")
endif()
if(NOT CUOBJDUMP OR NOT EXISTS "${CUOBJDUMP}")
  message("SKIPPED: no cuobjdump found (configure with -DAISP_CUOBJDUMP=<path>)")
  return()
endif()
# cuobjdump finds nvdisasm on PATH; the two ship in the same directory.
get_filename_component(tool_dir "${CUOBJDUMP}" DIRECTORY)
set(ENV{PATH} "${tool_dir}:$ENV{PATH}")
set(checked 0)
foreach(obj IN LISTS OBJECTS)
  get_filename_component(name "${obj}" NAME)
  if(NOT name MATCHES "${STEP_REGEX}")
    continue()
  endif()
  execute_process(COMMAND "${CUOBJDUMP}" --dump-sass "${obj}" OUTPUT_VARIABLE sass ERROR_VARIABLE err
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cuobjdump failed on ${name}: ${err}")
  endif()
  string(REGEX MATCHALL "${INSTRUCTION}\\.[0-9x]+[^;]*" hgmma "${sass}")  # each up to its ";"
  list(LENGTH hgmma count)
  if(count EQUAL 0)
    message(FATAL_ERROR "${name}: no ${INSTRUCTION} instruction in its SASS (not on the wgmma path)")
  endif()
  set(waiting 0)
  foreach(instruction IN LISTS hgmma)
    if(instruction MATCHES "gsb0")
      math(EXPR waiting "${waiting} + 1")
    endif()
  endforeach()
  if(count GREATER 1 AND waiting EQUAL count)
    message(FATAL_ERROR "${name}: every one of its ${count} ${INSTRUCTION} instructions waits for the one before "
                        "(gsb0 on each): ptxas serialized the wgmma (its info C7514 in the build log)")
  endif()
  message("${name}: ${count} ${INSTRUCTION} instructions, ${waiting} ending a commit group")
  math(EXPR checked "${checked} + 1")
endforeach()
if(checked LESS EXPECTED)
  message(FATAL_ERROR "expected the objects of ${EXPECTED} wgmma steps (${STEP_REGEX}), found ${checked}")
endif()
