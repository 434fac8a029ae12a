// Tensor-parallel decoding (Megatron-LM style) of the Llama-style decoder of
// samples/llama.h, over every process of an MPI job:
//
//   mpirun -np 2 build/samples/tensor_parallel [--steps N] [--weights FILE]
//
// Rank 0 writes the seeded random weights to a .safetensors file; every rank then reads only
// its shard of each weight (load_shard): the rows of wq wk wv w_gate w_up (its heads and
// hidden features), the columns of wo and w_down, whose partial products one all_reduce
// sums. Each step, rank 0 also runs the whole model in this process and checks that the
// sharded logits equal its logits; the run fails (exit 1) when they do not. Then it prints
// the median decode step of both. Run alone (no mpirun), the "group" has one rank.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kiln/distributed.h"
#include "samples/llama.h"

namespace {

namespace dist = kiln::distributed;
using kiln::Tensor;
using kiln::samples::KvCache;
using kiln::samples::LlamaConfig;
using kiln::samples::LlamaWeights;

std::string layer_name(size_t i, const char* what) {
  return "layers." + std::to_string(i) + "." + what;
}

void save_weights(const LlamaWeights& w, const std::string& path) {
  std::map<std::string, Tensor> t{
      {"embedding", w.embedding}, {"final_norm", w.final_norm}, {"output", w.output}};
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const kiln::samples::LlamaLayer& l = w.layers[i];
    const std::pair<const char*, Tensor> named[] = {{"attention_norm", l.attention_norm},
                                                    {"wq", l.wq},
                                                    {"wk", l.wk},
                                                    {"wv", l.wv},
                                                    {"wo", l.wo},
                                                    {"mlp_norm", l.mlp_norm},
                                                    {"w_gate", l.w_gate},
                                                    {"w_up", l.w_up},
                                                    {"w_down", l.w_down}};
    for (const auto& [name, tensor] : named) t[layer_name(i, name)] = tensor;
  }
  kiln::save_safetensors(path, t);
}

// This rank's shard of every weight, read straight from the file.
LlamaWeights load_sharded_weights(const LlamaConfig& c, const std::string& path,
                                  const dist::Group& group) {
  LlamaWeights w;
  w.config = c;
  w.tensor_parallel = group;
  auto whole = [&](const std::string& name) {
    return kiln::load_safetensors_shard(path, name, 0, 0, 1);
  };
  auto rows = [&](const std::string& name) { return dist::load_shard(path, name, 0, group); };
  auto columns = [&](const std::string& name) { return dist::load_shard(path, name, 1, group); };
  w.embedding = whole("embedding");
  for (size_t i = 0; i < static_cast<size_t>(c.layers); ++i) {
    w.layers.push_back({whole(layer_name(i, "attention_norm")), rows(layer_name(i, "wq")),
                        rows(layer_name(i, "wk")), rows(layer_name(i, "wv")),
                        columns(layer_name(i, "wo")), whole(layer_name(i, "mlp_norm")),
                        rows(layer_name(i, "w_gate")), rows(layer_name(i, "w_up")),
                        columns(layer_name(i, "w_down"))});
  }
  w.final_norm = whole("final_norm");
  w.output = whole("output");
  return w;
}

// The last position's logits [vocab], computed (with the cache) in one sync.
Tensor step(const LlamaWeights& w, KvCache& cache, const std::vector<int64_t>& tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  Tensor logits = kiln::samples::llama_forward(w, cache, Tensor::from_vector(tokens, {1, n}));
  Tensor last = logits.slice(1, n - 1, n).reshape({w.config.vocab});
  std::vector<Tensor> outputs = kiln::samples::step_outputs(last, cache);
  kiln::eval(outputs);
  return last;
}

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

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 16;
  std::string weights = (std::filesystem::temp_directory_path() / "kiln_tensor_parallel").string();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--steps") steps = std::atoll(argv[i + 1]);
    if (flag == "--weights") weights = argv[i + 1];
  }
  const dist::Group world = dist::init();
  const int rank = world.rank();
  // Eight query heads over four kv heads, SwiGLU width 384: splits over 1, 2 or 4 ranks.
  LlamaConfig c;
  c.dim = 128;
  c.heads = 8;
  c.kv_heads = 4;
  c.hidden = 384;
  c.layers = 2;
  c.capacity = 64;
  if (c.kv_heads % world.size() != 0) {
    std::fprintf(stderr, "tensor_parallel: %d ranks do not divide %lld kv heads\n", world.size(),
                 static_cast<long long>(c.kv_heads));
    return 2;
  }
  // One file per job: rank 0 names it after its own process id and tells the others.
  const Tensor pid =
      dist::broadcast(Tensor::full({1}, static_cast<double>(::getpid()), kiln::DType::I64));
  const std::string path =
      weights + "_" + std::to_string(pid.to_vector<int64_t>()[0]) + ".safetensors";
  LlamaWeights full;
  if (rank == 0) {
    full = kiln::samples::random_llama_weights(c, 2026);
    save_weights(full, path);
  }
  world.barrier();  // the file is complete before any rank reads it
  const LlamaWeights sharded = load_sharded_weights(c, path, world);
  world.barrier();
  if (rank == 0) std::filesystem::remove(path);

  KvCache cache = kiln::samples::empty_kv_cache(c, world.size());
  KvCache whole_cache = kiln::samples::empty_kv_cache(c);
  std::vector<int64_t> tokens;
  for (char ch : std::string("Kiln shards its heads")) tokens.push_back(static_cast<uint8_t>(ch));
  std::vector<double> sharded_ms, whole_ms;
  double worst = 0, scale = 0;
  for (int64_t s = 0; s <= steps; ++s) {
    auto start = std::chrono::steady_clock::now();
    const Tensor logits = step(sharded, cache, tokens);
    if (s > 1) {
      sharded_ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    // Rank 0 picks the next token; every rank feeds the same one.
    const Tensor next = dist::broadcast(kiln::argmax(logits, 0).reshape({1}));
    if (rank == 0) {
      start = std::chrono::steady_clock::now();
      const Tensor want = step(full, whole_cache, tokens);
      if (s > 1) {
        whole_ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
      }
      worst = std::max(worst, max_abs_difference(logits, want));
      scale = std::max(scale, kiln::max(kiln::abs(want)).item());
    }
    tokens = {next.to_vector<int64_t>()[0]};
  }
  if (rank != 0) return 0;
  const double tolerance = 1e-4 * std::max(1.0, scale);
  std::printf(
      "tensor_parallel: %d ranks, %lld decode steps; sharded logits vs one process: "
      "max |difference| %.3g (tolerance %.3g)\n",
      world.size(), static_cast<long long>(steps), worst, tolerance);
  std::printf("median decode step: %.3f ms on %d ranks, %.3f ms in one process\n",
              median(sharded_ms), world.size(), median(whole_ms));
  if (!(worst <= tolerance)) {
    std::printf("tensor_parallel: MISMATCH\n");
    return 1;
  }
  std::printf("tensor_parallel: logits match\n");
  return 0;
}
