// kiln::compile: wrap a function of tensors so that repeated calls skip recording.
//
// The first call with a given input signature (the number of inputs and each one's dtype,
// shape and device) records `fn` as usual, plans it and runs it. Later calls with the same
// signature do not call `fn` at all: they bind the new inputs to the recorded launch plan and
// run it, which costs a few microseconds of host time however many ops `fn` has. A call with
// a new signature records again. Outputs are always fresh tensors computed from the inputs of
// that call.
//
// What a compiled function may rely on, as in jax.jit and tinygrad's TinyJit:
//  - Tensors and scalars that `fn` captures from outside are constants of a recording: they
//    are read on the first call of each signature. Anything that changes between calls must
//    be an input. With CompileOptions::check_every_call (or KILN_COMPILE_CHECK=1) every call
//    also records `fn` and throws kiln::Error if the program differs from the recorded one.
//  - A function that reads data while recording (to_vector, item, eval on an intermediate,
//    or a trace larger than KILN_MAX_TRACE) cannot be replayed: its result may depend on the
//    data. Such a signature is recorded on every call, so its outputs stay right.
//
// Calls may come from several threads at once; a Compiled is a cheap handle (copies share
// their recordings).
#ifndef KILN_COMPILE_H_
#define KILN_COMPILE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct CompileOptions {
  // Record `fn` on every call too and check that it still gives the recorded program.
  bool check_every_call = false;
  // Recordings kept per compiled function; the oldest signature is dropped beyond it.
  size_t max_signatures = 64;
};

class Compiled {
 public:
  explicit Compiled(Fn fn, CompileOptions options = {});
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

  // Input signatures recorded so far (replayable or not).
  size_t num_signatures() const;

  struct State;

 private:
  friend void save_compiled(const Compiled& f, const std::string& dir);
  friend Compiled load_compiled(const std::string& dir, Fn fallback);

  std::shared_ptr<State> state_;
};

Compiled compile(Fn fn, CompileOptions options = {});

// Bundles: a compiled function's recordings on disk, so a deployed program runs its first
// call without recording, planning or compiling (docs/bundles.md has the format).
//
// save_compiled writes every replayable signature `f` has recorded into the folder `dir`
// (made when missing; a bundle already there is replaced): its launch plans and their Kernel
// IR, the tensors `f` captured (the weights, say), and the machine code this process has
// compiled for those kernels (the CPU's compiled loops). It throws kiln::Error when `f` has
// recorded nothing replayable or uses what a bundle cannot hold (a custom function or
// kernel, a collective).
void save_compiled(const Compiled& f, const std::string& dir);

// A compiled function whose recordings come from the bundle in `dir`: a call with one of its
// signatures replays at once (Stats::plans_built and kernels_compiled stay as they were). A
// call with another signature records `fallback`, as compile(fallback) would; without a
// fallback it is a kiln::Error that names the signature and the ones the bundle holds.
// Throws kiln::Error naming the file and the reason when the bundle is missing, corrupt or
// truncated, or was written by another version of Kiln (then, when a fallback is given, it
// says so once on stderr and returns compile(fallback) instead). Machine code for another
// instruction set is left out: those kernels run uncompiled, with the same bits.
Compiled load_compiled(const std::string& dir, Fn fallback = {});

}  // namespace kiln

#endif  // KILN_COMPILE_H_
