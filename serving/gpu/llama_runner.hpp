// LlamaRunner: the GPU ModelRunner for Llama-3 (serving/runner_api.hpp), a BF16 forward pass over a paged
// KV cache. Plain C++ header (no CUDA types), so that the engine and the server include it freely; the
// kernels are in serving/gpu/*.cu, the data flow of a step in docs/serving-runner.md.
#pragma once

#include <memory>
#include <vector>

#include "serving/model_config.hpp"
#include "serving/model_weights.hpp"
#include "serving/runner_api.hpp"

namespace aisp::serving {

// Which attention kernels a step uses: the fast ones (split-KV decode, tensor-core prefill) or the clear
// reference kernel for everything (slow; for debugging a mismatch).
enum class AttentionPath { fast, reference };

enum class GemmChoice { fastest, cublaslt, hgemm };

struct RunnerOptions {
  int block_size = 16;               // tokens per KV block: 8, 16 or 32 (the block manager's)
  int num_kv_blocks = 0;             // > 0: exactly this many; 0: kv_memory_fraction of the free memory
  double kv_memory_fraction = 0.9;   // of what cudaMemGetInfo reports free after weights and workspace
  int max_batched_tokens = 8192;     // the largest step (sum of tokens over its sequences)
  int max_context = 0;               // longest sequence (positions); 0: config.max_position_embeddings
  AttentionPath attention = AttentionPath::fast;
  // Decode-only steps (every sequence one token, all sampled) replayed from CUDA graphs captured per
  // (batch bucket, context bucket); other steps run eagerly. See docs/serving-runner.md, "CUDA graphs".
  bool cuda_graphs = false;
  // At construction, time cuBLASLt's candidates (and ch10:hgemm step 08's kernel where it takes the
  // shape) for every decode-sized GEMM shape (the graphs' batch buckets up to 256 rows, x the five Linear
  // shapes) and for the four layer shapes of a full max_batched_tokens step, and keep the fastest; lines
  // on stderr say what won (gpu::Gemm::tune). Off: cuBLASLt's heuristic's first choice everywhere.
  bool tune_gemms = true;
  // Which kernel runs a Linear layer: the faster of cuBLASLt and ch10:hgemm step 08's kernel for each tuned
  // shape (fastest; cuBLASLt elsewhere), cuBLASLt alone (cublaslt), or ch10:hgemm's kernel in every shape
  // it takes (rows and n multiples of 256, k of 64), tuned or not, faster or not (hgemm: for tests and for
  // measuring the kernel inside the engine). `aisp serve --gemm`.
  GemmChoice gemm = GemmChoice::fastest;
  // > 0: run only the model's first num_layers decoder layers, then its final norm and lm_head: a
  // layer-skipping draft of the same model for speculative decoding (the early-exit drafts of LayerSkip,
  // Elhoushi et al. 2024, and of self-speculative decoding), sharing its vocabulary by construction.
  // 0: every layer.
  int num_layers = 0;
  // The five Linear weights of every layer (fused qkv, o, fused gate_up, down) kept as FP8 e4m3 with one
  // fp32 scale per output channel (amax / 448), quantized once on the GPU from the bf16 weights at
  // construction; each of those GEMMs quantizes its input rows per token just before it (serving/gpu/
  // fp8_quant.cu) and runs on cuBLASLt's FP8 tensor-core path with both scale vectors (fp8_gemm.hpp). A
  // decode step then reads half the bytes of those weights: a draft of the same model for speculative
  // decoding that agrees with it except where FP8 rounding flips a near-tie. The embedding and lm_head stay
  // bf16 (so does everything else: norms, RoPE, attention, the KV cache): the draft's argmax over the
  // vocabulary is what must agree with the target's, and the last projection is where a rounding turns
  // into a different token most directly. Needs hidden and intermediate sizes multiples of 16 (16-byte
  // rows of codes) and cuBLASLt's outer-vector FP8 scaling (cuBLAS 12.9+, sm_90); refused with
  // aisp::UsageError where cuBLASLt does not offer it. GemmChoice and tune_gemms then concern the lm_head
  // only (the FP8 GEMMs take cuBLASLt's heuristic's first algorithm).
  bool fp8_weights = false;
};

// One token of a teacher-forced sequence: the logit the model gives it after the tokens before it, and the
// largest logit of that row with its token (bf16 values as the model computes them).
struct TokenScore {
  float logit = 0;
  float best_logit = 0;
  TokenId best = -1;
};

// What the CUDA-graph path did so far (RunnerOptions::cuda_graphs).
struct GraphStats {
  int captured = 0;               // graphs captured: one per decode shape (sequences, table width) seen
  std::int64_t replays = 0;       // steps replayed from a graph
  std::int64_t eager_steps = 0;   // steps launched kernel by kernel (prefill or mixed, or graphs off)
  std::int64_t padding_rows = 0;  // padding sequences computed by replays (a batch of 5 runs as 8)
};

class LlamaRunner final : public ModelRunner {
 public:
  // Uploads the weights (q/k/v fused into one matrix, gate/up into another), allocates the workspace and
  // the KV pool on the current CUDA device. Throws aisp::UsageError for options it cannot honour (too
  // little memory, a block size the kernels lack), aisp::DataError for a model it cannot run (head_dim
  // other than 64 or 128, a group of more than 8 query heads per KV head), aisp::CudaError on CUDA errors.
  LlamaRunner(const ModelWeights& weights, const RunnerOptions& options = {});
  ~LlamaRunner() override;
  LlamaRunner(const LlamaRunner&) = delete;
  LlamaRunner& operator=(const LlamaRunner&) = delete;

  // One engine step (runner_api.hpp). A batch that breaks the contract (a token id outside the vocabulary,
  // a block id outside the pool, a block table too short for the positions, more than
  // max_batched_tokens tokens, another block_size) is refused with aisp::UsageError before any GPU work.
  StepResult step(const StepBatch& batch) override;

  [[nodiscard]] int num_kv_blocks() const override;
  [[nodiscard]] int block_size() const override;
  [[nodiscard]] int max_batched_tokens() const override;
  [[nodiscard]] int vocab_size() const override;
  [[nodiscard]] int max_context() const override;
  [[nodiscard]] const ModelConfig& config() const;

  // Prefill/decode disaggregation (runner_api.hpp): copies the K/V of `source`'s blocks (another
  // LlamaRunner of the same attention shape and block size, on this device or another one) into this
  // runner's, with ch15:kv_transfer step 03's kernel run here, loading over the peer mapping (enabled
  // the first time a device is met; aisp::UsageError when there is no peer path). Synchronous: the
  // blocks are in place when it returns, so that the source's engine may reuse its blocks.
  void copy_kv_blocks_from(ModelRunner& source, std::span<const std::int32_t> src_blocks,
                           std::span<const std::int32_t> dst_blocks) override;

  // Turns graph replay of decode steps on or off between steps (the serving ladder's steps share one
  // runner). Graphs already captured are kept for when it is turned on again.
  void set_cuda_graphs(bool on);
  [[nodiscard]] GraphStats graph_stats() const;
  // Captures now (with cuda_graphs on) the decode graph of every shape a step of up to max_seqs
  // sequences with contexts up to `context` tokens can take, so that no step captures one: otherwise a
  // shape's first step runs eagerly and captures its graph, and a launch that meets new shapes (a batch
  // that shrinks at another point, say) pays for captures that a repeat of it does not.
  void capture_graphs(int max_seqs, int context);
  // Plans the GEMMs of eager steps of 1 to `max_rows` rows (at most max_batched_tokens) and runs each
  // once now, so that no step is the first of its shape: the decode buckets are planned at construction,
  // but a step of another row count (a speculative verification's sum of 1 + drafts over the batch, say)
  // would make its plan the first time it runs and, where that plan picks a cuBLASLt kernel not run
  // before, wait for the lazy module loader to load it (CUDA_MODULE_LOADING=LAZY, the default): one-time
  // costs that a later step of the same count does not repeat. Also sizes the eager step's metadata,
  // sampled-id and split-KV buffers for such steps, so that none grows (a cudaFree) during a step. The
  // step buffers are scratch between steps; the KV cache is not touched.
  void prepare_eager_steps(int max_rows);
  // What the start-up tuning chose for the four layer GEMMs of a max_batched_tokens step, with the
  // timings, e.g. "qkv cuBLASLt (cuBLASLt 0.412 ms, ch10:hgemm 0.455 ms); o ..."; empty if not tuned.
  [[nodiscard]] const std::string& full_step_gemms() const;

  // For tests: the logits (vocab floats per position, bf16 values as the model computes them) of every
  // position of `prompt`, run as a fresh sequence in chunks of max_batched_tokens. Uses KV blocks 0, 1, ...
  // as scratch: never call it while an engine owns this runner's cache.
  [[nodiscard]] std::vector<float> prefill_logits(const std::vector<TokenId>& prompt);
  // Teacher forcing: runs `sequence` as a fresh sequence (KV blocks 0, 1, ... as scratch, as above) and
  // scores its tokens from index `first` (>= 1) on: entry j is token sequence[first + j] against the
  // logits of the position before it. The serving ladder's gate judges generated tokens with it.
  [[nodiscard]] std::vector<TokenScore> score_tokens(const std::vector<TokenId>& sequence, int first);
  // The same for several prompts in one step (a ragged batch; their total must fit max_batched_tokens).
  [[nodiscard]] std::vector<std::vector<float>> prefill_logits(const std::vector<std::vector<TokenId>>& prompts);

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace aisp::serving
