// ch18:flash_attention:vendor_cudnn — cuDNN's fused flash attention (SDPA forward): the reference.
//
// The operation graph PyTorch's cuDNN backend and cudnn_frontend's sdpa() build, described through the
// backend API (cudnn_backend.hpp says why not the frontend): S = Q K^T (bf16 in, fp32), S * scale, the
// causal mask as gen_index(row) >= gen_index(col) selecting S or -inf, softmax as max / sub / exp / sum
// / div (plus the log-sum-exp statistic on a virtual tensor, as the frontend emits it for inference),
// P cast to bf16, O = P V. cuDNN's runtime-fusion engines recognise the pattern and run one flash
// attention kernel; nothing of the graph is materialised. GQA is the K/V tensors' head dimension
// (kv_heads) broadcast over the query heads. K enters as K^T: dims (b, kv_heads, d, s) with strides
// that read the same [b][kv_heads][s][d] memory.
// Setup builds and finalizes the graph, takes the heuristic's first engine configuration that
// finalizes into a plan, and allocates its workspace; a launch is one cudnnBackendExecute.
// Napkin math: through PyTorch, cuDNN 9.19 ran this shape (b4 h32 s4096 d128, 1.1 TFLOP) in 1.62 ms on
// an H200, ~680 TFLOP/s (~70% of the dense bf16 peak), and causal in 0.93 ms, ~594 TFLOP/s.
// Run: aisp bench run --targets ch18:flash_attention:vendor_cudnn
#include <cmath>
#include <memory>

#include "chapters/ch18_attention/flash_attention/cudnn_backend.hpp"
#include "chapters/ch18_attention/flash_attention/problem.hpp"

namespace aisp::ch18::flash_attention::vendor {

using cudnn::Descriptor;

enum Uid : std::int64_t { q_uid = 1, k_uid, v_uid, o_uid, scale_uid, neg_inf_uid, first_virtual_uid = 100 };

using Dims = std::vector<std::int64_t>;

Dims packed_strides(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

// Builds the graph's tensors and operations; keeps every descriptor alive until the plan is made.
class GraphBuilder {
 public:
  const Descriptor& tensor(std::int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides,
                           bool is_virtual, bool by_value = false) {
    const std::int64_t alignment = 16;
    auto& t = keep(Descriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
    t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, uid)
        .set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, type)
        .set_array(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims)
        .set_array(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, alignment)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, is_virtual);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, by_value);
    return t.finalize();
  }
  // An intermediate the engine keeps on chip: packed strides, a fresh uid.
  const Descriptor& virtual_tensor(cudnnDataType_t type, const Dims& dims) {
    return tensor(m_next_uid++, type, dims, packed_strides(dims), true);
  }

  void matmul(const Descriptor& a, const Descriptor& b, const Descriptor& c) {
    auto& desc = keep(Descriptor(CUDNN_BACKEND_MATMUL_DESCRIPTOR));
    desc.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT).finalize();
    m_ops.push_back(&keep(Descriptor(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR))
                         .set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
                         .set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
                         .set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
                         .set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, desc)
                         .finalize());
  }

  // y = mode(x [, b [, t]]); math in `precision`; `axis` for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, const Descriptor& x, const Descriptor* b, const Descriptor* t,
                 const Descriptor& y, cudnnDataType_t precision = CUDNN_DATA_FLOAT, std::int64_t axis = -1) {
    auto& desc = keep(Descriptor(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
    desc.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, precision);
    if (axis >= 0) desc.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, axis);
    desc.finalize();
    auto& op = keep(Descriptor(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
    op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, desc)
        .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t) op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    m_ops.push_back(&op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y).finalize());
  }

  void reduction(cudnnReduceTensorOp_t mode, const Descriptor& x, const Descriptor& y) {
    auto& desc = keep(Descriptor(CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
    desc.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, mode)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT)
        .finalize();
    m_ops.push_back(&keep(Descriptor(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR))
                         .set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
                         .set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
                         .set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, desc)
                         .finalize());
  }

  std::vector<cudnnBackendDescriptor_t> ops() const {
    std::vector<cudnnBackendDescriptor_t> raw;
    for (const Descriptor* op : m_ops) raw.push_back(op->get());
    return raw;
  }

 private:
  Descriptor& keep(Descriptor d) { return *m_kept.emplace_back(std::make_unique<Descriptor>(std::move(d))); }

  std::vector<std::unique_ptr<Descriptor>> m_kept;
  std::vector<const Descriptor*> m_ops;
  std::int64_t m_next_uid = first_virtual_uid;
};

// The SDPA forward graph for one shape (see the top of the file).
void build_sdpa(GraphBuilder& g, const Args& a) {
  const std::int64_t b = a.batch, h = a.heads, hk = a.kv_heads, s = a.seq, d = a.head_dim;
  const Dims q_dims{b, h, s, d}, kv_dims{b, hk, s, d}, score_dims{b, h, s, s}, row_dims{b, h, s, 1};
  const Dims one{1, 1, 1, 1};
  const auto& q = g.tensor(q_uid, CUDNN_DATA_BFLOAT16, q_dims, packed_strides(q_dims), false);
  const auto& k_t = g.tensor(k_uid, CUDNN_DATA_BFLOAT16, {b, hk, d, s}, {hk * s * d, s * d, 1, d}, false);
  const auto& v = g.tensor(v_uid, CUDNN_DATA_BFLOAT16, kv_dims, packed_strides(kv_dims), false);
  const auto& o = g.tensor(o_uid, CUDNN_DATA_BFLOAT16, q_dims, packed_strides(q_dims), false);
  const auto& scale = g.tensor(scale_uid, CUDNN_DATA_FLOAT, one, one, false, true);

  const auto& s_raw = g.virtual_tensor(CUDNN_DATA_FLOAT, score_dims);
  g.matmul(q, k_t, s_raw);
  const Descriptor* scores = &g.virtual_tensor(CUDNN_DATA_FLOAT, score_dims);
  g.pointwise(CUDNN_POINTWISE_MUL, s_raw, &scale, nullptr, *scores);
  if (a.causal) {
    const auto& neg_inf = g.tensor(neg_inf_uid, CUDNN_DATA_FLOAT, one, one, false, true);
    const auto& row = g.virtual_tensor(CUDNN_DATA_INT32, score_dims);
    const auto& col = g.virtual_tensor(CUDNN_DATA_INT32, score_dims);
    const auto& keep = g.virtual_tensor(CUDNN_DATA_BOOLEAN, score_dims);
    const auto& masked = g.virtual_tensor(CUDNN_DATA_FLOAT, score_dims);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, *scores, nullptr, nullptr, row, CUDNN_DATA_FLOAT, 2);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, *scores, nullptr, nullptr, col, CUDNN_DATA_FLOAT, 3);
    g.pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, nullptr, keep, CUDNN_DATA_BOOLEAN);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, *scores, &neg_inf, &keep, masked);
    scores = &masked;
  }
  const auto& max = g.virtual_tensor(CUDNN_DATA_FLOAT, row_dims);
  const auto& shifted = g.virtual_tensor(CUDNN_DATA_FLOAT, score_dims);
  const auto& e = g.virtual_tensor(CUDNN_DATA_FLOAT, score_dims);
  const auto& sum = g.virtual_tensor(CUDNN_DATA_FLOAT, row_dims);
  const auto& log_sum = g.virtual_tensor(CUDNN_DATA_FLOAT, row_dims);
  const auto& stats = g.virtual_tensor(CUDNN_DATA_FLOAT, row_dims);
  const auto& p = g.virtual_tensor(CUDNN_DATA_BFLOAT16, score_dims);  // bmm2 takes its A in the io type
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, *scores, max);
  g.pointwise(CUDNN_POINTWISE_SUB, *scores, &max, nullptr, shifted);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, e);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  g.pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, nullptr, log_sum);
  g.pointwise(CUDNN_POINTWISE_ADD, max, &log_sum, nullptr, stats);
  g.pointwise(CUDNN_POINTWISE_DIV, e, &sum, nullptr, p);
  g.matmul(p, v, o);
}

// The handle attributes are deprecated since cuDNN 9.8 but still what cudnn_frontend sets; a graph
// without a handle needs device properties instead, for no gain here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
class Cudnn {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_handle = std::make_unique<cudnn::Handle>();
    GraphBuilder g;
    build_sdpa(g, a);
    Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph.set_array(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g.ops())
        .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, m_handle->get())
        .finalize();
    m_plan = first_working_plan(graph);
    std::int64_t workspace = 0, count = 0;
    AISP_CUDNN_CHECK(cudnn::api().get_attribute(m_plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                CUDNN_TYPE_INT64, 1, &count, &workspace));
    m_workspace = DeviceBuffer<unsigned char>(static_cast<std::size_t>(workspace));
  }

  void launch(const Args& a, cudaStream_t stream) {
    AISP_CUDNN_CHECK(cudnn::api().set_stream(m_handle->get(), stream));
    float scale = a.scale, neg_inf = -INFINITY;
    std::vector<std::int64_t> uids{q_uid, k_uid, v_uid, o_uid, scale_uid};
    std::vector<void*> ptrs{const_cast<__nv_bfloat16*>(a.q), const_cast<__nv_bfloat16*>(a.k),
                            const_cast<__nv_bfloat16*>(a.v), a.o, &scale};
    if (a.causal) uids.push_back(neg_inf_uid), ptrs.push_back(&neg_inf);
    Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack.set_array(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids)
        .set_array(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs)
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, static_cast<void*>(m_workspace.data()))
        .finalize();
    AISP_CUDNN_CHECK(cudnn::api().execute(m_handle->get(), m_plan->get(), pack.get()));
  }

 private:
  // Heuristic mode A's configurations in its order of preference; the first that finalizes wins.
  std::unique_ptr<Descriptor> first_working_plan(const Descriptor& graph) {
    Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, CUDNN_HEUR_MODE_A)
        .finalize();
    std::int64_t available = 0;
    AISP_CUDNN_CHECK(cudnn::api().get_attribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available, nullptr));
    std::vector<Descriptor> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (std::int64_t i = 0; i < available; ++i) {
      raw.push_back(configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR).get());
    }
    std::int64_t returned = 0;
    AISP_CUDNN_CHECK(cudnn::api().get_attribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, available, &returned,
                                                raw.data()));
    std::string why = "the heuristic offered " + std::to_string(returned) + " configurations";
    for (std::int64_t i = 0; i < returned; ++i) {
      auto plan = std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, m_handle->get())
          .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw[i]);
      const cudnnStatus_t status = cudnn::api().finalize(plan->get());
      if (status == CUDNN_STATUS_SUCCESS) return plan;
      why += std::string("; #") + std::to_string(i) + ": " + cudnn::api().error_string(status);
    }
    throw std::runtime_error("cuDNN has no engine for this SDPA graph: " + why);
  }

  std::unique_ptr<cudnn::Handle> m_handle;
  std::unique_ptr<Descriptor> m_plan;
  DeviceBuffer<unsigned char> m_workspace;
};
#pragma GCC diagnostic pop

AISP_REGISTER_STATEFUL_VARIANT(FlashAttentionProblem, Cudnn, .step = 0, .slug = "cudnn",
                               .kind = VariantKind::vendor,
                               .summary = "cuDNN SDPA forward (fused flash attention), backend graph API",
                               .min_cc = 80);

}  // namespace aisp::ch18::flash_attention::vendor
