// The host reference of ch11:priorities' critical chain.
#include <gtest/gtest.h>

#include <vector>

#include "chapters/ch11_streams/priorities/reference.hpp"

namespace {

using namespace aisp::ch11::priorities;

TEST(PrioritiesReference, SmallChainsByHand) {
  // p(0.5) of degree 2 = 1 + 0.5 + 0.25; one step writes it, three steps add it twice more.
  EXPECT_EQ(horner_geometric(0.5f, 2), 1.75f);
  EXPECT_EQ(chain_reference(0.5f, 1, 2), 1.75f);
  EXPECT_EQ(chain_reference(0.5f, 3, 2), 5.25f);
  EXPECT_EQ(chain_reference(-0.25f, 4, 0), 4.0f);  // degree 0: p = 1, four steps
}

TEST(PrioritiesReference, AddsInOrderNotByMultiplying) {
  // The kernels add p once per step, each add rounded; steps * p rounds once and may differ. The reference
  // must be the sum, what the chain computes. For p ~ 1/(1 - 0.1) the repeated sum drifts from the product.
  const float p = horner_geometric(0.1f, 40);
  float sum = p;
  for (int k = 1; k < 1000; ++k) sum += p;
  EXPECT_EQ(chain_reference(0.1f, 1000, 40), sum);
  EXPECT_NE(sum, 1000.0f * p);
}

TEST(PrioritiesReference, VectorFormMatchesScalar) {
  const std::vector<double> x = {-0.5, -0.125, 0.0, 0.375};
  const std::vector<double> got = chain_reference(x, 7, 33);
  ASSERT_EQ(got.size(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], chain_reference(static_cast<float>(x[i]), 7, 33));
  EXPECT_NE(got[0], got[3]);  // depends on the input
}

}  // namespace
