// Every thread's call stack, written to stderr on a signal: what a hung worker was doing when the harness
// gave up on it. The orchestrator sends the signal to a worker that stayed silent past --timeout, waits a
// moment for the stacks to reach the worker's log, then kills it (device/orchestrator.cpp).
//
// How: the first delivery (from another process: kill(2)) forwards the signal to every other thread of the
// process with tgkill(2); each thread, in its own handler, takes a spin lock and writes a header line and
// backtrace_symbols_fd(3)'s frames, so the stacks do not interleave. Only async-signal-safe calls are made
// in the handler, except backtrace(3) itself, whose one allocation (loading the unwinder) happens at
// installation. Frames are "binary(+offset)[address]" (aisp exports no symbols); addr2line resolves the
// offsets against the same build (scripts/gpu-check.sh does, for every worker log that holds stacks).
#pragma once

namespace aisp {

// Installs the handler for `signo` (SIGUSR2 in the worker). Idempotent; returns false if sigaction failed.
bool install_thread_dump(int signo);

}  // namespace aisp
