// SHA-256 through OpenSSL's EVP interface (the one hashing implementation attnfuse uses).
#include "common/sha256.hpp"

#include <openssl/evp.h>

#include "attnfuse/error.hpp"

namespace attnfuse {

std::array<unsigned char, 32> sha256(std::string_view data) {
  std::array<unsigned char, 32> out{};
  unsigned int len = 0;
  if (!EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) || len != 32)
    throw Error(ErrorCode::Internal, "SHA-256 failed");
  return out;
}

std::string sha256_hex(std::string_view data) {
  static const char* digits = "0123456789abcdef";
  const auto raw = sha256(data);
  std::string hex(64, '0');
  for (size_t i = 0; i < raw.size(); ++i) {
    hex[2 * i] = digits[raw[i] >> 4];
    hex[2 * i + 1] = digits[raw[i] & 15];
  }
  return hex;
}

}  // namespace attnfuse
