// Reading a whole file. Thread safety: none needed (no shared state).
#pragma once

#include <string>

#include "lib/status.h"

namespace iw {

// The bytes of the file at `path`. IOError "cannot read <path>: <the system's reason>" when it
// cannot be opened or read (callers prefix what the file is: `.Prefixed("certificate file")`).
StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace iw
