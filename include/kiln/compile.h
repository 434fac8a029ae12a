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
  std::shared_ptr<State> state_;
};

Compiled compile(Fn fn, CompileOptions options = {});

}  // namespace kiln

#endif  // KILN_COMPILE_H_
