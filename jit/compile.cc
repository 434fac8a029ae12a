#include "kiln/compile.h"

namespace kiln {

std::vector<Tensor> Compiled::operator()(const std::vector<Tensor>& inputs) { return fn_(inputs); }

Compiled compile(Fn fn) { return Compiled(std::move(fn)); }

}  // namespace kiln
