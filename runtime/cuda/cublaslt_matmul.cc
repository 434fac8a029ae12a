// CublasLtMatmuls (cublaslt_matmul.h): the library's handle and workspace on one GPU, each
// problem's descriptors and heuristic answer, and the cublasLtMatmul call with its fallback.
#include "runtime/cuda/cublaslt_matmul.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kiln::runtime::cuda {
namespace {

// A device address as the pointer cuBLASLt's API takes: never dereferenced on the host.
void* device_pointer(uint64_t address) {
  return reinterpret_cast<void*>(address);  // NOLINT(performance-no-int-to-ptr)
}

// Where the plan dump assumes a buffer starts: the allocator's blocks are 256-byte aligned.
constexpr uint64_t kAssumedBase = uint64_t{1} << 20;
// The bias alignment every cuBLASLt kernel can take (there is no preference to say less).
constexpr uint32_t kBiasAlignment = 16;
// Problems (with their alignments) kept with their descriptors; past this the oldest are
// not told apart from new ones: all are dropped and asked for again when next needed.
constexpr size_t kMaxProblems = 1024;

int cuda_type(DType dt) {
  switch (dt) {
    case DType::F16:
      return kCudaR16F;
    case DType::BF16:
      return kCudaR16BF;
    default:
      return kCudaR32F;
  }
}

// The largest power of two (at most 256) that divides `address`.
uint32_t alignment(uint64_t address) {
  if (address == 0) return 256;
  return static_cast<uint32_t>(std::min<uint64_t>(256, address & (~address + 1)));
}

// Each operand's address: `pointers`' buffers, or allocator-aligned ones for a plan dump.
struct Addresses {
  uint64_t a = 0, b = 0, bias = 0, d = 0;
};
Addresses addresses_of(const CublasLtGemm& g, const KernelPointers* pointers) {
  auto at = [&](int slot, bool output, int64_t offset, DType dt) {
    const uint64_t base = pointers == nullptr ? kAssumedBase
                          : output            ? pointers->outputs[slot]
                                              : pointers->inputs[slot];
    return base + static_cast<uint64_t>(offset) * static_cast<uint64_t>(dtype_size(dt));
  };
  Addresses r;
  r.a = at(g.a.input, false, g.a.offset, g.a.dtype);
  r.b = at(g.b.input, false, g.b.offset, g.b.dtype);
  if (g.bias_input >= 0) r.bias = at(g.bias_input, false, g.bias_offset, g.output_dtype);
  r.d = at(g.output, true, 0, g.output_dtype);
  return r;
}

// The alignments that narrow the heuristic's algorithms: a, b, the bias (0 without one), d.
std::array<uint32_t, 4> alignments_of(const CublasLtGemm& g, const Addresses& at) {
  return {alignment(at.a), alignment(at.b), g.bias_input >= 0 ? alignment(at.bias) : 0,
          alignment(at.d)};
}

// The problem's identity: everything cuBLASLt is told about it but the addresses, and with
// `at`, their alignments (which narrow the algorithms).
std::vector<int64_t> problem_key(const CublasLtGemm& g, const Addresses* at = nullptr) {
  std::vector<int64_t> key;
  for (const CublasLtOperand* o : {&g.a, &g.b}) {
    key.insert(key.end(),
               {static_cast<int64_t>(o->dtype), o->transposed, static_cast<int64_t>(o->rows),
                static_cast<int64_t>(o->cols), o->ld, o->batch_stride});
  }
  key.insert(key.end(),
             {static_cast<int64_t>(g.m), static_cast<int64_t>(g.n), static_cast<int64_t>(g.k),
              g.batches, static_cast<int64_t>(g.output_dtype), g.epilogue, g.bias_input >= 0});
  if (at != nullptr) {
    for (uint32_t a : alignments_of(g, *at)) key.push_back(a);
  }
  return key;
}

}  // namespace

// A problem's descriptors, kept for every later run, and the algorithm the heuristic chose.
struct CublasLtMatmuls::Prepared {
  absl::Status status;  // why it has no algorithm, or how its run failed
  CublasLtMatmulDesc desc = nullptr;
  CublasLtMatrixLayout a = nullptr, b = nullptr, d = nullptr;
  CublasLtHeuristicResult heuristic;

  void destroy(const CublasLtApi& api) {
    for (CublasLtMatrixLayout l : {a, b, d}) {
      if (l != nullptr) api.matrix_layout_destroy(l);
    }
    if (desc != nullptr) api.matmul_desc_destroy(desc);
  }
};

std::string MatmulChoice::describe() const {
  return absl::StrCat(cublaslt() ? "cublaslt (" : "generated kernel (", detail, ")");
}

CublasLtMatmuls::CublasLtMatmuls(std::string device_name, Allocate allocate)
    : device_name_(std::move(device_name)),
      allocate_(std::move(allocate)),
      disabled_(cublaslt_disabled_by_environment()) {}

CublasLtMatmuls::~CublasLtMatmuls() { release(); }

void CublasLtMatmuls::release() {
  for (auto& [key, p] : problems_) p->destroy(api_);
  problems_.clear();
  failed_.clear();
  if (handle_ != nullptr) api_.destroy(handle_);
  handle_ = nullptr;
  workspace_.reset();
  epoch_.fetch_add(1, std::memory_order_relaxed);
}

// Loads the library (once per process) and makes this device's handle (once per library: a
// test that puts another library in place starts again). No device memory: choosing needs
// none, and plans are built (and choose) long before, or without, a run.
absl::Status CublasLtMatmuls::ready() {
  const uint64_t generation = cublaslt_api_generation();
  if (generation_ == generation) return status_;
  release();
  generation_ = generation;
  api_ = cublaslt_api();
  if (!api_.status.ok()) {
    status_ =
        absl::UnavailableError(absl::StrCat("cuBLASLt library missing: ", api_.status.message()));
    return status_;
  }
  status_ = check_cublas(api_, api_.create(&handle_), "cublasLtCreate");
  if (!status_.ok()) {
    handle_ = nullptr;
    status_ = absl::UnavailableError(
        absl::StrCat("cuBLASLt unusable on ", device_name_, ": ", status_.message()));
  }
  return status_;
}

// ready(), then the workspace (once per library). Without one, status_ says why, so every
// later choice is the generated kernel, as when ready() fails.
absl::Status CublasLtMatmuls::ready_to_run() {
  if (absl::Status s = ready(); !s.ok() || workspace_ != nullptr) return s;
  try {
    workspace_ = allocate_(kWorkspaceBytes);
  } catch (const std::exception& e) {
    status_ = absl::UnavailableError(
        absl::StrCat("no memory for cuBLASLt's workspace on ", device_name_, ": ", e.what()));
  }
  if (status_.ok() && workspace_ == nullptr) {
    status_ = absl::UnavailableError(absl::StrCat("no cuBLASLt workspace on ", device_name_));
  }
  if (!status_.ok()) epoch_.fetch_add(1, std::memory_order_relaxed);
  return status_;
}

absl::Status CublasLtMatmuls::prepare_to_run() {
  std::lock_guard<std::mutex> lock(mutex_);
  return ready_to_run();
}

MatmulChoice CublasLtMatmuls::choose(const jit::KernelProgram& program,
                                     const jit::KernelLaunch& launch,
                                     const KernelPointers* pointers) {
  MatmulChoice c;
  if (disabled_) {
    c.detail = "cuBLASLt disabled by KILN_CUBLASLT=0";
    return c;
  }
  absl::StatusOr<CublasLtGemm> gemm = cublaslt_gemm(program, launch);
  if (!gemm.ok()) {
    c.detail = std::string(gemm.status().message());
    return c;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (absl::Status s = ready(); !s.ok()) {
    c.detail = std::string(s.message());
    return c;
  }
  if (const Prepared& p = prepared(*gemm, pointers); !p.status.ok()) {
    c.detail = std::string(p.status.message());
    return c;
  }
  c.detail = gemm->summary();
  c.gemm = *std::move(gemm);
  return c;
}

namespace {

// Sets one attribute of a descriptor (`set`: a cublasLt...SetAttribute) to `value`; `call`
// names the call and the attribute in an error.
template <class Handle, class Set, class T>
absl::Status set_attribute(const CublasLtApi& api, Set set, Handle h, int attribute, T value,
                           const char* call) {
  return check_cublas(api, set(h, attribute, &value, sizeof value), call);
}

absl::Status make_layout(const CublasLtApi& api, CublasLtMatrixLayout* layout, DType dt,
                         uint64_t rows, uint64_t cols, int64_t ld, int32_t batches,
                         int64_t batch_stride) {
  absl::Status s =
      check_cublas(api, api.matrix_layout_create(layout, cuda_type(dt), rows, cols, ld),
                   "cublasLtMatrixLayoutCreate");
  if (!s.ok() || batches == 1) return s;
  s = set_attribute(api, api.matrix_layout_set_attribute, *layout, kLayoutBatchCount, batches,
                    "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
  if (!s.ok()) return s;
  return set_attribute(api, api.matrix_layout_set_attribute, *layout, kLayoutStridedBatchOffset,
                       batch_stride, "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
}

// The operation: f32 accumulation (never TF32), f32 alpha and beta, the ops and epilogue.
absl::Status describe_operation(const CublasLtApi& api, const CublasLtGemm& g, uint64_t bias,
                                CublasLtMatmulDesc* desc) {
  absl::Status s = check_cublas(api, api.matmul_desc_create(desc, kCublasCompute32F, kCudaR32F),
                                "cublasLtMatmulDescCreate");
  const auto set = api.matmul_desc_set_attribute;
  const char* call = "cublasLtMatmulDescSetAttribute";
  if (s.ok()) {
    s = set_attribute(api, set, *desc, kMatmulDescTransA,
                      int32_t{g.a.transposed ? kCublasOpT : kCublasOpN}, call);
  }
  if (s.ok()) {
    s = set_attribute(api, set, *desc, kMatmulDescTransB,
                      int32_t{g.b.transposed ? kCublasOpT : kCublasOpN}, call);
  }
  if (s.ok()) s = set_attribute(api, set, *desc, kMatmulDescEpilogue, g.epilogue, call);
  if (s.ok() && g.bias_input >= 0) {
    // The heuristic reads the pointer's alignment; run() sets each call's own.
    s = set_attribute(api, set, *desc, kMatmulDescBiasPointer, device_pointer(bias), call);
  }
  return s;
}

// Asks the heuristic for one algorithm within the workspace and the operands' alignments.
absl::Status pick_algorithm(const CublasLtApi& api, CublasLtHandle handle, const Addresses& at,
                            int64_t workspace_bytes, CublasLtMatmulDesc desc,
                            CublasLtMatrixLayout a, CublasLtMatrixLayout b, CublasLtMatrixLayout d,
                            CublasLtHeuristicResult* result) {
  CublasLtMatmulPreference pref = nullptr;
  absl::Status s =
      check_cublas(api, api.preference_create(&pref), "cublasLtMatmulPreferenceCreate");
  const auto set = api.preference_set_attribute;
  if (s.ok()) {
    s = set_attribute(api, set, pref, kPreferenceMaxWorkspaceBytes,
                      static_cast<uint64_t>(workspace_bytes),
                      "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  }
  // Split-K partial sums added in f32, never in a 16-bit output type.
  if (s.ok()) {
    s = set_attribute(api, set, pref, kPreferenceReductionSchemeMask, kReductionSchemeComputeType,
                      "cublasLtMatmulPreferenceSetAttribute(REDUCTION_SCHEME_MASK)");
  }
  struct Alignment {
    int attribute;
    uint64_t address;
    const char* call;
  };
  const Alignment alignments[] = {{kPreferenceMinAlignmentABytes, at.a,
                                   "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_A_BYTES)"},
                                  {kPreferenceMinAlignmentBBytes, at.b,
                                   "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_B_BYTES)"},
                                  {kPreferenceMinAlignmentCBytes, at.d,
                                   "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_C_BYTES)"},
                                  {kPreferenceMinAlignmentDBytes, at.d,
                                   "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_D_BYTES)"}};
  for (const Alignment& x : alignments) {
    if (s.ok()) s = set_attribute(api, set, pref, x.attribute, alignment(x.address), x.call);
  }
  int returned = 0;
  if (s.ok()) {
    s = check_cublas(api,
                     api.algo_get_heuristic(handle, desc, a, b, d, d, pref, 1, result, &returned),
                     "cublasLtMatmulAlgoGetHeuristic");
  }
  if (pref != nullptr) api.preference_destroy(pref);
  if (!s.ok()) {
    return absl::NotFoundError(absl::StrCat("cuBLASLt has no algorithm for it: ", s.message()));
  }
  if (returned == 0) return absl::NotFoundError("cuBLASLt has no algorithm for it");
  if (result->state != kCublasStatusSuccess) {
    return absl::NotFoundError(
        absl::StrCat("cuBLASLt has no algorithm for it: ",
                     check_cublas(api, result->state, "the heuristic's result").message()));
  }
  return absl::OkStatus();
}

}  // namespace

CublasLtMatmuls::Prepared& CublasLtMatmuls::prepared(const CublasLtGemm& g,
                                                     const KernelPointers* pointers) {
  const Addresses at = addresses_of(g, pointers);
  std::vector<int64_t> key = problem_key(g, &at);
  if (problems_.size() >= kMaxProblems && !problems_.contains(key)) {
    for (auto& [old_key, old] : problems_) old->destroy(api_);
    problems_.clear();  // failed_ stays: a problem that failed keeps the generated kernel
    epoch_.fetch_add(1, std::memory_order_relaxed);
  }
  std::unique_ptr<Prepared>& p = problems_[std::move(key)];
  if (p != nullptr) return *p;
  p = std::make_unique<Prepared>();
  if (g.bias_input >= 0 && alignment(at.bias) < kBiasAlignment) {
    // No preference tells the heuristic the bias's alignment, and its kernels may load the
    // bias 16 bytes at a time: a bias view at another offset runs the generated kernel.
    p->status = absl::FailedPreconditionError(
        absl::StrCat("the bias is ", alignment(at.bias),
                     "-byte aligned (cuBLASLt's kernels may assume 16 bytes)"));
    return *p;
  }
  if (auto failed = failed_.find(problem_key(g)); failed != failed_.end()) {
    p->status = failed->second;
    return *p;
  }
  p->status = describe_operation(api_, g, at.bias, &p->desc);
  if (p->status.ok()) {
    p->status = make_layout(api_, &p->a, g.a.dtype, g.a.rows, g.a.cols, g.a.ld, g.batches,
                            g.a.batch_stride);
  }
  if (p->status.ok()) {
    p->status = make_layout(api_, &p->b, g.b.dtype, g.b.rows, g.b.cols, g.b.ld, g.batches,
                            g.b.batch_stride);
  }
  if (p->status.ok()) {
    p->status = make_layout(api_, &p->d, g.output_dtype, g.m, g.n, static_cast<int64_t>(g.m),
                            g.batches, static_cast<int64_t>(g.m * g.n));
  }
  if (p->status.ok()) {
    p->status = pick_algorithm(api_, handle_, at, kWorkspaceBytes, p->desc, p->a, p->b, p->d,
                               &p->heuristic);
  }
  return *p;
}

absl::Status CublasLtMatmuls::run(const CublasLtGemm& g, const KernelPointers& pointers,
                                  CUstream stream, LastCall* last) {
  if (last != nullptr) {
    // The steady state: the same gemm over buffers aligned as last time finds the same
    // Prepared the lookup below would (its status included, which a failure updates in
    // place), as long as nothing was dropped since. The caller keeps calls from overlapping.
    const std::array<uint32_t, 4> aligned = alignments_of(g, addresses_of(g, &pointers));
    if (last->owner_ == this && last->gemm_ == &g &&
        last->generation_ == cublaslt_api_generation() &&
        last->epoch_ == epoch_.load(std::memory_order_relaxed) && last->alignments_ == aligned) {
      Prepared& p = *last->prepared_;
      if (!p.status.ok()) return p.status;
      const absl::Status s = call(g, p, pointers, stream);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mutex_);
        remember_failure(g, s);
      }
      return s;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (absl::Status s = ready_to_run(); !s.ok()) return s;
  Prepared& p = prepared(g, &pointers);
  if (last != nullptr) {
    last->owner_ = this;
    last->gemm_ = &g;
    last->generation_ = *generation_;
    last->epoch_ = epoch_.load(std::memory_order_relaxed);
    last->alignments_ = alignments_of(g, addresses_of(g, &pointers));
    last->prepared_ = &p;
  }
  if (!p.status.ok()) return p.status;
  const absl::Status s = call(g, p, pointers, stream);
  if (!s.ok()) remember_failure(g, s);
  return s;
}

absl::Status CublasLtMatmuls::call(const CublasLtGemm& g, Prepared& p,
                                   const KernelPointers& pointers, CUstream stream) {
  const Addresses at = addresses_of(g, &pointers);
  absl::Status s;
  if (g.bias_input >= 0) {
    s = set_attribute(api_, api_.matmul_desc_set_attribute, p.desc, kMatmulDescBiasPointer,
                      device_pointer(at.bias), "cublasLtMatmulDescSetAttribute");
  }
  const float alpha = 1.0f, beta = 0.0f;
  void* d = device_pointer(at.d);
  if (s.ok()) {
    s = check_cublas(api_,
                     api_.matmul(handle_, p.desc, &alpha, device_pointer(at.a), p.a,
                                 device_pointer(at.b), p.b, &beta, d, p.d, d, p.d,
                                 &p.heuristic.algo, device_pointer(workspace_->device_pointer()),
                                 static_cast<size_t>(kWorkspaceBytes), stream),
                     "cublasLtMatmul");
  }
  return s;
}

// An untested library or problem must not break a working program: this problem runs the
// generated kernel from now on, whatever its alignments, and the failure is said once.
void CublasLtMatmuls::remember_failure(const CublasLtGemm& g, const absl::Status& failure) {
  const absl::Status failed =
      absl::InternalError(absl::StrCat("cuBLASLt failed on it before: ", failure.message()));
  const std::vector<int64_t> problem = problem_key(g);
  failed_[problem] = failed;
  for (auto& [key, prepared] : problems_) {  // each alignment's entry of the problem
    if (std::equal(problem.begin(), problem.end(), key.begin())) prepared->status = failed;
  }
  std::fprintf(stderr, "[kiln] %s: %s; this matmul uses the generated kernel from now on\n",
               device_name_.c_str(), std::string(failure.message()).c_str());
}

}  // namespace kiln::runtime::cuda
