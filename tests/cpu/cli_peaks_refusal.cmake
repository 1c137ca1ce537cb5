# `aisp hw peaks` under an instrumentation tool (docs/ceilings.md "When ceilings are refused"), against
# the real binary: the tool is recognised from the environment it gives its target, the command exits 2
# with one line naming the tool, and nothing is written. Needs no GPU: the refusal comes before any CUDA
# call. Run as:
#   cmake -DAISP=<path to aisp> -DWORK=<scratch folder> -P cli_peaks_refusal.cmake
if(NOT AISP OR NOT WORK)
  message(FATAL_ERROR "pass -DAISP=<path to the aisp binary> -DWORK=<scratch folder>")
endif()
file(REMOVE_RECURSE ${WORK})

function(expect_refused tool)
  set(peaks_dir ${WORK}/peaks)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${ARGN} ${AISP} hw peaks --peaks-dir ${peaks_dir}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  string(STRIP "${err}" err_stripped)
  string(REGEX MATCHALL "\n" newlines "${err_stripped}")
  list(LENGTH newlines extra_lines)
  string(FIND "${err_stripped}" "aisp: hw peaks: not measured under ${tool}: " at)
  if(NOT rc EQUAL 2)
    message(SEND_ERROR "${ARGN}: exit ${rc}, expected 2; stderr: ${err}")
  elseif(NOT at EQUAL 0 OR extra_lines GREATER 0)
    message(SEND_ERROR "${ARGN}: expected one line 'aisp: hw peaks: not measured under ${tool}: ...', got: ${err}")
  elseif(EXISTS ${peaks_dir})
    message(SEND_ERROR "${ARGN}: ${peaks_dir} was created: nothing may be written under a tool")
  else()
    message(STATUS "ok: ${ARGN} -> exit 2: ${err_stripped}")
  endif()
endfunction()

expect_refused("compute-sanitizer" NV_SANITIZER_INJECTION_PORT_BASE=49152)
expect_refused("compute-sanitizer" CUDA_INJECTION64_PATH=/opt/cuda/compute-sanitizer/libsanitizer-collection.so)
expect_refused("Nsight Compute (ncu)" NV_COMPUTE_PROFILER_PERFWORKS_DIR=/opt/ncu/target)
expect_refused("Nsight Systems (nsys)" NSYS_PROFILING_SESSION_ID=1)
expect_refused("a CUDA injection library (libtracer.so)" CUDA_INJECTION64_PATH=/tmp/libtracer.so)
