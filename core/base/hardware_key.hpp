// The hardware key names the machine class in expectations files: a slug of the GPU model with a count
// prefix when more than one GPU is visible ("h200", "h100_sxm", "2x_h200").
#pragma once

#include <string>
#include <string_view>

namespace aisp {

// Slug of one GPU's marketing name, e.g. "NVIDIA H100 80GB HBM3" -> "h100_sxm",
// "NVIDIA H100 PCIe" -> "h100_pcie", "NVIDIA H200" -> "h200", "NVIDIA GeForce RTX 4090" -> "rtx_4090".
// Other names get the generic slug: lowercase, a leading "NVIDIA" and then "GeForce" word dropped,
// each run of other characters turned into one '_', no '_' at either end. A name that leaves
// nothing (empty, or just "NVIDIA") gives "unknown_gpu".
std::string gpu_model_slug(std::string_view device_name);

// gpu_count > 1 adds a "Nx_" prefix. All GPUs are assumed the same model (the first one's name is used).
std::string hardware_key(std::string_view device_name, int gpu_count);

}  // namespace aisp
