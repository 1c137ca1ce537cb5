// Peer access between two GPUs of one machine (CUDA C++ Programming Guide, "Peer-to-Peer Memory
// Access"): what the multi-GPU ladders, the ceiling probes and the serving engine's K/V move each did
// in full before.
#pragma once

namespace aisp {

// From the current device, lets kernels and copies reach `peer`'s memory over the direct path.
// Enabling it again (another part of the process did already) is no error. Returns false, enabling
// nothing, when the two devices have no peer path; any other failure throws CudaError.
[[nodiscard]] bool enable_peer_access(int peer);

}  // namespace aisp
