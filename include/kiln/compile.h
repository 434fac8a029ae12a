// kiln::compile: wrap a function of tensors so that repeated calls are cheap.
//
// The contract: a compiled function returns exactly what `fn` returns for the same inputs;
// it never returns stale or wrong outputs. This version records `fn` on every call (so it is
// always correct); replaying the cached launch plan per input signature without recording
// is planned.
#ifndef KILN_COMPILE_H_
#define KILN_COMPILE_H_

#include <functional>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

class Compiled {
 public:
  explicit Compiled(Fn fn) : fn_(std::move(fn)) {}
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

 private:
  Fn fn_;
};

Compiled compile(Fn fn);

}  // namespace kiln

#endif  // KILN_COMPILE_H_
