# Regression gating from the command line, against the real aisp binary and the stored fixture runs (no GPU
# needed: every command here reads runs instead of making them). Run as:
#   cmake -DAISP=<aisp> -DDATA=<tests/cpu> -DWORK=<scratch folder> -P cli_gating.cmake
foreach(v AISP DATA WORK)
  if(NOT ${v})
    message(FATAL_ERROR "pass -D${v}=...")
  endif()
endforeach()

set(RUN_A ${DATA}/fixtures/runs/20261120T090000Z_ch07-copy)
set(RUN_B ${DATA}/fixtures/runs/20261121T093000Z_ch07-copy)
set(LADDER ${WORK}/chapters/ch07_memory_access/copy)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${LADDER})
file(WRITE ${LADDER}/README.md "# ch07:copy\n\n<!-- aisp:results:begin -->\n<!-- aisp:results:end -->\n")
file(WRITE ${LADDER}/problem.hpp "// fixture: marks a ladder folder\n")
# The expectations --update-expectations writes for run A (test_expectations.cpp checks that it does).
file(COPY_FILE ${DATA}/golden/expectations_run_a.json ${LADDER}/expectations_h100_sxm.json)

# aisp ARGS... must exit with `code`; stdout must match `want` (a regex, "" = anything). Bad input (2)
# must say so in exactly one 'aisp: ...' line on stderr.
function(expect code want)
  execute_process(COMMAND ${AISP} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  string(STRIP "${err}" err_stripped)
  string(REGEX MATCHALL "\n" newlines "${err_stripped}")
  list(LENGTH newlines extra_lines)
  if(NOT rc EQUAL ${code})
    message(SEND_ERROR "aisp ${ARGN}: exit ${rc}, expected ${code}\nstdout: ${out}\nstderr: ${err}")
  elseif(code EQUAL 2 AND (extra_lines GREATER 0 OR NOT err_stripped MATCHES "^aisp: "))
    message(SEND_ERROR "aisp ${ARGN}: expected one 'aisp: ...' line on stderr, got: ${err}")
  elseif(NOT want STREQUAL "" AND NOT out MATCHES "${want}")
    message(SEND_ERROR "aisp ${ARGN}: stdout does not match '${want}':\n${out}")
  else()
    message(STATUS "ok: aisp ${ARGN} -> exit ${rc}")
  endif()
endfunction()

set(CH --chapters-dir ${WORK}/chapters)

# bench check: the same run passes, the slowed one regresses (exit 4), never silently.
expect(0 "5 PASS, 0 REGRESSED" bench check --run ${RUN_A} ${CH})
expect(4 "03_vectorized[^\n]*REGRESSED" bench check --run ${RUN_B} ${CH})
expect(4 "NOISY" bench check --run ${RUN_B} ${CH} --format markdown)
expect(4 "\"REGRESSED\": 1" bench check --run ${RUN_B} ${CH} --format json)
expect(0 "1 PASS" bench check --run ${RUN_B} ${CH} --targets ch07:copy:04_in_flight)
expect(2 "" bench check --run ${RUN_A} ${CH} --targets ch09)
expect(2 "" bench check --run ${WORK}/no_such_run ${CH})
expect(2 "" bench check --run ${RUN_A} ${CH} --format yaml)
expect(2 "" bench check --run ${RUN_A} --threshold -1)
expect(2 "" bench check --run ${RUN_A} --threshold 2)
# The AISP_TEST_SLOWDOWN run: vendor_memcpy did not move, so no drift, and the regression exits 4.
expect(4 "0 MACHINE-DRIFT \\(threshold 3.0%\\)\nexit 4: 1 REGRESSED\n" bench check --run ${RUN_B} ${CH})

# Machine drift (docs/regression-gating.md): another H100 of the pool, 7.3% slower at everything,
# vendor_memcpy included, is MACHINE-DRIFT (exit 5) with every variant PASS relative to the vendor; a
# variant slower than the vendor's move is still REGRESSED (exit 4); a FAIL beside a regression exits 1
# and the summary still names the regression.
set(RUN_DRIFT ${DATA}/fixtures/runs/20261122T090000Z_ch07-copy-drift)
set(RUN_DRIFT_REGRESSED ${DATA}/fixtures/runs/20261122T100000Z_ch07-copy-drift-regressed)
set(RUN_FAIL ${DATA}/fixtures/runs/20261122T110000Z_ch07-copy-fail)
expect(5 "vendor_memcpy[^\n]*MACHINE-DRIFT[^\n]*vendor_memcpy \\+7.3% slower than stored: the machine, not the code; variants judged relative to it"
       bench check --run ${RUN_DRIFT} ${CH})
expect(5 "03_vectorized[^\n]*vs vendor[^\n]*PASS[^\n]*its own change \\+7.3%, the vendor's \\+7.3%"
       bench check --run ${RUN_DRIFT} ${CH})
expect(5 "4 PASS, 0 REGRESSED, 0 IMPROVED, 0 INCONCLUSIVE, 0 NOT-COMPARABLE, 1 MACHINE-DRIFT[^\n]*\nexit 5: MACHINE-DRIFT at 1 point"
       bench check --run ${RUN_DRIFT} ${CH})
expect(5 "\"MACHINE-DRIFT\": 1" bench check --run ${RUN_DRIFT} ${CH} --format json)
expect(5 "" bench check --run ${RUN_DRIFT} ${CH} --strict)
expect(5 "1 PASS" bench check --run ${RUN_DRIFT} ${CH} --targets ch07:copy:03_vectorized)
expect(4 "03_vectorized[^\n]*REGRESSED[^\n]*slower relative to vendor_memcpy by \\+10.0%"
       bench check --run ${RUN_DRIFT_REGRESSED} ${CH})
expect(4 "exit 4: 1 REGRESSED; MACHINE-DRIFT at 1 point" bench check --run ${RUN_DRIFT_REGRESSED} ${CH})
expect(1 "1 REGRESSED[^\n]*\nexit 1: 1 FAIL in this run \\(a wrong answer outranks a slow one\\); 1 REGRESSED"
       bench check --run ${RUN_FAIL} ${CH})
expect(1 "\"exit_code\": 1" bench check --run ${RUN_FAIL} ${CH} --format json)

# bench compare
expect(0 "03_vectorized[^\n]*B slower" bench compare ${RUN_A} ${RUN_B})
expect(0 "PASS -> NOISY" bench compare ${RUN_A} ${RUN_B} --format markdown)
expect(0 "\"schema\": \"aisp.compare\"" bench compare ${RUN_A} ${RUN_B} --format json)
expect(2 "" bench compare ${RUN_A})
expect(2 "" bench compare ${RUN_A} ${WORK}/no_such_run)
expect(2 "" bench compare ${RUN_A} ${RUN_B} --targets ch09)

# bench store: the expectations of a stored run, as --update-expectations would have written them at its
# end (the golden file is run A's); a selection that matches nothing, a missing run, no --run: exit 2.
file(REMOVE ${LADDER}/expectations_h100_sxm.json)
expect(0 "" bench store --run ${RUN_A} ${CH})
file(READ ${LADDER}/expectations_h100_sxm.json stored)
file(READ ${DATA}/golden/expectations_run_a.json golden)
if(NOT stored STREQUAL golden)
  message(SEND_ERROR "bench store did not write what --update-expectations writes for run A:\n${stored}")
endif()
expect(0 "" bench store --run ${RUN_A} ${CH} --targets ch07:copy)
expect(2 "" bench store --run ${RUN_A} ${CH} --targets ch09)
expect(2 "" bench store --run ${WORK}/no_such_run ${CH})
expect(2 "" bench store ${CH})

# history: import the two runs, then the trend, newest first.
expect(2 "" history --history ${WORK}/absent.sqlite)
expect(0 "4b1d0c9e8f\\+dirty.*e63b87c2a1" history --history ${WORK}/h.sqlite --import ${RUN_A} ${RUN_B} --targets ch07:copy)
expect(0 "20261121T093000Z" history --history ${WORK}/h.sqlite --format json --last 1)
expect(0 "^target,variant" history --history ${WORK}/h.sqlite --format csv)
expect(2 "" history --history ${WORK}/h.sqlite --format yaml)
expect(2 "" history --history ${WORK}/h.sqlite --last -1)
expect(2 "" history --history ${WORK}/h2.sqlite --import ${WORK}/no_such_run)
file(WRITE ${WORK}/notes.sqlite "not a database\n")
expect(2 "" history --history ${WORK}/notes.sqlite)
expect(2 "" history --history ${WORK}/notes.sqlite --import ${RUN_A})
file(READ ${WORK}/notes.sqlite notes)
if(NOT notes STREQUAL "not a database\n")
  message(SEND_ERROR "a file that is not a history database was modified")
endif()

# report: HTML and markdown, and README tables from the expectations.
expect(0 "" report ${RUN_B} --html ${WORK}/r.html --markdown ${WORK}/r.md)
file(READ ${WORK}/r.html html)
if(NOT html MATCHES "<svg class=\"aisp-ladder\"" OR NOT html MATCHES "<figure class=\"roofline\">")
  message(SEND_ERROR "report.html lacks its charts")
endif()
expect(0 "^# aisp run 20261121T093000Z_ch07-copy" report ${RUN_B} --markdown -)
expect(2 "" report)
expect(2 "" report ${WORK}/no_such_run)
expect(2 "" report ${RUN_B} --targets ch09)
expect(0 "" report --update-readme ${CH})
file(READ ${LADDER}/README.md readme)
if(NOT readme MATCHES "\\| 03_vectorized \\| step \\| 3.084 ms")
  message(SEND_ERROR "README table not generated:\n${readme}")
endif()

# A corrupt expectations file: check says NOT-COMPARABLE (exit 4 with --strict), nothing overwrites it.
file(WRITE ${LADDER}/expectations_h100_sxm.json "{ corrupt")
expect(0 "NOT-COMPARABLE[^\n]*not valid JSON" bench check --run ${RUN_A} ${CH})
expect(4 "" bench check --run ${RUN_A} ${CH} --strict)
expect(2 "" report --update-readme ${CH})
file(READ ${LADDER}/expectations_h100_sxm.json after)
if(NOT after STREQUAL "{ corrupt")
  message(SEND_ERROR "the corrupt expectations file was overwritten")
endif()
