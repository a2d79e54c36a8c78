// SHA-256 of a byte string (OpenSSL EVP), as raw bytes or lowercase hex.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace attnfuse {

std::array<unsigned char, 32> sha256(std::string_view data);
std::string sha256_hex(std::string_view data);

}  // namespace attnfuse
