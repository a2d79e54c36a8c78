// Typed errors of attnfuse: every user mistake becomes one of these before any kernel runs.
#pragma once

#include <stdexcept>
#include <string>

namespace attnfuse {

// Stable codes; the C ABI and the CLI map them one to one (the CLI exits 2 on all but Internal).
enum class ErrorCode {
  Parse = 1,        // malformed program text
  Verify = 2,       // well-formed text, ill-formed attention program
  Shape = 3,        // tensor shapes/strides that do not fit the program
  DType = 4,        // unsupported or mismatched element type
  MissingTensor = 5,// a run-time tensor the program needs (bias, BlockMask) was not given
  Unsupported = 6,  // a valid program this backend/target cannot run
  Io = 7,           // file missing, unreadable or malformed (.npy, config)
  Device = 8,       // CUDA driver / NVRTC unavailable or failing
  Internal = 9,     // a bug in attnfuse
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// Position of a piece of program text (1-based line/column; len = characters to underline).
// Nodes built from the C++ DSL have line == 0.
struct SourceLoc {
  int line = 0;
  int col = 0;
  int len = 0;
  bool known() const { return line > 0; }
};

}  // namespace attnfuse
