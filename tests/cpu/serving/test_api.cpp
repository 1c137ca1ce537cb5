// serving/api: what /v1/completions accepts, what it refuses (status, param, message), and the JSON
// of responses and stream chunks.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "serving/api.hpp"

namespace aisp::serving {
namespace {

using nlohmann::json;

const ModelInfo k_model{.name = "tiny", .vocab_size = 100, .max_context = 64, .eos_token_id = 2};

// The ApiError a body gets, or a failure when it is accepted.
ApiError refusal(const std::string &body) {
  try {
    (void)parse_completion_request(body, k_model);
  } catch (const ApiError &e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "");
}

void expect_refused(const std::string &body, int status, const std::string &param,
                    const std::string &needle) {
  const auto e = refusal(body);
  EXPECT_EQ(e.status(), status) << body;
  EXPECT_EQ(e.param(), param) << body;
  EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << body << " -> " << e.what();
}

TEST(ServingApi, ParsesAFullRequest) {
  const auto r = parse_completion_request(
      R"({"model":"tiny","prompt":[1,5,99],"max_tokens":7,"stream":true,"stream_options":{"include_usage":true},
          "temperature":0,"stop_token_ids":[4],"ignore_eos":true,"n":1,"seed":3,"user":"u","top_p":1})",
      k_model);
  EXPECT_EQ(r.model, "tiny");
  EXPECT_EQ(r.prompt, (std::vector<TokenId>{1, 5, 99}));
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.stop_token_ids, std::vector<TokenId>{4});
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_EQ(r.seed, 3);
  const auto g = r.to_generation();
  EXPECT_EQ(g.prompt, r.prompt);
  EXPECT_EQ(g.max_tokens, 7);
  EXPECT_TRUE(g.ignore_eos);
}

TEST(ServingApi, DefaultsAndSingleBatchedPrompt) {
  const auto r = parse_completion_request(
      R"({"prompt":[[3,4]],"max_tokens":null,"temperature":null})", k_model);
  EXPECT_EQ(r.model, "tiny"); // filled in
  EXPECT_EQ(r.prompt, (std::vector<TokenId>{3, 4}));
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.ignore_eos);
}

TEST(ServingApi, RefusesBadBodies) {
  expect_refused("{\"prompt\": [1,", 400, "", "malformed JSON");
  expect_refused("", 400, "", "malformed JSON");
  expect_refused("[1,2]", 400, "", "JSON object");
  expect_refused(R"({"prompt":[1],"frobnicate":1})", 400, "frobnicate",
                 "unknown field 'frobnicate'");
  expect_refused(R"({"prompt":[1],"stream":true,"stream_options":{"x":1}})", 400,
                 "stream_options.x", "unknown");
  expect_refused(R"({"max_tokens":3})", 400, "prompt", "required");
  expect_refused(R"({"prompt":[]})", 400, "prompt", "empty");
  expect_refused(R"({"prompt":[[]]})", 400, "prompt", "empty");
  expect_refused(R"({"prompt":"hello"})", 400, "prompt", "tokenizer");
  expect_refused(R"({"prompt":["hello"]})", 400, "prompt", "tokenizer");
  expect_refused(R"({"prompt":[[1],[2]]})", 400, "prompt", "one prompt per request");
  expect_refused(R"({"prompt":[1,100]})", 400, "prompt", "outside the vocabulary [0, 100)");
  expect_refused(R"({"prompt":[-1]})", 400, "prompt", "outside the vocabulary");
  expect_refused(R"({"prompt":[1.5]})", 400, "prompt", "integer token ids");
  expect_refused(R"({"prompt":[1],"max_tokens":0})", 400, "max_tokens", "at least 1");
  expect_refused(R"({"prompt":[1],"max_tokens":-5})", 400, "max_tokens", "at least 1");
  expect_refused(R"({"prompt":[1],"max_tokens":"8"})", 400, "max_tokens", "must be an integer");
  expect_refused(R"({"prompt":[1],"max_tokens":64})", 400, "max_tokens",
                 "maximum context length is 64");
  expect_refused(R"({"prompt":[1],"max_tokens":99999999999})", 400, "max_tokens",
                 "maximum context length");
  expect_refused(R"({"prompt":[1],"temperature":0.7})", 400, "temperature", "greedily");
  expect_refused(R"({"prompt":[1],"n":2})", 400, "n", "must be 1");
  expect_refused(R"({"prompt":[1],"stream":"yes"})", 400, "stream", "boolean");
  expect_refused(R"({"prompt":[1],"stream_options":{"include_usage":true}})", 400, "stream_options",
                 "only allowed when 'stream' is true");
  expect_refused(R"({"prompt":[1],"stop":["\n"]})", 400, "stop", "stop_token_ids");
  expect_refused(R"({"prompt":[1],"stop_token_ids":[100]})", 400, "stop_token_ids",
                 "outside the vocabulary");
  expect_refused(R"({"prompt":[1],"logprobs":1})", 400, "logprobs", "not supported");
  expect_refused(R"({"prompt":[1],"presence_penalty":0.5})", 400, "presence_penalty",
                 "not supported");
}

TEST(ServingApi, PromptAtTheContextEdge) {
  std::vector<int> ids(63, 1);
  json ok{{"prompt", ids}, {"max_tokens", 1}};
  EXPECT_NO_THROW((void)parse_completion_request(ok.dump(), k_model));
  ids.push_back(1); // 64 prompt tokens leave no room for one more
  json full{{"prompt", ids}, {"max_tokens", 1}};
  expect_refused(full.dump(), 400, "prompt", "maximum context length");
}

TEST(ServingApi, AnotherModelIs404) {
  const auto e = refusal(R"({"model":"gpt-4","prompt":[1]})");
  EXPECT_EQ(e.status(), 404);
  EXPECT_EQ(e.code(), "model_not_found");
}

TEST(ServingApi, ErrorJsonIsOpenAiShaped) {
  const auto j = json::parse(error_json(ApiError(400, "bad thing", "max_tokens")));
  EXPECT_EQ(j["error"]["message"], "bad thing");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "max_tokens");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_TRUE(json::parse(error_json("x", "server_error"))["error"]["param"].is_null());
}

TEST(ServingApi, ResponseAndChunks) {
  const CompletionMeta meta{"cmpl-1", 1700000000, "tiny"};
  const auto c = json::parse(completion_json(meta, {7, 8, 9}, FinishReason::length, 4));
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["id"], "cmpl-1");
  EXPECT_EQ(c["model"], "tiny");
  EXPECT_EQ(c["choices"][0]["text"], "");
  EXPECT_EQ(c["choices"][0]["token_ids"], json({7, 8, 9}));
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(c["usage"]["completion_tokens"], 3);
  EXPECT_EQ(c["usage"]["total_tokens"], 7);

  const auto chunk_text = stream_chunk_json(meta, {5}, FinishReason::none, true);
  EXPECT_EQ(chunk_text.find('\n'), std::string::npos); // one SSE data line
  const auto chunk = json::parse(chunk_text);
  EXPECT_EQ(chunk["choices"][0]["token_ids"], json({5}));
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(chunk.contains("usage") && chunk["usage"].is_null());
  EXPECT_FALSE(
      json::parse(stream_chunk_json(meta, {}, FinishReason::stop, false)).contains("usage"));
  EXPECT_EQ(json::parse(stream_chunk_json(meta, {}, FinishReason::stop,
                                          false))["choices"][0]["finish_reason"],
            "stop");
  const auto usage = json::parse(usage_chunk_json(meta, 4, 2));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 6);
  EXPECT_EQ(sse_event("{}"), "data: {}\n\n");

  const auto models = json::parse(models_json(k_model, 5));
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  EXPECT_EQ(models["data"][0]["object"], "model");
  EXPECT_EQ(models["data"][0]["vocab_size"], 100);
  EXPECT_EQ(models["data"][0]["max_model_len"], 64);
}

} // namespace
} // namespace aisp::serving
