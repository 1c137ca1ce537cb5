// `aisp serve` (the OpenAI-compatible HTTP server over an engine) and `aisp loadgen` (the load
// generator that measures a server). Logic lives in serving/http_server.* and serving/loadgen.*;
// docs/serving.md.
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>

#include "cli/commands.hpp"
#include "core/base/error.hpp"
#include "core/results/run_folder.hpp"
#include "core/measure/verdict.hpp"
#include "device/cuda_check.hpp"
#include "device/device_info.hpp"
#include "serving/disaggregated.hpp"
#include "serving/gpu/gpu_engine.hpp"
#include "serving/http_server.hpp"
#include "serving/loadgen.hpp"
#include "serving/speculative.hpp"
#include "serving/testing_engine.hpp"

namespace aisp::cli {

namespace {

struct ServeCli {
  std::string model_dir;
  bool fake_engine = false;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_model_name;
  int threads = 512;
  int keep_alive_timeout_s = 5;
  // --model only: the engine's options (serving/gpu/llama_runner.hpp, serving/scheduler.hpp)
  int device = 0;
  bool device_given = false;
  std::string disaggregate; // PREFILL,DECODE (serving::parse_device_pair)
  bool disaggregate_given = false;
  std::string cuda_graphs = "on";
  std::string gemm = "fastest";
  int block_size = 16;
  int num_kv_blocks = 0;
  double kv_memory_fraction = 0.9;
  int max_batched_tokens = 8192;
  int max_context = 0;
  int max_running = 256;
  int max_waiting = 1024;
  std::string policy = "continuous";
  std::string kv_mode = "paged";
  bool no_chunked_prefill = false;
  std::string prefix_cache = "off";
  std::string speculative = "off";
  int num_draft = 4;
  // --fake-engine only
  double fake_token_delay_ms = 2.0;
  int fake_vocab = 32000;
  int fake_max_context = 4096;
  int fake_max_running = 64;
  int fake_max_waiting = 1024;
};

// A device index against the devices this process sees, before anything is loaded; returns its
// name. `option` is what the user wrote (`--device 3`, `--disaggregate 0,3`), for the message.
std::string check_device(int index, const std::string &option) {
  std::string why;
  const int count = cuda_device_count(&why);
  if (count == 0)
    throw UsageError(fmt::format("{}: no CUDA device visible ({})", option, why));
  if (index < 0 || index >= count)
    throw UsageError(fmt::format("{}: this machine shows {} CUDA device{} (0 to {})", option, count,
                                 count == 1 ? "" : "s", count - 1));
  cudaDeviceProp prop{};
  AISP_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.name;
}

// The drafter `--speculative` asks for (null: off); the caller keeps it alive as long as the
// engine. A draft model goes here: `--speculative draft-model --draft-model DIR` would load a
// second, smaller LlamaRunner on the same device and wrap it in a serving::ModelDrafter (which
// then has to outlive the engine too).
std::unique_ptr<serving::Drafter> make_drafter(const ServeCli &c) {
  if (c.speculative == "prompt-lookup") {
    serving::PromptLookupOptions o;
    o.num_draft = c.num_draft;
    return std::make_unique<serving::PromptLookupDrafter>(o);
  }
  return nullptr;
}

serving::GpuEngineOptions gpu_engine_options(const ServeCli &c, serving::Drafter *drafter) {
  serving::GpuEngineOptions o;
  o.runner.cuda_graphs = c.cuda_graphs == "on";
  o.runner.gemm = c.gemm == "cublaslt" ? serving::GemmChoice::cublaslt
                  : c.gemm == "hgemm"  ? serving::GemmChoice::hgemm
                                       : serving::GemmChoice::fastest;
  o.runner.block_size = c.block_size;
  o.runner.num_kv_blocks = c.num_kv_blocks;
  o.runner.kv_memory_fraction = c.kv_memory_fraction;
  o.runner.max_batched_tokens = c.max_batched_tokens;
  o.runner.max_context = c.max_context;
  o.scheduler.policy = serving::parse_policy(c.policy);
  o.scheduler.kv_mode = serving::parse_kv_mode(c.kv_mode);
  o.scheduler.chunked_prefill = !c.no_chunked_prefill;
  o.scheduler.prefix_cache = c.prefix_cache == "on";
  o.scheduler.drafter = drafter;
  o.scheduler.num_draft = c.num_draft;
  o.scheduler.max_running = c.max_running;
  o.scheduler.max_waiting = c.max_waiting;
  o.served_name = c.served_model_name;
  return o;
}

void print_speculative(const ServeCli &c, const serving::Drafter *drafter) {
  if (drafter != nullptr)
    std::fprintf(stderr, "aisp serve: speculative decoding%s: %s, up to %d drafts per step\n",
                 c.disaggregate_given ? " (decode side)" : "", c.speculative.c_str(), c.num_draft);
}

// `aisp serve --model DIR`: the model folder, the LlamaRunner over it and the engine loop
// (serving/gpu/gpu_engine.*). Loading the 8B model takes seconds: say what is happening.
std::unique_ptr<serving::Engine> make_gpu_engine(const ServeCli &c, const std::string &device,
                                                 serving::Drafter *drafter) {
  // The runner allocates, creates its stream and captures its graphs on the current device.
  AISP_CUDA_CHECK(cudaSetDevice(c.device));
  std::fprintf(stderr, "aisp serve: loading %s on device %d (%s), CUDA graphs %s ...\n",
               c.model_dir.c_str(), c.device, device.c_str(), c.cuda_graphs.c_str());
  auto engine = std::make_unique<serving::GpuEngine>(c.model_dir, gpu_engine_options(c, drafter));
  std::fprintf(stderr, "aisp serve: %s\n", engine->describe().c_str());
  print_speculative(c, drafter);
  return engine;
}

// `aisp serve --model DIR --disaggregate P,D`: the model on both devices, a prefill and a decode
// engine over them (serving/gpu/gpu_engine.*: DisaggregatedGpuEngine), checked by the caller.
std::unique_ptr<serving::Engine> make_disaggregated_engine(const ServeCli &c,
                                                           serving::DevicePair devices,
                                                           serving::Drafter *drafter) {
  std::fprintf(stderr,
               "aisp serve: loading %s on device %d (prefill) and device %d (decode), CUDA graphs "
               "%s (decode side) ...\n",
               c.model_dir.c_str(), devices.prefill, devices.decode, c.cuda_graphs.c_str());
  auto engine = std::make_unique<serving::DisaggregatedGpuEngine>(
      c.model_dir, gpu_engine_options(c, drafter), devices);
  std::fprintf(stderr, "aisp serve: %s\n", engine->describe().c_str());
  print_speculative(c, drafter);
  return engine;
}

// `--disaggregate P,D`, part one, before the devices are looked at (so that a machine without a
// GPU refuses it the same way): its syntax and the options it cannot run with.
serving::DevicePair check_disaggregate_options(const ServeCli &c) {
  if (c.fake_engine)
    throw UsageError("--disaggregate runs the GPU engine on two devices: not with --fake-engine");
  if (c.device_given)
    throw UsageError("--disaggregate PREFILL,DECODE names both devices: not with --device");
  const serving::DevicePair devices = serving::parse_device_pair(c.disaggregate);
  // The prefill side hands every sequence off at its first token (SchedulerConfig::
  // hand_off_after_prefill): the scheduler refuses a static batch or reserved KV there, but only
  // after both copies of the weights are loaded.
  if (c.policy != "continuous" || c.kv_mode != "paged")
    throw UsageError(fmt::format("--disaggregate needs --policy continuous and --kv-mode paged "
                                 "(got {} and {})",
                                 c.policy, c.kv_mode));
  return devices;
}

// Part two, still before loading: both devices exist, and the decode one can read the other's
// memory. Returns them with their names, for the log.
struct CheckedPair {
  serving::DevicePair devices;
  std::string prefill_name;
  std::string decode_name;
};

CheckedPair check_disaggregate_devices(const ServeCli &c, serving::DevicePair devices) {
  const std::string option = "--disaggregate " + c.disaggregate;
  CheckedPair p{devices, "", ""};
  p.prefill_name = check_device(p.devices.prefill, option);
  p.decode_name = check_device(p.devices.decode, option);
  // The decode GPU loads the prompt's blocks from the prefill GPU's pool (LlamaRunner::
  // copy_kv_blocks_from): without a peer path every hand-off would fail its request.
  int can = 0;
  AISP_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, p.devices.decode, p.devices.prefill));
  if (can == 0)
    throw UsageError(fmt::format("{}: device {} cannot read device {}'s memory (no peer path), so "
                                 "the KV blocks cannot move between them",
                                 option, p.devices.decode, p.devices.prefill));
  return p;
}

std::unique_ptr<serving::Engine> make_fake_engine(const ServeCli &c) {
  serving::FakeEngineOptions o;
  o.model_name = c.served_model_name.empty() ? "aisp-fake" : c.served_model_name;
  o.vocab_size = c.fake_vocab;
  o.max_context = c.fake_max_context;
  o.max_running = c.fake_max_running;
  o.max_waiting = c.fake_max_waiting;
  o.token_delay = std::chrono::microseconds(
      static_cast<std::int64_t>(std::llround(c.fake_token_delay_ms * 1e3)));
  return std::make_unique<serving::FakeEngine>(o);
}

// SIGINT/SIGTERM only write a byte to this pipe (async-signal-safe); the main thread reads it and
// drains on a normal thread. A second signal while draining exits at once.
int g_signal_pipe[2] = {-1, -1};
volatile std::sig_atomic_t g_signals = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_signals != 0)
    _exit(128 + sig);
  g_signals = 1;
  const char c = static_cast<char>(sig);
  [[maybe_unused]] const auto n = ::write(g_signal_pipe[1], &c, 1);
}

int serve(const ServeCli &c) {
  if (c.fake_engine == !c.model_dir.empty())
    throw UsageError("serve needs exactly one of --model DIR (the GPU engine) or --fake-engine");
  if (c.port < 0 || c.port > 65535)
    throw UsageError(fmt::format("--port {} is not a TCP port", c.port));
  // Before the device and the model: the scheduler would refuse it only after loading the weights.
  const auto devices =
      c.disaggregate_given ? std::optional(check_disaggregate_options(c)) : std::nullopt;
  if (!c.fake_engine && c.speculative != "off" &&
      (c.policy != "continuous" || c.kv_mode != "paged"))
    throw UsageError(fmt::format("--speculative {} needs --policy continuous and --kv-mode paged",
                                 c.speculative));
  const auto pair =
      devices ? std::optional(check_disaggregate_devices(c, *devices)) : std::nullopt;
  // The fake engine needs no GPU: its --device is only checked when given. --disaggregate's two
  // devices were checked above.
  const std::string device = !pair && (!c.fake_engine || c.device_given)
                                 ? check_device(c.device, fmt::format("--device {}", c.device))
                                 : "";
  // Declared before the engine, so destroyed after it: the engine's scheduler calls it to the end.
  const std::unique_ptr<serving::Drafter> drafter = c.fake_engine ? nullptr : make_drafter(c);
  auto engine = c.fake_engine ? make_fake_engine(c)
                : pair        ? make_disaggregated_engine(c, pair->devices, drafter.get())
                              : make_gpu_engine(c, device, drafter.get());
  serving::ServerOptions o;
  o.host = c.host;
  o.port = c.port;
  o.served_model_name = c.served_model_name;
  o.threads = c.threads;
  o.keep_alive_timeout_s = c.keep_alive_timeout_s;
  serving::HttpServer server(*engine, o);

  if (::pipe(g_signal_pipe) != 0)
    throw std::runtime_error("pipe() failed");
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  server.start();
  const auto info = engine->info();
  const std::string where =
      c.fake_engine ? ", fake engine"
      : pair        ? fmt::format(", prefill on device {} ({}), decode on device {} ({})",
                                  pair->devices.prefill, pair->prefill_name, pair->devices.decode,
                                  pair->decode_name)
                    : fmt::format(", device {} ({})", c.device, device);
  std::fprintf(
      stderr,
      "aisp serve: http://%s:%d  model '%s' (vocab %d, context %d)%s; %d connection threads; "
      "SIGINT/SIGTERM drains and stops\n",
      c.host.c_str(), server.port(),
      c.served_model_name.empty() ? info.name.c_str() : c.served_model_name.c_str(),
      info.vocab_size, info.max_context,
      where.c_str(), c.threads);
  char sig = 0;
  while (::read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
  }
  std::fprintf(stderr, "aisp serve: signal %d: draining in-flight requests (again to quit now)\n",
               sig);
  server.stop();
  std::fprintf(stderr, "aisp serve: stopped\n");
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);
  return 0;
}

struct LoadgenCli {
  std::string url;
  double rate = INFINITY;
  int concurrency = 0;
  int num_prompts = 200;
  int input_len = 256;
  int output_len = 128;
  bool output_len_given = false;
  std::string dataset;
  int vocab = 0;
  int vocab_low = 1000;
  std::uint64_t seed = 0;
  std::optional<double> slo_ttft_ms, slo_tpot_ms, slo_e2el_ms;
  std::vector<double> sweep_rates;
  std::string out;
  int warmup = 0;
  std::string model;
  int request_timeout_s = 600;
  double progress_s = 5;
};

std::string rate_text(double rate) { return std::isinf(rate) ? "inf" : fmt::format("{:g}", rate); }

nlohmann::json records_json(const std::vector<serving::RequestRecord> &records) {
  auto out = nlohmann::json::array();
  for (const auto &r : records)
    out.push_back({{"success", r.success},
                   {"error", r.error},
                   {"prompt_tokens", r.prompt_tokens},
                   {"output_tokens", r.output_tokens},
                   {"send_s", r.send_s},
                   {"ttft_s", r.ttft_s},
                   {"e2e_s", r.e2e_s}});
  return out;
}

int loadgen(const LoadgenCli &c) {
  if (c.concurrency < 0)
    throw UsageError("--concurrency must be positive");
  for (const double r : c.sweep_rates)
    if (!(r > 0))
      throw UsageError(fmt::format("--sweep-rates: {} is not a positive rate", r));
  if (!(c.rate > 0))
    throw UsageError("--rate must be positive (inf: all at once)");
  const auto server = serving::probe_server(c.url); // one line and exit 2 when unreachable
  const int vocab = c.vocab > 0 ? c.vocab : server.vocab_size;
  if (vocab <= 0)
    throw UsageError(fmt::format("{} does not report vocab_size: pass --vocab", c.url));
  const std::string model = c.model.empty() ? server.model : c.model;
  const auto prompts =
      c.dataset.empty()
          ? serving::random_prompts(c.num_prompts, c.input_len, c.output_len, c.vocab_low, vocab,
                                    c.seed)
          : serving::load_dataset(c.dataset, c.num_prompts, c.output_len_given ? c.output_len : 0,
                                  c.vocab_low, vocab, server.max_model_len, c.seed);
  if (!c.dataset.empty() && static_cast<int>(prompts.size()) < c.num_prompts)
    std::fprintf(stderr, "loadgen: %s has %zu usable entries, fewer than --num-prompts %d\n",
                 c.dataset.c_str(), prompts.size(), c.num_prompts);
  serving::LoadOptions lo;
  lo.url = c.url;
  lo.model = model;
  lo.max_concurrency = c.concurrency;
  lo.request_timeout_s = c.request_timeout_s;
  lo.seed = c.seed;
  lo.progress_every_s = c.progress_s;
  if (c.warmup > 0) {
    auto warm = lo;
    warm.rate = INFINITY;
    warm.max_concurrency = 1;
    warm.progress_every_s = 0;
    warm.scrape_metrics = false;
    const auto w =
        serving::run_load(warm, serving::random_prompts(c.warmup, std::min(c.input_len, 64), 4,
                                                        c.vocab_low, vocab, c.seed + 1));
    const auto ws = serving::summarize(w.records, w.duration_s, {});
    std::fprintf(stderr, "loadgen: warmup %d requests (%d failed)\n", c.warmup, ws.failed);
  }
  const serving::Slo slo{c.slo_ttft_ms, c.slo_tpot_ms, c.slo_e2el_ms};
  const auto rates = c.sweep_rates.empty() ? std::vector<double>{c.rate} : c.sweep_rates;
  nlohmann::json runs = nlohmann::json::array();
  std::vector<std::pair<double, serving::Summary>> curve;
  int exit_code = 0;
  for (const double rate : rates) {
    lo.rate = rate;
    std::fprintf(stderr, "loadgen: %zu requests to %s at rate %s req/s%s\n", prompts.size(),
                 c.url.c_str(), rate_text(rate).c_str(),
                 c.concurrency > 0 ? fmt::format(", at most {} in flight", c.concurrency).c_str()
                                   : "");
    const auto result = serving::run_load(lo, prompts);
    auto s = serving::summarize(result.records, result.duration_s, slo);
    s.server_overhead = result.server_overhead;
    std::fputs(serving::summary_table(
                   s, fmt::format("rate {} req/s, concurrency {}", rate_text(rate),
                                  c.concurrency > 0 ? std::to_string(c.concurrency) : "unlimited"))
                   .c_str(),
               stdout);
    if (s.failed > 0)
      std::fprintf(stderr, "loadgen: %s\n", serving::failure_line(s).c_str());
    if (s.completed == 0)
      exit_code = static_cast<int>(ExitCode::verdict_failure);
    runs.push_back({{"rate", std::isinf(rate) ? nlohmann::json("inf") : nlohmann::json(rate)},
                    {"max_concurrency", c.concurrency},
                    {"summary", serving::summary_json(s)},
                    {"requests", records_json(result.records)}});
    curve.emplace_back(rate, s);
  }
  if (curve.size() > 1) {
    std::fputs(fmt::format("{:>8} {:>10} {:>10} {:>12} {:>12} {:>12} {:>12} {:>10} {:>7} {:>9}\n",
                           "rate", "req/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms",
                           "TPOT p50 ms", "TPOT p99 ms", "goodput", "failed", "srv ovh")
                   .c_str(),
               stdout);
    for (const auto &[rate, s] : curve) {
      const auto overhead = s.server_overhead ? s.server_overhead->fraction() : std::nullopt;
      std::fputs(
          fmt::format(
              "{:>8} {:>10.2f} {:>10.1f} {:>12.2f} {:>12.2f} {:>12.2f} {:>12.2f} {:>10} {:>7} "
              "{:>9}\n",
              rate_text(rate), s.request_throughput, s.output_throughput, s.ttft_ms.p50,
              s.ttft_ms.p99, s.tpot_ms.p50, s.tpot_ms.p99,
              s.goodput ? fmt::format("{:.2f}", *s.goodput) : "-", s.failed,
              overhead ? fmt::format("{:.2f}%", *overhead * 100) : "-")
              .c_str(),
          stdout);
    }
  }
  if (!c.out.empty()) {
    const auto opt = [](const std::optional<double> &v) {
      return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
    };
    const nlohmann::json doc{{"schema", "aisp.loadgen/1"},
                             {"url", c.url},
                             {"model", model},
                             {"config",
                              {{"num_prompts", prompts.size()},
                               {"dataset", c.dataset},
                               {"input_len", c.dataset.empty() ? c.input_len : 0},
                               {"output_len", c.output_len},
                               {"vocab", vocab},
                               {"vocab_low", c.vocab_low},
                               {"seed", c.seed},
                               {"max_concurrency", c.concurrency},
                               {"warmup", c.warmup},
                               {"slo_ms",
                                {{"ttft", opt(c.slo_ttft_ms)},
                                 {"tpot", opt(c.slo_tpot_ms)},
                                 {"e2el", opt(c.slo_e2el_ms)}}}}},
                             {"runs", runs}};
    try {
      write_file_atomically(c.out, doc.dump(2) + "\n");
    } catch (const std::runtime_error &e) {
      throw UsageError(e.what());
    }
    std::fprintf(stderr, "loadgen: wrote %s\n", c.out.c_str());
  }
  return exit_code;
}

} // namespace

void add_serve_commands(CLI::App &app, Context &ctx) {
  auto s = std::make_shared<ServeCli>();
  auto *serve_cmd = app.add_subcommand(
      "serve", "OpenAI-compatible HTTP server (POST /v1/completions with token-id "
               "prompts, /v1/models, /health, /metrics); docs/serving.md");
  serve_cmd->add_option("--model", s->model_dir, "model folder for the GPU engine");
  serve_cmd->add_flag(
      "--fake-engine", s->fake_engine,
      "test/demo engine: deterministic tokens (token k = (last prompt id + 1 + k) mod vocab) "
      "at a fixed pace, no GPU, no model");
  serve_cmd
      ->add_option("--host", s->host,
                   "address to listen on (loopback unless told: no authentication)")
      ->capture_default_str();
  serve_cmd->add_option("--port", s->port, "TCP port (0: any free one)")->capture_default_str();
  serve_cmd->add_option("--served-model-name", s->served_model_name,
                        "model name clients send and see");
  serve_cmd->add_option("--threads", s->threads, "connection threads = connections served at once")
      ->capture_default_str()
      ->check(positive());
  serve_cmd
      ->add_option("--keep-alive-timeout", s->keep_alive_timeout_s,
                   "seconds an idle keep-alive connection stays open")
      ->capture_default_str()
      ->check(positive());
  auto *device_opt =
      serve_cmd
          ->add_option("--device", s->device,
                       "CUDA device index the GPU engine runs on (checked before loading)")
          ->capture_default_str();
  auto *disaggregate_opt = serve_cmd->add_option(
      "--disaggregate", s->disaggregate,
      "PREFILL,DECODE: two different CUDA device indices, e.g. 0,1: prefill/decode disaggregation, "
      "the model loaded on both, prompts computed on PREFILL, their KV blocks copied to DECODE, "
      "which generates the rest (continuous policy, paged KV, a peer path between the two; the "
      "other engine options apply to each side; instead of --device; checked before loading)");
  serve_cmd
      ->add_option("--cuda-graphs", s->cuda_graphs,
                   "on: replay decode-only steps from captured CUDA graphs; off: every step eager")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  serve_cmd
      ->add_option("--gemm", s->gemm,
                   "Linear-layer kernels: fastest (cuBLASLt or ch10:hgemm's kernel, whichever the start-up "
                   "timing finds faster per shape), cublaslt, or hgemm (ch10:hgemm wherever it takes the shape)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fastest", "cublaslt", "hgemm"}));
  serve_cmd->add_option("--block-size", s->block_size, "tokens per KV block: 8, 16 or 32")
      ->capture_default_str();
  serve_cmd
      ->add_option("--num-kv-blocks", s->num_kv_blocks,
                   "KV blocks in the pool (0: --kv-memory-fraction)")
      ->capture_default_str()
      ->check(non_negative());
  serve_cmd
      ->add_option("--kv-memory-fraction", s->kv_memory_fraction,
                   "share of the GPU memory free after weights and workspace given to the KV pool")
      ->capture_default_str()
      ->check(not_nan())->check(CLI::Range(0.01, 0.99));
  serve_cmd
      ->add_option("--max-batched-tokens", s->max_batched_tokens, "token budget of one engine step")
      ->capture_default_str()
      ->check(positive());
  serve_cmd
      ->add_option("--max-context", s->max_context, "prompt + generated tokens (0: the model's)")
      ->capture_default_str()
      ->check(non_negative());
  serve_cmd
      ->add_option("--max-running", s->max_running,
                   "sequences decoded together (holding KV blocks)")
      ->capture_default_str()
      ->check(positive());
  serve_cmd->add_option("--max-waiting", s->max_waiting, "queued requests before 429")
      ->capture_default_str()
      ->check(positive());
  serve_cmd
      ->add_option("--policy", s->policy, "continuous or static (padded batches run to completion)")
      ->capture_default_str();
  serve_cmd
      ->add_option("--kv-mode", s->kv_mode,
                   "paged (blocks on demand) or reserved (whole context at admission)")
      ->capture_default_str();
  serve_cmd->add_flag("--no-chunked-prefill", s->no_chunked_prefill,
                      "run a prompt only when it fits one step's budget whole");
  serve_cmd
      ->add_option("--prefix-cache", s->prefix_cache,
                   "on: reuse the KV blocks of cached prompt prefixes (continuous policy, paged KV)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  serve_cmd
      ->add_option("--speculative", s->speculative,
                   "prompt-lookup: speculative decoding with n-gram drafts from the prompt and output, "
                   "verified greedily (same tokens, fewer steps when drafts hit; continuous policy, "
                   "paged KV; with --disaggregate, on the decode side only)")
      ->capture_default_str()
      ->check(CLI::IsMember({"off", "prompt-lookup"}));
  serve_cmd
      ->add_option("--num-draft", s->num_draft,
                   "--speculative: draft tokens proposed per sequence and step (k)")
      ->capture_default_str()
      ->check(positive());
  serve_cmd
      ->add_option("--fake-token-delay-ms", s->fake_token_delay_ms,
                   "--fake-engine: time of one decode step")
      ->capture_default_str()
      ->check(non_negative());
  serve_cmd->add_option("--fake-vocab", s->fake_vocab, "--fake-engine: vocabulary size")
      ->capture_default_str()
      ->check(positive());
  serve_cmd
      ->add_option("--fake-max-context", s->fake_max_context,
                   "--fake-engine: prompt + generated limit")
      ->capture_default_str()
      ->check(positive());
  serve_cmd
      ->add_option("--fake-max-running", s->fake_max_running,
                   "--fake-engine: requests decoded together")
      ->capture_default_str()
      ->check(positive());
  serve_cmd
      ->add_option("--fake-max-waiting", s->fake_max_waiting,
                   "--fake-engine: queue length before 429")
      ->capture_default_str()
      ->check(positive());
  serve_cmd->callback([s, device_opt, disaggregate_opt, &ctx] {
    s->device_given = device_opt->count() > 0;
    s->disaggregate_given = disaggregate_opt->count() > 0;
    ctx.exit_code = serve(*s);
  });

  auto l = std::make_shared<LoadgenCli>();
  auto *lg = app.add_subcommand(
      "loadgen", "measure a serving endpoint: streamed completions with random token-id "
                 "prompts, TTFT/TPOT/ITL/E2EL and goodput as vLLM's "
                 "benchmark_serving.py defines them; docs/serving.md");
  lg->add_option("--url", l->url, "server, e.g. http://127.0.0.1:8000")->required();
  lg->add_option("--rate", l->rate, "requests per second, Poisson arrivals (inf: all at once)")
      ->capture_default_str();
  lg->add_option("--concurrency", l->concurrency,
                 "at most this many requests in flight (0: no limit)")
      ->capture_default_str();
  lg->add_option("--num-prompts", l->num_prompts, "requests per run")
      ->capture_default_str()
      ->check(positive());
  lg->add_option("--input-len", l->input_len, "prompt tokens (random prompts)")
      ->capture_default_str()
      ->check(positive());
  auto *out_len =
      lg->add_option("--output-len", l->output_len, "tokens generated per request (ignore_eos)")
          ->capture_default_str()
          ->check(positive());
  lg->add_option("--dataset", l->dataset,
                 "ShareGPT JSON (lengths = characters / 4) or pre-tokenized entries")
      ->check(CLI::ExistingFile);
  lg->add_option("--vocab", l->vocab,
                 "prompt ids are drawn below this (default: the server's vocab_size)");
  lg->add_option("--vocab-low", l->vocab_low,
                 "prompt ids are drawn from this up (keeps special tokens out)")
      ->capture_default_str()
      ->check(non_negative());
  lg->add_option("--seed", l->seed, "seed of prompts and arrivals")->capture_default_str();
  lg->add_option("--slo-ttft-ms", l->slo_ttft_ms, "goodput SLO on time to first token")
      ->check(positive());
  lg->add_option("--slo-tpot-ms", l->slo_tpot_ms, "goodput SLO on time per output token")
      ->check(positive());
  lg->add_option("--slo-e2el-ms", l->slo_e2el_ms, "goodput SLO on end-to-end latency")
      ->check(positive());
  lg->add_option("--sweep-rates", l->sweep_rates,
                 "run once per rate (comma-separated); one JSON with the curve")
      ->delimiter(',');
  lg->add_option("--out", l->out, "write the results JSON here");
  lg->add_option("--warmup", l->warmup, "requests sent one by one before measuring")
      ->capture_default_str()
      ->check(non_negative());
  lg->add_option("--model", l->model, "model name to send (default: the server's)");
  lg->add_option("--request-timeout", l->request_timeout_s,
                 "seconds a request may stall before it fails")
      ->capture_default_str()
      ->check(positive());
  lg->add_option("--progress", l->progress_s, "seconds between progress lines on stderr (0: none)")
      ->capture_default_str()
      ->check(non_negative());
  lg->callback([l, out_len, &ctx] {
    l->output_len_given = out_len->count() > 0;
    ctx.exit_code = loadgen(*l);
  });
}

} // namespace aisp::cli
