// Peer access between two GPUs (peer_access.hpp).
#include "device/peer_access.hpp"

#include <cuda_runtime_api.h>

#include "device/cuda_check.hpp"

namespace aisp {

bool enable_peer_access(int peer) {
  int device = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  int can = 0;
  AISP_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
  if (!can) return false;
  const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // the runtime records it as the last error too: clear it
  } else {
    AISP_CUDA_CHECK(e);
  }
  return true;
}

}  // namespace aisp
