// Reads DeviceFacts from the CUDA runtime.
#pragma once

#include <string>

#include "core/base/device_facts.hpp"

namespace aisp {

// Number of CUDA devices visible; 0 with `why` filled when there are none or the driver is unusable.
int cuda_device_count(std::string* why);

DeviceFacts query_device(int index);

}  // namespace aisp
