// Debugging from traces: look at a pending computation, save it as a folder, replay it.
//
//   build/samples/trace_debugging [FOLDER]      (default: ./trace_debugging_out)
//
// 1. dump_trace prints the pending graph without computing anything.
// 2. explain_plan prints the kernels Kiln will run, the nodes each computes and why each
//    stored intermediate is stored (KILN_DUMP=plan,kernels writes the same for every sync).
// 3. save_trace_folder writes FOLDER/trace.json and FOLDER/inputs/*.npy, a folder anyone can
//    replay, as KILN_DUMP=trace does for every sync.
// 4. replay_trace (or `kiln replay`) runs the folder again; the sample checks that the
//    replayed outputs equal the ones computed here.
#include <cstdio>
#include <string>

#include "kiln/kiln.h"

int main(int argc, char** argv) {
  using kiln::Tensor;
  const std::string folder = argc > 1 ? argv[1] : "trace_debugging_out";
  try {
    // A computation with a bug report attached: a normalized score per row.
    Tensor x = Tensor::randn({4, 8}, 1).eval();
    Tensor w = Tensor::randn({8, 8}, 2).eval();
    Tensor scores = kiln::softmax(kiln::matmul(x, w) * 0.5, -1);
    Tensor best = kiln::argmax(scores, 1);
    Tensor entropy = -kiln::sum(scores * kiln::log(scores), {1});

    std::printf("== 1. the pending trace ==\n%s\n",
                kiln::dump_trace({best, entropy}, kiln::DumpFormat::Text).c_str());
    std::printf("== 2. the plan ==\n%s\n",
                kiln::explain_plan({best, entropy}, kiln::ExplainDetail::kPlan).c_str());

    kiln::save_trace_folder({best, entropy}, folder);
    std::printf("== 3. saved %s/trace.json and %s/inputs/ ==\n", folder.c_str(), folder.c_str());

    kiln::eval({best, entropy});
    kiln::replay_trace(folder + "/trace.json", folder + "/inputs", folder + "/replayed");
    const Tensor best_again = kiln::load_npy(folder + "/replayed/out0.npy");
    const Tensor entropy_again = kiln::load_npy(folder + "/replayed/out1.npy");
    const bool same = best_again.to_vector<int64_t>() == best.to_vector<int64_t>() &&
                      entropy_again.to_vector<float>() == entropy.to_vector<float>();
    std::printf("== 4. replayed into %s/replayed: outputs identical: %s ==\n", folder.c_str(),
                same ? "yes" : "NO");
    std::printf("the same from a shell: kiln replay %s/trace.json --inputs %s/inputs --out DIR\n",
                folder.c_str(), folder.c_str());
    return same ? 0 : 1;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
