// LlamaRunner: weights upload, memory plan and the layer loop of a step (docs/serving-runner.md).
// Host code only: every kernel is launched through serving/gpu/kernels.hpp and attention.hpp, every
// matrix product through gpu::Gemm, all on the runner's own stream; a step synchronizes once, when the
// sampled ids come back.
#include "serving/gpu/llama_runner.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/cublas_check.hpp"
#include "device/cuda_check.hpp"
#include "device/peer_access.hpp"
#include "serving/gpu/attention.hpp"
#include "serving/gpu/fp8_gemm.hpp"
#include "serving/gpu/fp8_quant.hpp"
#include "serving/gpu/gemm.hpp"
#include "serving/gpu/kernels.hpp"
#include "serving/gpu/kv_transfer.hpp"
#include "serving/gpu/rope.hpp"
#include "serving/gpu/step_metadata.hpp"

namespace aisp::serving {

using gpu::bf16;

namespace {

// Rows of logits computed at once: the lm_head output for 256 rows of a 128256-token vocabulary is 66 MB.
constexpr int k_logit_rows = 256;

// Page-locked host memory, so that cudaMemcpyAsync is truly asynchronous. Grows, never shrinks.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() {
    if (m_data) cudaFreeHost(m_data);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* reserve(std::size_t bytes) {
    if (bytes > m_bytes) {
      if (m_data) AISP_CUDA_CHECK(cudaFreeHost(m_data));
      m_data = nullptr;
      AISP_CUDA_CHECK(cudaHostAlloc(&m_data, bytes, cudaHostAllocDefault));
      m_bytes = bytes;
    }
    return m_data;
  }

 private:
  void* m_data = nullptr;
  std::size_t m_bytes = 0;
};

template <class T>
void reserve(DeviceBuffer<T>& buffer, std::size_t count) {
  if (buffer.size() < count) buffer = DeviceBuffer<T>(count);
}

// A Linear weight [n][k]: bf16 (w), or with RunnerOptions::fp8_weights e4m3 codes [n][k] and one fp32
// scale per row n, an output channel (w is then null once the construction has quantized it).
struct LinearWeight {
  bf16* w = nullptr;
  std::uint8_t* codes = nullptr;
  float* scale = nullptr;
};

struct LayerWeights {
  bf16* input_norm;
  LinearWeight qkv;  // [(heads + 2 kv_heads) * head_dim][hidden]: q_proj, k_proj, v_proj stacked
  LinearWeight o;    // [hidden][heads * head_dim]
  bf16* post_norm;
  LinearWeight gate_up;  // [2 * intermediate][hidden]: gate_proj then up_proj
  LinearWeight down;     // [hidden][intermediate]
};

std::string dims(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

struct LlamaRunner::Impl {
  ModelConfig cfg;
  RunnerOptions opt;
  int hidden = 0, inter = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0, qkv_cols = 0;
  int max_context = 0, num_blocks = 0, sm_count = 0;
  int device = 0;  // the device current at construction: made current again by every call (the engine
                   // steps from its own thread, whose current device is 0 unless set)
  cudaStream_t stream = nullptr;

  DeviceBuffer<bf16> weights;
  bf16* embed = nullptr;
  bf16* final_norm = nullptr;
  bf16* lm_head = nullptr;
  std::vector<LayerWeights> layers;
  DeviceBuffer<float> inv_freq;

  DeviceBuffer<bf16> kv;  // [layers][K, V][num_blocks][kv_heads][block_size][head_dim]
  std::int64_t pool_elems = 0;
  // Disaggregation (copy_kv_blocks_from): the devices whose memory this one may read, and the copy's
  // source and destination block tables here.
  std::set<int> peers;
  DeviceBuffer<std::int32_t> transfer_tables;

  DeviceBuffer<bf16> residual, x, qkv, attn, proj, gate_up, logits;
  DeviceBuffer<std::int32_t> sampled, meta;
  DeviceBuffer<float> scratch;
  DeviceBuffer<std::int32_t> score_ids;  // forward()'s `next`, on the GPU
  DeviceBuffer<float> score_logits;      // per row: the `next` token's logit, then the best one's
  PinnedBuffer meta_host, ids_host;
  std::unique_ptr<gpu::Gemm> gemm;

  // RunnerOptions::fp8_weights: every layer's Linear weights as e4m3 codes and their per-channel scales
  // (one allocation each), and a step's activations quantized per token into act8 / act_scale (sized for
  // max_batched_tokens rows of the widest k, allocated once: CUDA graphs bake their addresses in).
  DeviceBuffer<std::uint8_t> weights8, act8;
  DeviceBuffer<float> weight_scales, act_scale;
  std::unique_ptr<gpu::Fp8Gemm> fp8;

  // CUDA graphs of decode steps (docs/serving-runner.md, "CUDA graphs"), one per (sequences, table width):
  // a graph bakes in its kernels' arguments, so everything it reads or writes lives at a fixed address
  // (graph_meta, graph_scratch and the buffers above, never reallocated once a graph exists).
  std::map<std::pair<int, int>, cudaGraphExec_t> graphs;
  DeviceBuffer<std::int32_t> graph_meta;
  DeviceBuffer<float> graph_scratch;
  int pad_block = -1;  // one KV block past the pool: padding sequences write and read only it
  GraphStats graph_stats;

  Impl(const ModelWeights& w, const RunnerOptions& o);
  ~Impl() {
    for (auto& [key, exec] : graphs) cudaGraphExecDestroy(exec);
    if (stream) cudaStreamDestroy(stream);
  }
  void check_shapes() const;
  void upload(const ModelWeights& w);
  // fp8_weights: a layer's bf16 Linear weights (at w.w, in a staging buffer) to codes and scales taken from
  // the next free places of weights8 and weight_scales.
  void quantize_weight(LinearWeight& w, int n, int k, std::uint8_t*& codes, float*& scales);
  // fp8_weights: the FP8 GEMM, its activation buffers, and its plans for every decode bucket's four layer
  // shapes (so that no graph-replayed step's first run makes one). UsageError where cuBLASLt refuses.
  void prepare_fp8();
  // out = in * W^T for one of a layer's Linear weights: bf16 through gemm, or (fp8_weights) in's rows
  // quantized to e4m3 per token, then the FP8 product with both scale vectors.
  void linear(const bf16* in, int ld_in, const LinearWeight& w, bf16* out, int ld_out, int rows, int n, int k);
  void allocate_kv();
  gpu::StepLimits limits() const {
    return {opt.block_size, num_blocks, opt.max_batched_tokens, max_context, vocab};
  }
  // Runs the batch; argmax of every logit row into `ids`, and the rows' logits into `logits` if given
  // (rows from `first_kept_row` on: the rows before it are computed, not copied back). With `next` (a
  // token id per logit row, < 0 for a row not scored), also each scored row's logit of its token, its
  // largest logit and its argmax into `scored`, in row order, gathered on the GPU: the judge needs no
  // more, and copying whole rows of a 128K vocabulary to the host cost it most of its time.
  void forward(const gpu::StepMetadata& md, std::vector<TokenId>& ids, std::vector<float>* logits,
               int first_kept_row = 0, const std::vector<std::int32_t>* next = nullptr,
               std::vector<TokenScore>* scored = nullptr);

  // The layers of a step, from the embedding to the final norm of its logit rows (into x's top rows), on
  // metadata already at `d`; the decode kernel splits per `plan` with partials in `scratch`.
  void enqueue_layers(const gpu::StepMetadata& md, const std::int32_t* d, const gpu::DecodePlan& plan,
                      float* scratch);
  [[nodiscard]] gpu::AttentionArgs attention_args(const gpu::StepMetadata& md, const std::int32_t* d) const;

  // CUDA graphs: the shapes, whether a batch qualifies, the buffers, and the step itself.
  [[nodiscard]] int largest_graph_batch() const { return std::min({opt.max_batched_tokens, k_logit_rows, 256}); }
  [[nodiscard]] int max_pages() const { return (max_context + opt.block_size - 1) / opt.block_size; }
  [[nodiscard]] static int batch_bucket(int n) { return n <= 8 ? std::bit_ceil(static_cast<unsigned>(n)) : (n + 7) / 8 * 8; }
  // Every sequence count graph_step can pad to: the buckets up to largest_graph_batch(), then it itself.
  [[nodiscard]] std::vector<int> graph_batch_sizes() const {
    std::vector<int> sizes;
    for (int n = 1; n < largest_graph_batch(); n = batch_bucket(n + 1)) sizes.push_back(n);
    sizes.push_back(largest_graph_batch());
    return sizes;
  }
  [[nodiscard]] int page_bucket(int pages) const {
    return std::min(max_pages(), static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(pages, 16)))));
  }
  // Every width graph_step can pick: the powers of two from 16 pages, then max_pages() itself (which need
  // not be a power of two, and whose plan may split more than the power of two below it).
  [[nodiscard]] std::vector<int> graph_page_widths() const {
    std::vector<int> widths;
    for (int pages = 16;; pages *= 2) {
      widths.push_back(page_bucket(pages));
      if (widths.back() == max_pages()) return widths;
    }
  }
  [[nodiscard]] bool graphable(const StepBatch& batch) const;
  void tune_gemms();
  std::string full_step_gemms;  // what tune_gemms chose for a max_batched_tokens step (full_step_gemms())
  void prepare_graphs();
  void graph_step(const StepBatch& batch, std::vector<TokenId>& ids);
  void upload_graph_meta(const gpu::StepMetadata& md);
  void run_and_capture(const gpu::StepMetadata& md, const gpu::DecodePlan& plan, int seqs, int pages);
  void capture_graphs(int max_seqs, int context);
  template <class F>
  cudaGraphExec_t capture(F&& enqueue);
};

LlamaRunner::Impl::Impl(const ModelWeights& w, const RunnerOptions& o) : cfg(w.config()), opt(o) {
  if (opt.num_layers < 0 || opt.num_layers > cfg.num_hidden_layers) {
    throw UsageError("LlamaRunner: num_layers must be in [0, " + std::to_string(cfg.num_hidden_layers) +
                     "] (0: all), got " + std::to_string(opt.num_layers));
  }
  // A layer-skipping draft is this model cut after its first num_layers layers: from here on the runner
  // is the shorter model (weights uploaded, KV allocated and config() reported for those layers only).
  if (opt.num_layers > 0) cfg.num_hidden_layers = opt.num_layers;
  hidden = cfg.hidden_size;
  inter = cfg.intermediate_size;
  heads = cfg.num_attention_heads;
  kv_heads = cfg.num_key_value_heads;
  head_dim = cfg.head_dim;
  vocab = cfg.vocab_size;
  qkv_cols = (heads + 2 * kv_heads) * head_dim;
  max_context = opt.max_context > 0 ? opt.max_context : cfg.max_position_embeddings;
  check_shapes();

  AISP_CUDA_CHECK(cudaGetDevice(&device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  upload(w);

  const auto t = static_cast<std::size_t>(opt.max_batched_tokens);
  residual = DeviceBuffer<bf16>(t * hidden);
  x = DeviceBuffer<bf16>(t * hidden);
  proj = DeviceBuffer<bf16>(t * hidden);
  qkv = DeviceBuffer<bf16>(t * qkv_cols);
  attn = DeviceBuffer<bf16>(t * heads * head_dim);
  gate_up = DeviceBuffer<bf16>(t * 2 * inter);
  logits = DeviceBuffer<bf16>(static_cast<std::size_t>(std::min(opt.max_batched_tokens, k_logit_rows)) * vocab);
  sampled = DeviceBuffer<std::int32_t>(t);
  gemm = std::make_unique<gpu::Gemm>();
  gemm->set_tile_policy(opt.gemm == GemmChoice::cublaslt ? gpu::TilePolicy::never
                        : opt.gemm == GemmChoice::hgemm  ? gpu::TilePolicy::always
                                                         : gpu::TilePolicy::compete);
  if (opt.fp8_weights) prepare_fp8();
  if (opt.tune_gemms) tune_gemms();  // before the KV pool takes the free memory it leaves
  allocate_kv();
  if (opt.cuda_graphs) prepare_graphs();
}

void LlamaRunner::Impl::check_shapes() const {
  const auto model_error = [](const std::string& why) { throw DataError("LlamaRunner: the model " + why); };
  if (cfg.hidden_size % 8 != 0 || cfg.intermediate_size % 8 != 0) {
    model_error("needs hidden_size and intermediate_size multiples of 8 (16-byte rows)");
  }
  if (cfg.hidden_size > 16384) model_error("has hidden_size > 16384, more than the RMSNorm kernel holds");
  if (kv_heads <= 0 || heads % kv_heads != 0) model_error("has heads not a multiple of kv_heads");
  if (head_dim != 64 && head_dim != 128) {
    model_error("has head_dim " + std::to_string(head_dim) + "; the attention kernels take 64 or 128");
  }
  if (heads / kv_heads > 8) model_error("has more than 8 query heads per KV head");
  if (opt.fp8_weights && (cfg.hidden_size % 16 != 0 || cfg.intermediate_size % 16 != 0)) {
    model_error("needs hidden_size and intermediate_size multiples of 16 for fp8_weights (16-byte rows of codes)");
  }
  if (!gpu::attention_supports(head_dim, opt.block_size, heads / kv_heads)) {
    throw UsageError("LlamaRunner: block_size must be 8, 16 or 32, got " + std::to_string(opt.block_size));
  }
  if (opt.max_batched_tokens < 1) throw UsageError("LlamaRunner: max_batched_tokens must be >= 1");
  if (max_context < 1 || max_context >= (1 << 24)) {
    // Positions are converted to fp32 for RoPE (as HF's position_ids.float()): exact below 2^24.
    throw UsageError("LlamaRunner: max_context must be in [1, 2^24), got " + std::to_string(max_context));
  }
  if (opt.num_kv_blocks < 0 || !(opt.kv_memory_fraction > 0.0 && opt.kv_memory_fraction <= 1.0)) {
    throw UsageError("LlamaRunner: num_kv_blocks must be >= 0 and kv_memory_fraction in (0, 1]");
  }
}

void LlamaRunner::Impl::upload(const ModelWeights& w) {
  const std::int64_t h = hidden;
  const bool fp8 = opt.fp8_weights;
  const std::int64_t linear = qkv_cols * h + h * heads * head_dim + 2 * inter * h + h * inter;  // per layer
  const std::int64_t per_layer = 2 * h + (fp8 ? 0 : linear);
  const std::int64_t vh = static_cast<std::int64_t>(vocab) * h;
  const std::int64_t total = vh + cfg.num_hidden_layers * per_layer + h + (cfg.tie_word_embeddings ? 0 : vh);
  weights = DeviceBuffer<bf16>(static_cast<std::size_t>(total));
  bf16* next = weights.data();
  // fp8_weights: a layer's Linear weights wait in `staging` (bf16, one layer's worth) for quantization.
  DeviceBuffer<bf16> staging;
  std::uint8_t* next_codes = nullptr;
  float* next_scales = nullptr;
  if (fp8) {
    staging = DeviceBuffer<bf16>(static_cast<std::size_t>(linear));
    weights8 = DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(cfg.num_hidden_layers * linear));
    weight_scales = DeviceBuffer<float>(static_cast<std::size_t>(cfg.num_hidden_layers) *
                                        static_cast<std::size_t>(qkv_cols + h + 2 * inter + h));
    next_codes = weights8.data();
    next_scales = weight_scales.data();
  }
  bf16* stage = nullptr;
  // Copies tensor `name` (bf16, rows x cols) to the next free place of the weight buffer (or to `dst`).
  const auto put = [&](const std::string& name, std::int64_t rows, std::int64_t cols, bf16* dst = nullptr) {
    const TensorData& t = w.at(name);
    const std::vector<std::int64_t> want = cols == 1 ? std::vector<std::int64_t>{rows} : std::vector{rows, cols};
    if (t.dtype != "BF16" || t.shape != want || static_cast<std::int64_t>(t.bytes.size()) != rows * cols * 2) {
      throw DataError("LlamaRunner: tensor " + name + " is " + t.dtype + " " + dims(t.shape) + ", expected BF16 " +
                      dims(want));
    }
    bf16* at = dst ? dst : std::exchange(next, next + rows * cols);
    AISP_CUDA_CHECK(cudaMemcpy(at, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice));
    return at;
  };
  // A Linear weight's tensor: into the weight buffer, or (fp8) into this layer's staging.
  const auto put_linear = [&](const std::string& name, std::int64_t rows, std::int64_t cols) {
    return fp8 ? put(name, rows, cols, std::exchange(stage, stage + rows * cols)) : put(name, rows, cols);
  };
  embed = put("model.embed_tokens.weight", vocab, h);
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    LayerWeights lw{};
    stage = staging.data();
    lw.input_norm = put(layer_tensor(l, "input_layernorm.weight"), h, 1);
    lw.qkv.w = put_linear(layer_tensor(l, "self_attn.q_proj.weight"), static_cast<std::int64_t>(heads) * head_dim, h);
    put_linear(layer_tensor(l, "self_attn.k_proj.weight"), static_cast<std::int64_t>(kv_heads) * head_dim, h);
    put_linear(layer_tensor(l, "self_attn.v_proj.weight"), static_cast<std::int64_t>(kv_heads) * head_dim, h);
    lw.o.w = put_linear(layer_tensor(l, "self_attn.o_proj.weight"), h, static_cast<std::int64_t>(heads) * head_dim);
    lw.post_norm = put(layer_tensor(l, "post_attention_layernorm.weight"), h, 1);
    lw.gate_up.w = put_linear(layer_tensor(l, "mlp.gate_proj.weight"), inter, h);
    put_linear(layer_tensor(l, "mlp.up_proj.weight"), inter, h);
    lw.down.w = put_linear(layer_tensor(l, "mlp.down_proj.weight"), h, inter);
    if (fp8) {
      // cudaMemcpy from pageable memory may return before its DMA lands, and it runs on the legacy stream,
      // which the runner's non-blocking stream does not wait for: wait for the device, then quantize.
      AISP_CUDA_CHECK(cudaDeviceSynchronize());
      quantize_weight(lw.qkv, qkv_cols, hidden, next_codes, next_scales);
      quantize_weight(lw.o, hidden, heads * head_dim, next_codes, next_scales);
      quantize_weight(lw.gate_up, 2 * inter, hidden, next_codes, next_scales);
      quantize_weight(lw.down, hidden, inter, next_codes, next_scales);
      AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // the next layer overwrites the staging
    }
    layers.push_back(lw);
  }
  final_norm = put("model.norm.weight", h, 1);
  lm_head = cfg.tie_word_embeddings ? embed : put("lm_head.weight", vocab, h);

  const std::vector<float> freq = gpu::rope_inv_freq(cfg);
  inv_freq = DeviceBuffer<float>(freq.size());
  AISP_CUDA_CHECK(cudaMemcpy(inv_freq.data(), freq.data(), freq.size() * sizeof(float), cudaMemcpyHostToDevice));
}

void LlamaRunner::Impl::quantize_weight(LinearWeight& w, int n, int k, std::uint8_t*& codes, float*& scales) {
  w.codes = std::exchange(codes, codes + static_cast<std::int64_t>(n) * k);
  w.scale = std::exchange(scales, scales + n);
  gpu::launch_quantize_rows_e4m3(w.w, k, n, k, w.codes, w.scale, stream);
  w.w = nullptr;  // the staging it pointed into is about to be reused, then freed
}

void LlamaRunner::Impl::prepare_fp8() {
  const auto t = static_cast<std::size_t>(opt.max_batched_tokens);
  act8 = DeviceBuffer<std::uint8_t>(t * static_cast<std::size_t>(std::max({hidden, heads * head_dim, inter})));
  act_scale = DeviceBuffer<float>(t);
  try {
    fp8 = std::make_unique<gpu::Fp8Gemm>();
    const LayerWeights& lw = layers.front();
    for (const int rows : graph_batch_sizes()) {
      fp8->prepare(rows, qkv_cols, hidden, qkv_cols, act_scale.data(), lw.qkv.scale);
      fp8->prepare(rows, hidden, heads * head_dim, hidden, act_scale.data(), lw.o.scale);
      fp8->prepare(rows, 2 * inter, hidden, 2 * inter, act_scale.data(), lw.gate_up.scale);
      fp8->prepare(rows, hidden, inter, hidden, act_scale.data(), lw.down.scale);
    }
  } catch (const CublasError& e) {
    if (e.status() != CUBLAS_STATUS_NOT_SUPPORTED) throw;
    throw UsageError(std::string("LlamaRunner: fp8_weights is not available here: ") + e.what());
  }
}

void LlamaRunner::Impl::linear(const bf16* in, int ld_in, const LinearWeight& w, bf16* out, int ld_out, int rows,
                               int n, int k) {
  if (w.codes == nullptr) {
    gemm->run(in, ld_in, w.w, out, ld_out, rows, n, k, stream);
    return;
  }
  gpu::launch_quantize_rows_e4m3(in, ld_in, rows, k, act8.data(), act_scale.data(), stream);
  fp8->run(act8.data(), act_scale.data(), w.codes, w.scale, out, ld_out, rows, n, k, stream);
}

void LlamaRunner::Impl::allocate_kv() {
  pool_elems = 0;  // per layer and per K or V, set below once the block count is known
  const std::int64_t block_elems = static_cast<std::int64_t>(kv_heads) * opt.block_size * head_dim;
  const std::int64_t block_bytes = 2 * 2 * block_elems * cfg.num_hidden_layers;  // K and V, bf16, all layers
  std::int64_t blocks = opt.num_kv_blocks;
  if (blocks == 0) {
    std::size_t free = 0, total = 0;
    AISP_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    blocks = static_cast<std::int64_t>(static_cast<double>(free) * opt.kv_memory_fraction) / block_bytes - 1;
  }
  // Slots (block * block_size + offset) are int32 in the step metadata.
  blocks = std::min<std::int64_t>(blocks, (std::int64_t{1} << 31) / opt.block_size - 2);
  if (blocks < 1) throw UsageError("LlamaRunner: no GPU memory left for a single KV block after the weights");
  num_blocks = static_cast<int>(blocks);
  pad_block = num_blocks;  // one more than the engine's pool: the padding rows of graph-replayed steps
  pool_elems = (blocks + 1) * block_elems;
  try {
    kv = DeviceBuffer<bf16>(static_cast<std::size_t>(2 * pool_elems * cfg.num_hidden_layers));
  } catch (const CudaError& e) {
    throw UsageError("LlamaRunner: cannot allocate " + std::to_string(num_blocks) + " KV blocks (" +
                     std::to_string(blocks * block_bytes >> 20) + " MiB): " + e.what());
  }
}

gpu::AttentionArgs LlamaRunner::Impl::attention_args(const gpu::StepMetadata& md, const std::int32_t* d) const {
  gpu::AttentionArgs a;
  a.qkv = qkv.data();
  a.qkv_stride = qkv_cols;
  a.out = attn.data();
  a.query_start = d + md.query_start;
  a.context_len = d + md.context_len;
  a.block_table = d + md.block_table;
  a.table_stride = md.table_stride;
  a.token_seq = d + md.token_seq;
  a.decode_seqs = d + md.decode_seqs;
  a.prefill_tiles = d + md.prefill_tiles;
  a.num_seqs = md.num_seqs;
  a.num_tokens = md.num_tokens;
  a.num_decode = md.num_decode;
  a.num_prefill_tiles = md.num_prefill_tiles;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = head_dim;
  a.block_size = opt.block_size;
  a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  return a;
}

void LlamaRunner::Impl::enqueue_layers(const gpu::StepMetadata& md, const std::int32_t* d,
                                       const gpu::DecodePlan& plan, float* decode_scratch) {
  const int T = md.num_tokens;
  gpu::AttentionArgs a = attention_args(md, d);
  const bool fast = opt.attention == AttentionPath::fast;
  gpu::RopeArgs r{qkv.data(), qkv_cols, d + md.positions, d + md.slots, inv_freq.data(), T, heads, kv_heads,
                  head_dim, opt.block_size, nullptr, nullptr};
  const auto eps = static_cast<float>(cfg.rms_norm_eps);

  gpu::launch_embed(embed, d + md.tokens, T, hidden, residual.data(), stream);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerWeights& lw = layers[l];
    bf16* k_pool = kv.data() + static_cast<std::int64_t>(2 * l) * pool_elems;
    bf16* v_pool = k_pool + pool_elems;
    // The residual stream takes the previous layer's MLP output first (bf16 add, as HF), then is normed.
    gpu::launch_add_rmsnorm(residual.data(), l == 0 ? nullptr : proj.data(), lw.input_norm, x.data(), nullptr, T,
                            hidden, eps, stream);
    linear(x.data(), hidden, lw.qkv, qkv.data(), qkv_cols, T, qkv_cols, hidden);
    r.k_cache = k_pool;
    r.v_cache = v_pool;
    gpu::launch_rope_kv_write(r, stream);
    a.k_cache = k_pool;
    a.v_cache = v_pool;
    if (fast) {
      gpu::launch_attention_decode(a, plan, decode_scratch, stream);
      gpu::launch_attention_prefill(a, stream);
    } else {
      gpu::launch_attention_reference(a, stream);
    }
    linear(attn.data(), heads * head_dim, lw.o, proj.data(), hidden, T, hidden, heads * head_dim);
    gpu::launch_add_rmsnorm(residual.data(), proj.data(), lw.post_norm, x.data(), nullptr, T, hidden, eps, stream);
    linear(x.data(), hidden, lw.gate_up, gate_up.data(), 2 * inter, T, 2 * inter, hidden);
    gpu::launch_swiglu(gate_up.data(), T, inter, stream);
    linear(gate_up.data(), 2 * inter, lw.down, proj.data(), hidden, T, hidden, inter);
  }
  // The last residual add and the final norm, only on the rows that need logits (gathered to x's top).
  gpu::launch_add_rmsnorm(residual.data(), proj.data(), final_norm, x.data(), d + md.logit_rows, md.num_logit_rows,
                          hidden, eps, stream);
}

void LlamaRunner::Impl::forward(const gpu::StepMetadata& md, std::vector<TokenId>& ids, std::vector<float>* out,
                                int first_kept_row, const std::vector<std::int32_t>* next,
                                std::vector<TokenScore>* scored) {
  const std::size_t meta_bytes = md.data.size() * sizeof(std::int32_t);
  void* host = meta_host.reserve(meta_bytes);
  std::memcpy(host, md.data.data(), meta_bytes);
  reserve(meta, md.data.size());  // safe: the previous step ended with a stream synchronization
  AISP_CUDA_CHECK(cudaMemcpyAsync(meta.data(), host, meta_bytes, cudaMemcpyHostToDevice, stream));
  const std::int32_t* d = meta.data();

  const bool fast = opt.attention == AttentionPath::fast;
  const gpu::AttentionArgs a = attention_args(md, d);
  const gpu::DecodePlan plan = fast ? gpu::plan_decode(a, md.max_decode_context, sm_count) : gpu::DecodePlan{};
  if (fast) reserve(scratch, static_cast<std::size_t>(gpu::decode_scratch_floats(a, plan)));
  enqueue_layers(md, d, plan, scratch.data());

  const int rows = md.num_logit_rows;
  std::vector<std::uint16_t> staged;
  const int kept = std::clamp(first_kept_row, 0, rows);
  if (out) out->resize(static_cast<std::size_t>(rows - kept) * vocab);
  const bool scoring = next != nullptr && scored != nullptr && rows > 0;
  if (scoring) {
    if (static_cast<int>(next->size()) != rows) {
      throw UsageError(fmt::format("LlamaRunner: {} tokens to score for {} logit rows", next->size(), rows));
    }
    reserve(score_ids, static_cast<std::size_t>(rows));  // safe: the previous step ended synchronized
    reserve(score_logits, 2 * static_cast<std::size_t>(rows));
    AISP_CUDA_CHECK(cudaMemcpyAsync(score_ids.data(), next->data(), next->size() * sizeof(std::int32_t),
                                    cudaMemcpyHostToDevice, stream));
  }
  const int chunk = std::min(opt.max_batched_tokens, k_logit_rows);
  for (int r0 = 0; r0 < rows; r0 += chunk) {
    const int n = std::min(chunk, rows - r0);
    gemm->run(x.data() + static_cast<std::int64_t>(r0) * hidden, hidden, lm_head, logits.data(), vocab, n, vocab,
              hidden, stream);
    gpu::launch_argmax(logits.data(), n, vocab, sampled.data() + r0, stream);
    if (scoring) {  // before the next chunk overwrites `logits`: the stream orders it
      gpu::launch_gather_logits(logits.data(), n, vocab, score_ids.data() + r0, score_logits.data() + r0, stream);
      gpu::launch_gather_logits(logits.data(), n, vocab, sampled.data() + r0, score_logits.data() + rows + r0,
                                stream);
    }
    if (out && r0 + n > kept) {
      const int skip = std::max(0, kept - r0);  // rows of this chunk before the first kept one
      staged.resize(static_cast<std::size_t>(n - skip) * vocab);
      AISP_CUDA_CHECK(cudaMemcpyAsync(staged.data(), logits.data() + static_cast<std::int64_t>(skip) * vocab,
                                      staged.size() * 2, cudaMemcpyDeviceToHost, stream));
      AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `logits` is overwritten by the next chunk
      float* dst = out->data() + static_cast<std::int64_t>(r0 + skip - kept) * vocab;
      for (std::size_t i = 0; i < staged.size(); ++i) {
        const std::uint32_t bits = static_cast<std::uint32_t>(staged[i]) << 16;  // bf16 is fp32's top half
        std::memcpy(dst + i, &bits, sizeof(float));
      }
    }
  }
  auto* id_host = static_cast<std::int32_t*>(ids_host.reserve(static_cast<std::size_t>(rows) * sizeof(std::int32_t)));
  if (rows > 0) {
    AISP_CUDA_CHECK(cudaMemcpyAsync(id_host, sampled.data(), static_cast<std::size_t>(rows) * sizeof(std::int32_t),
                                    cudaMemcpyDeviceToHost, stream));
  }
  std::vector<float> gathered;
  if (scoring) {
    gathered.resize(2 * static_cast<std::size_t>(rows));
    AISP_CUDA_CHECK(cudaMemcpyAsync(gathered.data(), score_logits.data(), gathered.size() * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream));
  }
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // also reports any fault of the step's kernels
  ids.assign(id_host, id_host + rows);
  if (scoring) {
    for (int r = 0; r < rows; ++r) {
      if ((*next)[static_cast<std::size_t>(r)] < 0) continue;
      scored->push_back({gathered[static_cast<std::size_t>(r)], gathered[static_cast<std::size_t>(rows + r)],
                         ids[static_cast<std::size_t>(r)]});
    }
  }
}

bool LlamaRunner::Impl::graphable(const StepBatch& batch) const {
  if (!opt.cuda_graphs || opt.attention != AttentionPath::fast || batch.sequences.empty() ||
      static_cast<int>(batch.sequences.size()) > largest_graph_batch()) {
    return false;
  }
  return std::all_of(batch.sequences.begin(), batch.sequences.end(),
                     [](const ScheduledSequence& s) { return s.tokens.size() == 1 && (s.sample || s.sample_all); });
}

// Decode steps multiply a handful of rows by every weight: the five Linear shapes at each batch bucket
// are tuned once here (all layers share them), on layer 0's weights and the step buffers' contents. So
// are the four layer shapes of a full step (max_batched_tokens rows: a long prompt's prefill chunks),
// where ch10:hgemm's kernel competes with cuBLASLt; one line each on stderr says what won.
void LlamaRunner::Impl::tune_gemms() {
  const auto start = std::chrono::steady_clock::now();
  int shapes = 0, moved = 0, tiles = 0;
  double chosen_ms = 0, first_ms = 0;
  const LayerWeights& lw = layers.front();
  const auto tune = [&](const bf16* in, int ld_in, const bf16* w, bf16* out, int ld_out, int rows, int n, int k) {
    const gpu::Gemm::Tuning t = gemm->tune(in, ld_in, w, out, ld_out, rows, n, k, stream);
    ++shapes;
    moved += t.chosen_ms() < t.first_ms ? 1 : 0;
    tiles += t.tile ? 1 : 0;
    chosen_ms += t.chosen_ms();
    first_ms += t.first_ms;
    return t;
  };
  // The four layer shapes at `rows` rows (all layers share them), in the order k_layer_gemms names them.
  static constexpr std::array<const char*, 4> k_layer_gemms = {"qkv", "o", "gate_up", "down"};
  const auto tune_layer = [&](int rows) {
    return std::array{tune(x.data(), hidden, lw.qkv.w, qkv.data(), qkv_cols, rows, qkv_cols, hidden),
                      tune(attn.data(), heads * head_dim, lw.o.w, proj.data(), hidden, rows, hidden, heads * head_dim),
                      tune(x.data(), hidden, lw.gate_up.w, gate_up.data(), 2 * inter, rows, 2 * inter, hidden),
                      tune(gate_up.data(), 2 * inter, lw.down.w, proj.data(), hidden, rows, hidden, inter)};
  };
  // With fp8_weights the layer GEMMs are FP8 (prepare_fp8 planned them, untuned): only the lm_head's.
  const bool layers_bf16 = !opt.fp8_weights;
  for (const int rows : graph_batch_sizes()) {
    if (layers_bf16) tune_layer(rows);
    tune(x.data(), hidden, lm_head, logits.data(), vocab, rows, vocab, hidden);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr,
               "aisp runner: tuned %d decode GEMM shapes (rows 1 to %d) in %.1f s: %d run faster than cuBLASLt's "
               "first choice (%d by ch10:hgemm's kernel); one pass over all of them %.3f ms (first choices: "
               "%.3f ms)\n",
               shapes, largest_graph_batch(), seconds, moved, tiles, chosen_ms, first_ms);

  const int rows = opt.max_batched_tokens;
  if (layers_bf16 && rows > largest_graph_batch()) {
    const auto tunings = tune_layer(rows);
    for (std::size_t i = 0; i < tunings.size(); ++i) {
      const gpu::Gemm::Tuning& t = tunings[i];
      full_step_gemms += i == 0 ? "" : "; ";
      full_step_gemms += t.tile_ms > 0 ? fmt::format("{} {} (cuBLASLt {:.3f} ms, ch10:hgemm {:.3f} ms)", k_layer_gemms[i],
                                                     t.tile ? "ch10:hgemm" : "cuBLASLt", t.lt_ms, t.tile_ms)
                                       : fmt::format("{} cuBLASLt ({:.3f} ms; ch10:hgemm does not take the shape)",
                                                     k_layer_gemms[i], t.lt_ms);
    }
    std::fprintf(stderr, "aisp runner: GEMMs of a %d-token step: %s\n", rows, full_step_gemms.c_str());
  }
  gemm->finish_tuning();
}

// The fixed buffers every graph reads: metadata for the largest shape, and split-KV partials for the most
// any shape's plan can ask (host arithmetic over all shapes; plan_decode is cheap).
void LlamaRunner::Impl::prepare_graphs() {
  if (graph_meta.size() > 0) return;
  const int most = largest_graph_batch();
  graph_meta = DeviceBuffer<std::int32_t>(gpu::max_step_metadata_ints(most, most, max_pages()));
  std::int64_t floats = 0;
  gpu::AttentionArgs a = attention_args(gpu::StepMetadata{}, nullptr);
  for (const int seqs : graph_batch_sizes()) {
    a.num_decode = seqs;
    for (const int p : graph_page_widths()) {
      floats = std::max(floats, gpu::decode_scratch_floats(a, gpu::plan_decode(a, p * opt.block_size, sm_count)));
    }
  }
  graph_scratch = DeviceBuffer<float>(static_cast<std::size_t>(std::max<std::int64_t>(floats, 1)));
}

// Records what `enqueue` launches on the stream into an instantiated graph (nothing runs). Thread-local
// mode: only this thread's unsafe calls (a cudaMalloc, say) break the capture; the server's other threads
// never touch CUDA.
template <class F>
cudaGraphExec_t LlamaRunner::Impl::capture(F&& enqueue) {
  cudaGraph_t graph = nullptr;
  AISP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue();
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);  // ends the capture, so that the stream is usable again
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  AISP_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  AISP_CUDA_CHECK(made);
  return exec;
}

void LlamaRunner::Impl::upload_graph_meta(const gpu::StepMetadata& md) {
  const std::size_t meta_bytes = md.data.size() * sizeof(std::int32_t);
  void* host = meta_host.reserve(meta_bytes);
  std::memcpy(host, md.data.data(), meta_bytes);
  AISP_CUDA_CHECK(cudaMemcpyAsync(graph_meta.data(), host, meta_bytes, cudaMemcpyHostToDevice, stream));
}

// A shape's first step (md in graph_meta) runs its launches eagerly, loading whatever cuBLASLt or the
// lazy module loader needs outside any capture, then captures them for the steps after.
void LlamaRunner::Impl::run_and_capture(const gpu::StepMetadata& md, const gpu::DecodePlan& plan, int seqs,
                                        int pages) {
  const auto enqueue = [&] {
    enqueue_layers(md, graph_meta.data(), plan, graph_scratch.data());
    gemm->run(x.data(), hidden, lm_head, logits.data(), vocab, seqs, vocab, hidden, stream);
    gpu::launch_argmax(logits.data(), seqs, vocab, sampled.data(), stream);
  };
  enqueue();
  ++graph_stats.eager_steps;
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // this step's answer is computed; now the graph
  try {
    graphs.emplace(std::make_pair(seqs, pages), capture(enqueue));
    ++graph_stats.captured;
  } catch (const std::exception& e) {
    // Not fatal: the step above already ran. Decode steps go on eagerly, and the log says why.
    std::fprintf(stderr, "aisp: capturing a CUDA graph of a decode step failed (%s); decode steps run eagerly\n",
                 e.what());
    (void)cudaGetLastError();
    opt.cuda_graphs = false;
  }
}

// Every shape a decode step of up to max_seqs sequences and contexts up to `context` tokens can take,
// captured now from padding sequences alone (their K/V goes to pad_block): a graph reads its batch's
// metadata from graph_meta when it replays, so what it was captured with does not matter.
void LlamaRunner::Impl::capture_graphs(int max_seqs, int context) {
  if (!opt.cuda_graphs || opt.attention != AttentionPath::fast) return;  // graphable() would never replay them
  prepare_graphs();
  const int top_seqs = std::min(batch_bucket(std::max(1, max_seqs)), largest_graph_batch());
  const int top_pages = page_bucket((std::clamp(context, 1, max_context) + opt.block_size - 1) / opt.block_size);
  StepBatch none;
  none.block_size = opt.block_size;
  for (const int seqs : graph_batch_sizes()) {
    if (seqs > top_seqs) break;
    for (const int pages : graph_page_widths()) {
      if (pages > top_pages) break;
      if (graphs.contains(std::make_pair(seqs, pages))) continue;
      const gpu::StepMetadata md =
          gpu::build_step_metadata(none, limits(), false, gpu::StepPadding{seqs, pages, pad_block});
      const gpu::AttentionArgs a = attention_args(md, graph_meta.data());
      const gpu::DecodePlan plan = gpu::plan_decode(a, pages * opt.block_size, sm_count);
      if (gpu::decode_scratch_floats(a, plan) > static_cast<std::int64_t>(graph_scratch.size())) continue;
      upload_graph_meta(md);
      run_and_capture(md, plan, seqs, pages);  // ends synchronized
      if (!opt.cuda_graphs) return;  // a capture failed: steps run eagerly
    }
  }
}

// A decode step from a graph. The batch is padded to its bucket of sequences and its block table to its
// bucket of widths, so that the metadata of any batch of that shape lands at the same offsets of
// graph_meta; the split plan is made for the widest context of the bucket (a split past a sequence's
// last page returns at once). A shape's first step runs its launches eagerly (loading whatever cuBLASLt
// or the lazy module loader needs, outside any capture), then captures them for the steps after.
void LlamaRunner::Impl::graph_step(const StepBatch& batch, std::vector<TokenId>& ids) {
  const int n = static_cast<int>(batch.sequences.size());
  int longest = 1;
  for (const ScheduledSequence& s : batch.sequences) longest = std::max(longest, s.start_position + 1);
  const int seqs = std::min(batch_bucket(n), largest_graph_batch());
  const int pages = page_bucket((longest + opt.block_size - 1) / opt.block_size);
  const gpu::StepMetadata md =
      gpu::build_step_metadata(batch, limits(), false, gpu::StepPadding{seqs, pages, pad_block});

  const gpu::AttentionArgs a = attention_args(md, graph_meta.data());
  const gpu::DecodePlan plan = gpu::plan_decode(a, pages * opt.block_size, sm_count);
  if (gpu::decode_scratch_floats(a, plan) > static_cast<std::int64_t>(graph_scratch.size())) {
    // prepare_graphs() sized the scratch for every shape; should a plan ever outgrow it, this step
    // runs eagerly rather than write past the buffer a graph has baked in.
    forward(gpu::build_step_metadata(batch, limits(), false), ids, nullptr);
    ++graph_stats.eager_steps;
    return;
  }
  upload_graph_meta(md);
  const auto key = std::make_pair(seqs, pages);
  if (const auto it = graphs.find(key); it != graphs.end()) {
    AISP_CUDA_CHECK(cudaGraphLaunch(it->second, stream));
    ++graph_stats.replays;
    graph_stats.padding_rows += seqs - n;
  } else {
    run_and_capture(md, plan, seqs, pages);
  }
  auto* id_host = static_cast<std::int32_t*>(ids_host.reserve(static_cast<std::size_t>(seqs) * sizeof(std::int32_t)));
  AISP_CUDA_CHECK(cudaMemcpyAsync(id_host, sampled.data(), static_cast<std::size_t>(n) * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // also reports any fault of the step's kernels
  ids.assign(id_host, id_host + n);
}

LlamaRunner::LlamaRunner(const ModelWeights& weights, const RunnerOptions& options)
    : m_impl(std::make_unique<Impl>(weights, options)) {}

LlamaRunner::~LlamaRunner() = default;

StepResult LlamaRunner::step(const StepBatch& batch) {
  AISP_CUDA_CHECK(cudaSetDevice(m_impl->device));
  StepResult result;
  if (m_impl->graphable(batch)) {
    m_impl->graph_step(batch, result.sampled);
    return result;
  }
  const gpu::StepMetadata md = gpu::build_step_metadata(batch, m_impl->limits(), false);
  if (md.num_tokens > 0) {
    m_impl->forward(md, result.sampled, nullptr);
    ++m_impl->graph_stats.eager_steps;
  }
  return result;
}

void LlamaRunner::copy_kv_blocks_from(ModelRunner& source, std::span<const std::int32_t> src_blocks,
                                      std::span<const std::int32_t> dst_blocks) {
  auto* from_runner = dynamic_cast<LlamaRunner*>(&source);
  if (from_runner == nullptr) throw UsageError("LlamaRunner: K/V blocks can only come from another LlamaRunner");
  Impl& to = *m_impl;
  const Impl& from = *from_runner->m_impl;
  // Blocks move whole, chunk for chunk: the two pools must cut a block the same way.
  if (from.cfg.num_hidden_layers != to.cfg.num_hidden_layers || from.kv_heads != to.kv_heads ||
      from.head_dim != to.head_dim || from.opt.block_size != to.opt.block_size) {
    throw UsageError(fmt::format(
        "LlamaRunner: K/V of {} layers x {} KV heads x {} dims in blocks of {} cannot move into a pool of {} x {} x {} "
        "in blocks of {}",
        from.cfg.num_hidden_layers, from.kv_heads, from.head_dim, from.opt.block_size, to.cfg.num_hidden_layers,
        to.kv_heads, to.head_dim, to.opt.block_size));
  }
  if (src_blocks.size() != dst_blocks.size()) {
    throw UsageError(fmt::format("LlamaRunner: {} source blocks for {} destination blocks", src_blocks.size(),
                                 dst_blocks.size()));
  }
  for (std::size_t i = 0; i < src_blocks.size(); ++i) {
    if (src_blocks[i] < 0 || src_blocks[i] >= from.num_blocks || dst_blocks[i] < 0 || dst_blocks[i] >= to.num_blocks) {
      throw UsageError(fmt::format("LlamaRunner: K/V block copy {} -> {} outside a pool ({} and {} blocks)",
                                   src_blocks[i], dst_blocks[i], from.num_blocks, to.num_blocks));
    }
  }
  if (src_blocks.empty()) return;
  AISP_CUDA_CHECK(cudaSetDevice(to.device));
  if (from.device != to.device && to.peers.count(from.device) == 0) {
    // Once per pair and runner (another part of the process, a ladder, may have enabled it already).
    if (!enable_peer_access(from.device)) {
      throw UsageError(fmt::format("LlamaRunner: GPU {} cannot read GPU {}'s memory (no peer path), so K/V "
                                   "blocks cannot move between them",
                                   to.device, from.device));
    }
    to.peers.insert(from.device);
  }
  // Both tables in this GPU's memory, where the kernel reads them (8 bytes a block).
  const std::size_t n = src_blocks.size();
  std::vector<std::int32_t> tables(src_blocks.begin(), src_blocks.end());
  tables.insert(tables.end(), dst_blocks.begin(), dst_blocks.end());
  reserve(to.transfer_tables, 2 * n);
  AISP_CUDA_CHECK(cudaMemcpyAsync(to.transfer_tables.data(), tables.data(), 2 * n * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, to.stream));
  int max_threads_per_sm = 0;
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, to.device));
  const std::int64_t block_elems = static_cast<std::int64_t>(to.kv_heads) * to.opt.block_size * to.head_dim;
  gpu::KvBlockCopyArgs a{};
  a.src_pool = from.kv.data();
  a.dst_pool = to.kv.data();
  a.src_table = to.transfer_tables.data();
  a.dst_table = to.transfer_tables.data() + n;
  a.blocks = static_cast<std::int64_t>(n);
  a.layers = to.cfg.num_hidden_layers;
  a.chunk_elems = block_elems;
  a.src_pool_blocks = from.pool_elems / block_elems;  // the engine's blocks and the padding block
  a.dst_pool_blocks = to.pool_elems / block_elems;
  a.sm_count = to.sm_count;
  a.max_threads_per_sm = max_threads_per_sm;
  gpu::launch_kv_block_copy(a, to.stream);
  // The source's blocks are released once this returns, and `tables` goes out of scope.
  AISP_CUDA_CHECK(cudaStreamSynchronize(to.stream));
}

void LlamaRunner::prepare_eager_steps(int max_rows) {
  AISP_CUDA_CHECK(cudaSetDevice(m_impl->device));
  Impl& m = *m_impl;
  const LayerWeights& lw = m.layers.front();
  const int hidden = m.hidden, inter = m.inter, qkv_cols = m.qkv_cols, attn_cols = m.heads * m.head_dim;
  const int logit_chunk = std::min(m.opt.max_batched_tokens, k_logit_rows);
  for (int rows = 1; rows <= std::min(max_rows, m.opt.max_batched_tokens); ++rows) {
    // The four layer GEMMs as Impl::layers_forward calls them, then the lm_head's, each run once on the
    // step buffers (scratch between steps: every step computes them again from the embeddings).
    m.linear(m.x.data(), hidden, lw.qkv, m.qkv.data(), qkv_cols, rows, qkv_cols, hidden);
    m.linear(m.attn.data(), attn_cols, lw.o, m.proj.data(), hidden, rows, hidden, attn_cols);
    m.linear(m.x.data(), hidden, lw.gate_up, m.gate_up.data(), 2 * inter, rows, 2 * inter, hidden);
    m.linear(m.gate_up.data(), 2 * inter, lw.down, m.proj.data(), hidden, rows, hidden, inter);
    if (rows <= logit_chunk) {
      m.gemm->run(m.x.data(), hidden, m.lm_head, m.logits.data(), m.vocab, rows, m.vocab, hidden, m.stream);
    }
  }
  AISP_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  // The eager step's buffers at their largest for such steps (as many sequences as rows, tables as wide
  // as max_context): growing one later frees and allocates again, and cudaFree waits for the device.
  const auto r = static_cast<std::size_t>(std::min(max_rows, m.opt.max_batched_tokens));
  const std::size_t meta_ints = gpu::max_step_metadata_ints(static_cast<int>(r), static_cast<int>(r), m.max_pages());
  (void)m.meta_host.reserve(meta_ints * sizeof(std::int32_t));
  reserve(m.meta, meta_ints);
  (void)m.ids_host.reserve(r * sizeof(std::int32_t));
  if (m.opt.attention == AttentionPath::fast) {
    gpu::AttentionArgs a = m.attention_args(gpu::StepMetadata{}, nullptr);
    std::int64_t floats = 0;
    for (int n = 1; n <= static_cast<int>(r); ++n) {
      a.num_decode = n;
      floats = std::max(floats, gpu::decode_scratch_floats(a, gpu::plan_decode(a, m.max_context, m.sm_count)));
    }
    reserve(m.scratch, static_cast<std::size_t>(floats));
  }
}

void LlamaRunner::capture_graphs(int max_seqs, int context) {
  AISP_CUDA_CHECK(cudaSetDevice(m_impl->device));
  m_impl->capture_graphs(max_seqs, context);
}

void LlamaRunner::set_cuda_graphs(bool on) {
  AISP_CUDA_CHECK(cudaSetDevice(m_impl->device));
  if (on) m_impl->prepare_graphs();
  m_impl->opt.cuda_graphs = on;
}

GraphStats LlamaRunner::graph_stats() const { return m_impl->graph_stats; }
const std::string& LlamaRunner::full_step_gemms() const { return m_impl->full_step_gemms; }

std::vector<float> LlamaRunner::prefill_logits(const std::vector<TokenId>& prompt) {
  AISP_CUDA_CHECK(cudaSetDevice(m_impl->device));
  const int bs = m_impl->opt.block_size;
  const int n = static_cast<int>(prompt.size());
  ScheduledSequence s;
  s.id = -1;
  s.sample = true;
  for (int b = 0; b * bs < n; ++b) s.blocks.push_back(b);
  if (static_cast<int>(s.blocks.size()) > m_impl->num_blocks) {
    throw UsageError("LlamaRunner::prefill_logits: the prompt needs more KV blocks than the pool has");
  }
  std::vector<float> all;
  all.reserve(static_cast<std::size_t>(n) * m_impl->vocab);
  for (int start = 0; start < n; start += m_impl->opt.max_batched_tokens) {
    const int len = std::min(m_impl->opt.max_batched_tokens, n - start);
    s.start_position = start;
    s.tokens.assign(prompt.begin() + start, prompt.begin() + start + len);
    StepBatch batch{{s}, bs};
    std::vector<TokenId> ids;
    std::vector<float> chunk;
    m_impl->forward(gpu::build_step_metadata(batch, m_impl->limits(), true), ids, &chunk);
    all.insert(all.end(), chunk.begin(), chunk.end());
  }
  return all;
}

std::vector<TokenScore> LlamaRunner::score_tokens(const std::vector<TokenId>& sequence, int first) {
  AISP_CUDA_CHECK(cudaSetDevice(m_impl->device));
  const int bs = m_impl->opt.block_size;
  const int n = static_cast<int>(sequence.size());
  if (first < 1 || first > n) {
    throw UsageError("LlamaRunner::score_tokens: the first scored token must lie in [1, the sequence's length]");
  }
  ScheduledSequence s;
  s.id = -1;
  s.sample = true;
  for (int b = 0; b * bs < n; ++b) s.blocks.push_back(b);
  if (static_cast<int>(s.blocks.size()) > m_impl->num_blocks) {
    throw UsageError("LlamaRunner::score_tokens: the sequence needs more KV blocks than the pool has");
  }
  // Position p's logits predict token p + 1: positions [first - 1, n - 1) score tokens [first, n).
  std::vector<TokenScore> scores;
  scores.reserve(static_cast<std::size_t>(n - first));
  for (int start = 0; start < n - 1; start += m_impl->opt.max_batched_tokens) {
    const int len = std::min(m_impl->opt.max_batched_tokens, n - 1 - start);
    const int keep_from = std::max(0, first - 1 - start);
    s.start_position = start;
    s.tokens.assign(sequence.begin() + start, sequence.begin() + start + len);
    StepBatch batch{{s}, bs};
    std::vector<TokenId> ids;
    // Row r predicts token start + r + 1; rows before keep_from are computed (the prefix's K/V) and not
    // scored. The logits are gathered on the GPU (forward's `next`).
    std::vector<std::int32_t> next(static_cast<std::size_t>(len), -1);
    for (int r = keep_from; r < len; ++r) {
      next[static_cast<std::size_t>(r)] = sequence[static_cast<std::size_t>(start + r + 1)];
    }
    m_impl->forward(gpu::build_step_metadata(batch, m_impl->limits(), true), ids, nullptr, 0, &next, &scores);
  }
  return scores;
}

std::vector<std::vector<float>> LlamaRunner::prefill_logits(const std::vector<std::vector<TokenId>>& prompts) {
  AISP_CUDA_CHECK(cudaSetDevice(m_impl->device));
  const int bs = m_impl->opt.block_size;
  StepBatch batch{{}, bs};
  int next_block = 0;
  for (const auto& p : prompts) {
    ScheduledSequence s;
    s.id = static_cast<SequenceId>(batch.sequences.size());
    s.tokens = p;
    s.sample = true;
    for (int b = 0; b * bs < static_cast<int>(p.size()); ++b) s.blocks.push_back(next_block++);
    batch.sequences.push_back(std::move(s));
  }
  if (next_block > m_impl->num_blocks) {
    throw UsageError("LlamaRunner::prefill_logits: the prompts need more KV blocks than the pool has");
  }
  std::vector<TokenId> ids;
  std::vector<float> flat;
  m_impl->forward(gpu::build_step_metadata(batch, m_impl->limits(), true), ids, &flat);
  std::vector<std::vector<float>> result;
  std::size_t at = 0;
  for (const auto& p : prompts) {
    const std::size_t count = p.size() * static_cast<std::size_t>(m_impl->vocab);
    result.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(at),
                        flat.begin() + static_cast<std::ptrdiff_t>(at + count));
    at += count;
  }
  return result;
}

int LlamaRunner::num_kv_blocks() const { return m_impl->num_blocks; }
int LlamaRunner::block_size() const { return m_impl->opt.block_size; }
int LlamaRunner::max_batched_tokens() const { return m_impl->opt.max_batched_tokens; }
int LlamaRunner::vocab_size() const { return m_impl->vocab; }
int LlamaRunner::max_context() const { return m_impl->max_context; }
const ModelConfig& LlamaRunner::config() const { return m_impl->cfg; }

}  // namespace aisp::serving
