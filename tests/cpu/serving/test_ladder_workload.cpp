// The ch16:serving ladder's host parts: the seeded workload and the teacher-forced judge
// (serving/ladder_workload.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/base/error.hpp"
#include "serving/ladder_workload.hpp"

namespace {

using aisp::serving::JudgeTally;
using aisp::serving::LadderWorkloadSpec;
using aisp::serving::ScoredToken;

LadderWorkloadSpec spec() {
  LadderWorkloadSpec s;
  s.requests = 200;
  s.prompt_min = 5;
  s.prompt_max = 9;
  s.output_min = 2;
  s.output_max = 4;
  s.vocab = 50;
  s.first_id = 3;
  return s;
}

TEST(LadderWorkload, SameSeedSameRequestsWithinTheRanges) {
  const auto a = aisp::serving::make_ladder_workload(spec(), 11);
  const auto b = aisp::serving::make_ladder_workload(spec(), 11);
  ASSERT_EQ(a.size(), 200u);
  bool saw_min = false, saw_max = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].max_tokens, b[i].max_tokens);
    EXPECT_TRUE(a[i].ignore_eos);
    EXPECT_GE(a[i].prompt.size(), 5u);
    EXPECT_LE(a[i].prompt.size(), 9u);
    EXPECT_GE(a[i].max_tokens, 2);
    EXPECT_LE(a[i].max_tokens, 4);
    saw_min |= a[i].prompt.size() == 5u;
    saw_max |= a[i].prompt.size() == 9u;
    for (int t : a[i].prompt) {
      EXPECT_GE(t, 3);
      EXPECT_LT(t, 50);
    }
  }
  EXPECT_TRUE(saw_min && saw_max) << "both ends of the length range are drawn";
}

TEST(LadderWorkload, AnotherSeedAnotherWorkload) {
  const auto a = aisp::serving::make_ladder_workload(spec(), 11);
  const auto b = aisp::serving::make_ladder_workload(spec(), 12);
  int same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += a[i].prompt == b[i].prompt;
  EXPECT_LT(same, 5);
}

TEST(LadderWorkload, RefusesEmptyRanges) {
  auto s = spec();
  s.requests = 0;
  EXPECT_THROW(aisp::serving::make_ladder_workload(s, 1), aisp::UsageError);
  s = spec();
  s.prompt_max = 4;  // below prompt_min
  EXPECT_THROW(aisp::serving::make_ladder_workload(s, 1), aisp::UsageError);
  s = spec();
  s.output_min = 0;
  EXPECT_THROW(aisp::serving::make_ladder_workload(s, 1), aisp::UsageError);
  s = spec();
  s.vocab = 3;  // no id above first_id
  EXPECT_THROW(aisp::serving::make_ladder_workload(s, 1), aisp::UsageError);
}

TEST(LadderJudge, ToleranceIsTheFloorOrASixteenthOfTheBestLogit) {
  EXPECT_FLOAT_EQ(aisp::serving::near_tie_tolerance(1.0f), 0.35f);
  EXPECT_FLOAT_EQ(aisp::serving::near_tie_tolerance(-2.0f), 0.35f);
  EXPECT_FLOAT_EQ(aisp::serving::near_tie_tolerance(8.0f), 0.5f);
  EXPECT_FLOAT_EQ(aisp::serving::near_tie_tolerance(-16.0f), 1.0f);
}

TEST(LadderJudge, ExactAndNearTieTokensPass) {
  JudgeTally t;
  const std::vector<ScoredToken> s = {{7, 4.0f, 7, 4.0f}, {9, 3.7f, 8, 4.0f}, {5, 1.0f, 5, 1.0f}};
  EXPECT_EQ(aisp::serving::judge_request(0, s, t), "");
  EXPECT_EQ(t.tokens, 3);
  EXPECT_EQ(t.exact, 2);
  EXPECT_EQ(t.near_ties, 1);
  EXPECT_NEAR(t.worst_gap, 0.3f, 1e-6);
}

TEST(LadderJudge, AClearlyWorseTokenFailsNamingRequestAndPosition) {
  JudgeTally t;
  const std::vector<ScoredToken> s = {{7, 4.0f, 7, 4.0f}, {9, 3.5f, 8, 4.0f}};  // 0.5 below, tolerance 0.35
  const std::string why = aisp::serving::judge_request(3, s, t);
  EXPECT_NE(why.find("request 3 generated token 1"), std::string::npos) << why;
  EXPECT_NE(why.find("chose 9"), std::string::npos) << why;
}

TEST(LadderJudge, NanLogitsFail) {
  JudgeTally t;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(aisp::serving::judge_request(0, {{9, nan, 8, 4.0f}}, t), "");
}

TEST(LadderJudge, TooFewExactTokensFailTheTotals) {
  JudgeTally t;
  t.tokens = 10;
  t.exact = 7;
  EXPECT_NE(aisp::serving::judge_totals(t), "");
  t.exact = 8;
  EXPECT_EQ(aisp::serving::judge_totals(t), "");
  EXPECT_NE(aisp::serving::judge_totals(JudgeTally{}), "") << "nothing judged is not a pass";
}

}  // namespace

namespace {

TEST(LadderWorkload, LengthsComeFromTheShapeSeedAlone) {
  const auto a = aisp::serving::make_ladder_workload(spec(), 11);
  const auto b = aisp::serving::make_ladder_workload(spec(), 12);
  double tokens = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt.size(), b[i].prompt.size());
    EXPECT_EQ(a[i].max_tokens, b[i].max_tokens);
    tokens += static_cast<double>(a[i].prompt.size()) + a[i].max_tokens;
  }
  EXPECT_EQ(aisp::serving::ladder_workload_tokens(spec()), tokens);
  auto other = spec();
  other.shape_seed = 2;
  const auto c = aisp::serving::make_ladder_workload(other, 11);
  int same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += a[i].prompt.size() == c[i].prompt.size();
  EXPECT_LT(same, 100) << "another shape seed draws other lengths";
}

}  // namespace
