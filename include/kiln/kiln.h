// The whole public API of Kiln.
#ifndef KILN_KILN_H_
#define KILN_KILN_H_

#include "kiln/compile.h"
#include "kiln/custom.h"
#include "kiln/debug.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/io.h"
#include "kiln/linalg.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/tensor.h"

#endif  // KILN_KILN_H_
