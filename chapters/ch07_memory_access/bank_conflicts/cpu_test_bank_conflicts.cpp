// CPU tests of ch07:bank_conflicts' host reference on hand-checkable matrices.
#include <gtest/gtest.h>

#include "chapters/ch07_memory_access/bank_conflicts/reference.hpp"

namespace aisp::ch07::bank_conflicts {
namespace {

TEST(BankConflictsReference, OddPassesTransposeTheMatrix) {
  const std::vector<double> in = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<double> want = {1, 4, 7, 2, 5, 8, 3, 6, 9};
  EXPECT_EQ(tile_passes(in, 3, 1), want);
  EXPECT_EQ(tile_passes(in, 3, 63), want);
}

TEST(BankConflictsReference, EvenPassesGiveTheInputBack) {
  const std::vector<double> in = {1, 2, 3, 4};
  EXPECT_EQ(tile_passes(in, 2, 64), in);
  EXPECT_NE(tile_passes(in, 2, 1), in);
}

}  // namespace
}  // namespace aisp::ch07::bank_conflicts
