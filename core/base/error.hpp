// One error vocabulary for host code that does not touch CUDA.
#pragma once

#include <stdexcept>
#include <string>

namespace aisp {

// Bad input from the user (unknown selector, malformed axis, unwritable directory): the CLI prints the
// message on one line and exits with ExitCode::usage.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A stored file that cannot be trusted (corrupt JSON, newer schema): reported, never overwritten silently.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace aisp
