#include "serving/api.hpp"

#include <fmt/format.h>
#include <limits>
#include <nlohmann/json.hpp>

namespace aisp::serving {

using nlohmann::json;

ApiError::ApiError(int status, std::string message, std::string param, std::string type,
                   std::string code)
    : std::runtime_error(std::move(message)), m_status(status), m_param(std::move(param)),
      m_type(std::move(type)), m_code(std::move(code)) {}

GenerationRequest CompletionRequest::to_generation() const {
  GenerationRequest g;
  g.prompt = prompt;
  g.max_tokens = max_tokens;
  g.stop_token_ids = stop_token_ids;
  g.ignore_eos = ignore_eos;
  return g;
}

namespace {

constexpr const char *k_tokenizer_message =
    "text prompts need the model's tokenizer, which aisp does not ship; send token ids";

[[noreturn]] void bad(const std::string &param, const std::string &message) {
  throw ApiError(400, message, param);
}

const char *type_name(const json &v) {
  if (v.is_null())
    return "null";
  if (v.is_boolean())
    return "a boolean";
  if (v.is_number_integer())
    return "an integer";
  if (v.is_number())
    return "a number";
  if (v.is_string())
    return "a string";
  if (v.is_array())
    return "an array";
  return "an object";
}

bool get_bool(const json &v, const std::string &param) {
  if (!v.is_boolean())
    bad(param, fmt::format("'{}' must be a boolean, not {}", param, type_name(v)));
  return v.get<bool>();
}

// JSON integers only: 16.0 or "16" is a client bug worth naming, not something to round.
std::int64_t get_int(const json &v, const std::string &param) {
  if (!v.is_number_integer())
    bad(param, fmt::format("'{}' must be an integer, not {}", param, type_name(v)));
  if (v.is_number_unsigned() &&
      v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    bad(param, fmt::format("'{}' is out of range", param));
  return v.get<std::int64_t>();
}

double get_number(const json &v, const std::string &param) {
  if (!v.is_number())
    bad(param, fmt::format("'{}' must be a number, not {}", param, type_name(v)));
  return v.get<double>();
}

TokenId get_token(const json &v, const std::string &param, int vocab_size) {
  if (v.is_string())
    bad(param, k_tokenizer_message);
  if (!v.is_number_integer())
    bad(param, fmt::format("'{}' must hold integer token ids, not {}", param, type_name(v)));
  const bool negative =
      v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() < 0;
  if (negative || v.get<std::uint64_t>() >= static_cast<std::uint64_t>(vocab_size))
    bad(param, fmt::format("token id {} in '{}' is outside the vocabulary [0, {})", v.dump(), param,
                           vocab_size));
  return static_cast<TokenId>(v.get<std::int64_t>());
}

std::vector<TokenId> parse_prompt(const json &v, int vocab_size) {
  if (v.is_string())
    bad("prompt", k_tokenizer_message);
  if (!v.is_array())
    bad("prompt", fmt::format("'prompt' must be an array of token ids, not {}", type_name(v)));
  const json *ids = &v;
  if (!v.empty() && v.front().is_array()) {
    // [[ids]]: OpenAI's batch form. One prompt in it is the same request; several are refused (one
    // request, one sequence: the server maps a request to one engine sequence and one stream).
    if (v.size() > 1)
      bad("prompt",
          fmt::format("batched prompts ({} token lists) are not supported; send one prompt "
                      "per request",
                      v.size()));
    ids = &v.front();
  }
  if (!ids->empty() && ids->front().is_string())
    bad("prompt", k_tokenizer_message);
  if (ids->empty())
    bad("prompt", "'prompt' is empty");
  std::vector<TokenId> out;
  out.reserve(ids->size());
  for (const auto &t : *ids) {
    if (t.is_array())
      bad("prompt", "'prompt' mixes token lists and token ids");
    out.push_back(get_token(t, "prompt", vocab_size));
  }
  return out;
}

// Sampling options whose neutral value aisp accepts (clients often send them explicitly) and whose
// other values it refuses: decoding is greedy, so anything that changes the argmax cannot be
// honoured.
void check_neutral(const std::string &key, const json &v) {
  if (v.is_null())
    return;
  const auto refuse = [&](const std::string &why) { bad(key, fmt::format("'{}' {}", key, why)); };
  if (key == "temperature") {
    if (get_number(v, key) != 0.0)
      refuse(fmt::format("= {} is not supported: aisp decodes greedily (temperature 0 or absent)",
                         v.dump()));
  } else if (key == "top_p") {
    const double p = get_number(v, key);
    if (!(p > 0.0 && p <= 1.0))
      refuse("must be in (0, 1]"); // any such value keeps the argmax
  } else if (key == "top_k") {
    const auto k = get_int(v, key);
    if (k < -1)
      refuse("must be -1, 0 or positive"); // the argmax is in every top-k
  } else if (key == "frequency_penalty" || key == "presence_penalty") {
    if (get_number(v, key) != 0.0)
      refuse("is not supported (greedy decoding without penalties): send 0");
  } else if (key == "repetition_penalty") {
    if (get_number(v, key) != 1.0)
      refuse("is not supported (greedy decoding without penalties): send 1");
  } else if (key == "n" || key == "best_of") {
    if (get_int(v, key) != 1)
      refuse("must be 1: one completion per request");
  } else if (key == "echo") {
    if (get_bool(v, key))
      refuse("is not supported (the prompt is the client's own token ids)");
  } else if (key == "logprobs") {
    refuse("is not supported");
  } else if (key == "suffix") {
    refuse("is not supported");
  } else if (key == "stop") {
    if (!(v.is_array() && v.empty()))
      refuse("strings need the model's tokenizer, which aisp does not ship; use stop_token_ids");
  } else if (key == "logit_bias") {
    if (!(v.is_object() && v.empty()))
      refuse("is not supported");
  }
}

} // namespace

CompletionRequest parse_completion_request(std::string_view body, const ModelInfo &info) {
  json doc;
  try {
    doc = json::parse(body);
  } catch (const json::parse_error &e) {
    // nlohmann's message names the byte offset; its "[json.exception.parse_error.101] " prefix is
    // noise.
    std::string what = e.what();
    if (const auto p = what.find("] "); p != std::string::npos)
      what = what.substr(p + 2);
    bad("", "malformed JSON body: " + what);
  }
  if (!doc.is_object())
    bad("", fmt::format("the body must be a JSON object, not {}", type_name(doc)));

  CompletionRequest r;
  r.model = info.name;
  bool have_prompt = false;
  for (const auto &[key, v] : doc.items()) {
    if (key == "prompt") {
      r.prompt = parse_prompt(v, info.vocab_size);
      have_prompt = true;
    } else if (key == "model") {
      if (v.is_null())
        continue;
      if (!v.is_string())
        bad(key, fmt::format("'model' must be a string, not {}", type_name(v)));
      if (v.get<std::string>() != info.name)
        throw ApiError(404,
                       fmt::format("the model '{}' does not exist; this server serves '{}'",
                                   v.get<std::string>(), info.name),
                       key, "invalid_request_error", "model_not_found");
    } else if (key == "max_tokens") {
      if (v.is_null())
        continue;
      const auto m = get_int(v, key);
      if (m <= 0)
        bad(key, fmt::format("'max_tokens' must be at least 1, not {}", m));
      // Clamped only to keep the arithmetic in int; the context check below refuses it anyway.
      r.max_tokens =
          static_cast<int>(std::min<std::int64_t>(m, std::numeric_limits<int>::max() / 2));
    } else if (key == "stream") {
      if (!v.is_null())
        r.stream = get_bool(v, key);
    } else if (key == "stream_options") {
      if (v.is_null())
        continue;
      if (!v.is_object())
        bad(key, fmt::format("'stream_options' must be an object, not {}", type_name(v)));
      for (const auto &[k2, v2] : v.items()) {
        const std::string p = "stream_options." + k2;
        if (k2 != "include_usage")
          bad(p, fmt::format("unknown field '{}'", p));
        if (!v2.is_null())
          r.include_usage = get_bool(v2, p);
      }
    } else if (key == "stop_token_ids") {
      if (v.is_null())
        continue;
      if (!v.is_array())
        bad(key, fmt::format("'stop_token_ids' must be an array, not {}", type_name(v)));
      for (const auto &t : v)
        r.stop_token_ids.push_back(get_token(t, key, info.vocab_size));
    } else if (key == "ignore_eos") {
      if (!v.is_null())
        r.ignore_eos = get_bool(v, key);
    } else if (key == "seed") {
      if (!v.is_null())
        r.seed = get_int(v, key);
    } else if (key == "user") {
      if (v.is_null())
        continue;
      if (!v.is_string())
        bad(key, fmt::format("'user' must be a string, not {}", type_name(v)));
      r.user = v.get<std::string>();
    } else if (key == "temperature" || key == "top_p" || key == "top_k" ||
               key == "frequency_penalty" || key == "presence_penalty" ||
               key == "repetition_penalty" || key == "n" || key == "best_of" || key == "echo" ||
               key == "logprobs" || key == "suffix" || key == "stop" || key == "logit_bias") {
      check_neutral(key, v);
    } else {
      // A misspelled option silently ignored is a benchmark measuring something else than intended.
      bad(key, fmt::format("unknown field '{}'", key));
    }
  }
  if (!have_prompt)
    bad("prompt", "'prompt' is required");
  if (r.include_usage && !r.stream)
    bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
  const auto prompt_len = static_cast<std::int64_t>(r.prompt.size());
  if (prompt_len + r.max_tokens > info.max_context)
    bad(prompt_len >= info.max_context ? "prompt" : "max_tokens",
        fmt::format(
            "this model's maximum context length is {} tokens; the prompt has {} and max_tokens "
            "asks for {} more ({} in all)",
            info.max_context, prompt_len, r.max_tokens, prompt_len + r.max_tokens));
  return r;
}

const char *finish_reason_name(FinishReason reason) {
  switch (reason) {
  case FinishReason::length:
    return "length";
  case FinishReason::stop:
    return "stop";
  default:
    return nullptr;
  }
}

namespace {

json nullable(std::string_view s) { return s.empty() ? json(nullptr) : json(std::string(s)); }

json reason_json(FinishReason reason) {
  const char *name = finish_reason_name(reason);
  return name ? json(name) : json(nullptr);
}

json header(const CompletionMeta &meta) {
  return json{{"id", meta.id},
              {"object", "text_completion"},
              {"created", meta.created},
              {"model", meta.model}};
}

} // namespace

std::string error_json(std::string_view message, std::string_view type, std::string_view param,
                       std::string_view code) {
  return json{{"error",
               {{"message", std::string(message)},
                {"type", std::string(type)},
                {"param", nullable(param)},
                {"code", nullable(code)}}}}
      .dump();
}

std::string error_json(const ApiError &error) {
  return error_json(error.what(), error.type(), error.param(), error.code());
}

std::string completion_json(const CompletionMeta &meta, const std::vector<TokenId> &tokens,
                            FinishReason reason, int prompt_tokens) {
  json j = header(meta);
  // "text" stays empty: aisp has no tokenizer to detokenize with; the ids are in "token_ids".
  j["choices"] = json::array({json{{"index", 0},
                                   {"text", ""},
                                   {"token_ids", tokens},
                                   {"logprobs", nullptr},
                                   {"finish_reason", reason_json(reason)}}});
  const auto completion = static_cast<int>(tokens.size());
  j["usage"] = {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion},
                {"total_tokens", prompt_tokens + completion}};
  return j.dump();
}

std::string stream_chunk_json(const CompletionMeta &meta, const std::vector<TokenId> &tokens,
                              FinishReason reason, bool include_usage) {
  json j = header(meta);
  j["choices"] = json::array({json{{"index", 0},
                                   {"text", ""},
                                   {"token_ids", tokens},
                                   {"logprobs", nullptr},
                                   {"finish_reason", reason_json(reason)}}});
  if (include_usage)
    j["usage"] = nullptr;
  return j.dump();
}

std::string usage_chunk_json(const CompletionMeta &meta, int prompt_tokens, int completion_tokens) {
  json j = header(meta);
  j["choices"] = json::array();
  j["usage"] = {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens}};
  return j.dump();
}

std::string models_json(const ModelInfo &info, std::int64_t created) {
  return json{{"object", "list"},
              {"data", json::array({json{{"id", info.name},
                                         {"object", "model"},
                                         {"created", created},
                                         {"owned_by", "aisp"},
                                         {"max_model_len", info.max_context},
                                         {"vocab_size", info.vocab_size}}})}}
      .dump();
}

std::string sse_event(std::string_view json_text) {
  std::string out;
  out.reserve(json_text.size() + 8);
  out += "data: ";
  out += json_text;
  out += "\n\n";
  return out;
}

} // namespace aisp::serving
