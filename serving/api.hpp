// The OpenAI-compatible wire format of POST /v1/completions and GET /v1/models: request parsing and
// validation against the served model, and the JSON of responses, stream chunks and errors.
// Transport-free (no sockets here) so that every rule is unit-tested; docs/serving.md lists what is
// accepted and why the rest is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "serving/engine_api.hpp"

namespace aisp::serving {

// A request the server refuses: the HTTP status and the fields of OpenAI's error object
// {"error": {"message", "type", "param", "code"}}. Thrown by parse_completion_request.
class ApiError : public std::runtime_error {
public:
  ApiError(int status, std::string message, std::string param = "",
           std::string type = "invalid_request_error", std::string code = "");
  [[nodiscard]] int status() const { return m_status; }
  [[nodiscard]] const std::string &param() const { return m_param; }
  [[nodiscard]] const std::string &type() const { return m_type; }
  [[nodiscard]] const std::string &code() const { return m_code; }

private:
  int m_status;
  std::string m_param;
  std::string m_type;
  std::string m_code;
};

struct CompletionRequest {
  std::string model; // the served model's name (filled in when the client left it out)
  std::vector<TokenId> prompt;
  int max_tokens = 16;
  bool stream = false;
  bool include_usage = false; // stream_options.include_usage
  std::vector<TokenId> stop_token_ids;
  bool ignore_eos = false;
  std::optional<std::int64_t> seed; // accepted; greedy decoding does not use it
  std::string user;                 // accepted; not used

  [[nodiscard]] GenerationRequest to_generation() const;
};

// Parses and validates a /v1/completions body for the model `info` describes; throws ApiError (400
// for a bad request, 404 for another model's name) with a message that names the offending field.
[[nodiscard]] CompletionRequest parse_completion_request(std::string_view body,
                                                         const ModelInfo &info);

// "length", "stop", or null for none / cancelled / error (OpenAI's finish_reason values).
[[nodiscard]] const char *finish_reason_name(FinishReason reason);

// Everything a response carries besides the tokens.
struct CompletionMeta {
  std::string id;           // "cmpl-..."
  std::int64_t created = 0; // Unix seconds
  std::string model;
};

// The JSON texts the server writes (compact, one line each: a stream chunk must not contain a
// newline).
[[nodiscard]] std::string error_json(const ApiError &error);
[[nodiscard]] std::string error_json(std::string_view message, std::string_view type,
                                     std::string_view param = "", std::string_view code = "");
[[nodiscard]] std::string completion_json(const CompletionMeta &meta,
                                          const std::vector<TokenId> &tokens, FinishReason reason,
                                          int prompt_tokens);
// One stream chunk: `tokens` (one id, or none on the final chunk) and the finish reason (none:
// null). With include_usage every chunk carries "usage": null, as OpenAI does.
[[nodiscard]] std::string stream_chunk_json(const CompletionMeta &meta,
                                            const std::vector<TokenId> &tokens, FinishReason reason,
                                            bool include_usage);
// The usage chunk sent before [DONE] when stream_options.include_usage is set ("choices": []).
[[nodiscard]] std::string usage_chunk_json(const CompletionMeta &meta, int prompt_tokens,
                                           int completion_tokens);
// GET /v1/models: OpenAI's list with the one served model, plus max_model_len (as vLLM reports it)
// and vocab_size (aisp's: the load generator draws prompt ids below it).
[[nodiscard]] std::string models_json(const ModelInfo &info, std::int64_t created);

// Wraps a JSON text as one server-sent event: "data: <json>\n\n".
[[nodiscard]] std::string sse_event(std::string_view json);

} // namespace aisp::serving
