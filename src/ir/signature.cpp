// SHA-256 signatures of canonical printouts (see signature.hpp).
#include "ir/signature.hpp"

#include <openssl/evp.h>

#include "ir/printer.hpp"

namespace attnfuse::ir {

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr) != 1)
    throw Error(ErrorCode::Internal, "SHA-256 failed in OpenSSL EVP_Digest");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xF];
  }
  return out;
}

std::string signature(const Graph& graph) { return sha256_hex(print(graph)); }

}  // namespace attnfuse::ir
