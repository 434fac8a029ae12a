// Errors thrown by Kiln.
//
// Every failure visible to a user is a kiln::Error whose message names the op, the shapes and
// dtypes involved and what was expected, e.g.
//   [matmul] inner dimensions 3 and 4 differ (a: f32[2, 3], b: f32[4, 5])
// A failed op records nothing: every tensor that existed before the call stays valid.
#ifndef KILN_ERROR_H_
#define KILN_ERROR_H_

#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace kiln

#endif  // KILN_ERROR_H_
