// Tensor-parallel decoding (Megatron-LM style) with kiln::llm, over every process of an MPI
// job:
//
//   mpirun -np 2 build/samples/tensor_parallel [--steps N] [--weights PREFIX] [--q8]
//
// Rank 0 writes a Llama-architecture model with seeded random weights (samples/random_llama.h;
// --q8: its matrices in Q8_0) to a GGUF file; every rank then loads its share of it
// (llm::Model::load with the group: its heads' rows of W_q, W_k, W_v and columns of W_o, its
// MLP features' rows of W_gate, W_up and columns of W_down, those columns in f32), and one
// all_reduce per attention and per MLP sums the ranks' parts. Each step, rank 0 also runs the whole
// model in this process and checks that the sharded logits equal its logits; the run fails (exit 1)
// when they do not. Then it prints the median decode step of both. Run alone (no mpirun), the
// "group" has one rank.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kiln/distributed.h"
#include "kiln/kiln.h"
#include "kiln/llm.h"
#include "samples/random_llama.h"

namespace {

namespace dist = kiln::distributed;
using kiln::Tensor;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(double{x[i]} - y[i]));
  return worst;
}

// The prompt at step 0, then one token: the logits [vocab] of the last, and the step's time.
Tensor run(kiln::llm::Session& sequence, int64_t step, const std::vector<int32_t>& ids,
           double* ms) {
  const auto start = std::chrono::steady_clock::now();
  Tensor logits = step == 0 ? sequence.prefill(ids) : sequence.step(ids[0]);
  (void)logits.to_vector<float>();  // the step is done when its logits are read
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return logits;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 16;
  bool q8 = false;
  std::string weights = (std::filesystem::temp_directory_path() / "kiln_tensor_parallel").string();
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--steps" && i + 1 < argc) steps = std::atoll(argv[++i]);
    if (flag == "--weights" && i + 1 < argc) weights = argv[++i];
    if (flag == "--q8") q8 = true;
  }
  const dist::Group world = dist::init();
  const int rank = world.rank();
  // Eight query heads over four key/value heads, SwiGLU width 384: splits over 1, 2 or 4
  // ranks.
  kiln::samples::RandomLlamaShape shape;
  shape.dim = 128;
  shape.heads = 8;
  shape.kv_heads = 4;
  shape.hidden = 384;
  shape.context = 64;
  if (q8) shape.matrices = kiln::DType::Q8_0;
  // One file per job: rank 0 names it after its own process id and tells the others.
  const Tensor pid =
      dist::broadcast(Tensor::full({1}, static_cast<double>(::getpid()), kiln::DType::I64));
  const std::string path = weights + "_" + std::to_string(pid.to_vector<int64_t>()[0]) + ".gguf";
  if (rank == 0) kiln::save_gguf(path, kiln::samples::random_llama_gguf(shape, 2026));
  world.barrier();  // the file is complete before any rank reads it
  std::optional<kiln::llm::Model> sharded, whole;
  try {
    sharded = kiln::llm::Model::load(path, world);
    if (rank == 0) whole = kiln::llm::Model::load(path);
  } catch (const kiln::Error& e) {  // every rank refuses the same file for the same reason
    std::fprintf(stderr, "tensor_parallel: %s\n", e.what());
    world.barrier();
    if (rank == 0) std::filesystem::remove(path);
    return 2;
  }
  world.barrier();
  if (rank == 0) std::filesystem::remove(path);  // the models map it; its pages stay readable

  kiln::llm::Session session(*sharded, shape.context);
  std::optional<kiln::llm::Session> reference;
  if (rank == 0) reference.emplace(*whole, shape.context);
  const std::string prompt = "Kiln shards its heads";
  std::vector<int32_t> ids;
  for (unsigned char byte : prompt) ids.push_back(byte);
  std::vector<double> sharded_ms, whole_ms;
  double worst = 0, scale = 0, range = 0;
  for (int64_t s = 0; s <= steps; ++s) {
    double ms = 0;
    const Tensor logits = run(session, s, ids, &ms);
    if (s > 1) sharded_ms.push_back(ms);
    if (rank == 0) {
      const Tensor want = run(*reference, s, ids, &ms);
      if (s > 1) whole_ms.push_back(ms);
      worst = std::max(worst, max_abs_difference(logits, want));
      scale = std::max(scale, kiln::max(kiln::abs(want)).item());
      range = std::max(range, (kiln::max(want) - kiln::min(want)).item());
    }
    // Rank 0 picks the next token; every rank feeds the same one.
    const Tensor next = dist::broadcast(kiln::argmax(logits, 0).reshape({1}));
    ids = {static_cast<int32_t>(next.to_vector<int64_t>()[0])};
  }
  if (rank != 0) return 0;
  // With Q8_0 matrices the whole model rounds the input of W_o and W_down to 8-bit blocks,
  // where each rank multiplies its f32 share of them unrounded: docs/llm.md bounds that
  // rounding's effect on the logits by 5% of their range.
  const double tolerance = q8 ? 0.05 * range : 1e-4 * std::max(1.0, scale);
  std::printf(
      "tensor_parallel: %d ranks, %s matrices, %lld decode steps; sharded logits vs one "
      "process: max |difference| %.3g (tolerance %.3g)\n",
      world.size(), q8 ? "Q8_0" : "f32", static_cast<long long>(steps), worst, tolerance);
  std::printf("median decode step: %.3f ms on %d ranks, %.3f ms in one process\n",
              median(sharded_ms), world.size(), median(whole_ms));
  if (!(worst <= tolerance)) {
    std::printf("tensor_parallel: MISMATCH\n");
    return 1;
  }
  std::printf("tensor_parallel: logits match\n");
  return 0;
}
