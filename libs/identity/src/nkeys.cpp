#include "flotilla/identity/nkeys.h"

#include <cstdlib>

#include <nats/nats.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "openssl_handles.h"

namespace flotilla::identity {

namespace {

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
constexpr uint8_t kSeedPrefix = 18 << 3;  // 'S'
constexpr size_t kKeySize = 32;
constexpr size_t kPublicEncodedSize = 1 + kKeySize + 2;
constexpr size_t kSeedEncodedSize = 2 + kKeySize + 2;

bool isFlotillaType(uint8_t prefix) {
  return prefix == static_cast<uint8_t>(KeyType::kOperator) || prefix == static_cast<uint8_t>(KeyType::kAccount) ||
         prefix == static_cast<uint8_t>(KeyType::kUser);
}

//! raw + CRC16 (little-endian), base32.
std::string withChecksum(std::string raw) {
  uint16_t crc = crc16(raw);
  raw.push_back(static_cast<char>(crc & 0xff));
  raw.push_back(static_cast<char>(crc >> 8));
  return base32Encode(raw);
}

//! base32-decodes `encoded` and checks its length and trailing CRC; returns the bytes before the CRC.
Result<std::string> checkedBytes(std::string_view encoded, size_t expected_size, std::string_view what) {
  auto raw = base32Decode(encoded);
  if (!raw.ok()) {
    return fail(ErrorKind::kInvalid, std::string(what) + ": " + raw.error().message);
  }
  if (raw->size() != expected_size) {
    return fail(ErrorKind::kInvalid, std::string(what) + ": wrong length (" + std::to_string(encoded.size()) +
                                         " characters, " + std::to_string(raw->size()) + " bytes)");
  }
  auto body = raw->substr(0, raw->size() - 2);
  auto low = static_cast<uint8_t>((*raw)[raw->size() - 2]);
  auto high = static_cast<uint8_t>((*raw)[raw->size() - 1]);
  if (crc16(body) != static_cast<uint16_t>(low | (high << 8))) {
    return fail(ErrorKind::kInvalid, std::string(what) + ": checksum mismatch (a mistyped or truncated key)");
  }
  return body;
}

}  // namespace

std::string_view keyTypeName(KeyType type) {
  switch (type) {
    case KeyType::kOperator:
      return "operator";
    case KeyType::kAccount:
      return "account";
    case KeyType::kUser:
      return "user";
  }
  return "unknown";
}

std::string base32Encode(std::string_view bytes) {
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char byte : bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out.push_back(kAlphabet[(buffer >> (bits - 5)) & 31]);
      bits -= 5;
    }
  }
  if (bits > 0) {
    out.push_back(kAlphabet[(buffer << (5 - bits)) & 31]);
  }
  return out;
}

Result<std::string> base32Decode(std::string_view text) {
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    auto index = kAlphabet.find(text[i]);
    if (index == std::string_view::npos) {
      return fail(ErrorKind::kInvalid, "character " + std::to_string(i + 1) + " is not base32");
    }
    buffer = (buffer << 5) | static_cast<uint32_t>(index);
    bits += 5;
    if (bits >= 8) {
      out.push_back(static_cast<char>((buffer >> (bits - 8)) & 0xff));
      bits -= 8;
    }
  }
  if ((buffer & ((1U << bits) - 1)) != 0) {
    return fail(ErrorKind::kInvalid, "trailing bits are not zero");
  }
  return out;
}

uint16_t crc16(std::string_view bytes) {
  uint16_t crc = 0;
  for (unsigned char byte : bytes) {
    crc ^= static_cast<uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021) : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

Result<KeyType> publicKeyType(std::string_view encoded_public_key) {
  if (encoded_public_key.empty()) {
    return fail(ErrorKind::kInvalid, "empty public key");
  }
  switch (encoded_public_key.front()) {
    case 'O':
      return KeyType::kOperator;
    case 'A':
      return KeyType::kAccount;
    case 'U':
      return KeyType::kUser;
    default:
      return fail(ErrorKind::kInvalid, "public key \"" + std::string(encoded_public_key.substr(0, 8)) +
                                           "...\" is not an operator (O), account (A) or user (U) key");
  }
}

Result<std::string> decodePublicKey(std::string_view encoded, KeyType expected) {
  std::string what = std::string(keyTypeName(expected)) + " public key";
  auto body = checkedBytes(encoded, kPublicEncodedSize, what);
  FLOTILLA_TRY(body);
  if (static_cast<uint8_t>((*body)[0]) != static_cast<uint8_t>(expected)) {
    return fail(ErrorKind::kInvalid,
                what + ": the key is of another type (starts with '" + std::string(1, encoded.front()) + "')");
  }
  return body->substr(1);
}

Result<KeyPair> KeyPair::generate(KeyType type) {
  std::array<uint8_t, kKeySize> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) {
    return fail(ErrorKind::kInternal, detail::opensslError("RAND_bytes failed"));
  }
  auto pair = fromRawSeed(type, raw);
  OPENSSL_cleanse(raw.data(), raw.size());
  return pair;
}

Result<KeyPair> KeyPair::fromSeed(std::string_view encoded_seed) {
  auto body = checkedBytes(encoded_seed, kSeedEncodedSize, "nkey seed");
  FLOTILLA_TRY(body);
  auto b1 = static_cast<uint8_t>((*body)[0]);
  auto b2 = static_cast<uint8_t>((*body)[1]);
  if ((b1 & 0xf8) != kSeedPrefix) {
    return fail(ErrorKind::kInvalid, "nkey seed: does not start with 'S' (is it a public key?)");
  }
  auto prefix = static_cast<uint8_t>(((b1 & 0x07) << 5) | ((b2 & 0xf8) >> 3));
  if (!isFlotillaType(prefix)) {
    return fail(ErrorKind::kInvalid, "nkey seed: not an operator, account or user seed");
  }
  std::array<uint8_t, kKeySize> raw{};
  std::copy(body->begin() + 2, body->end(), raw.begin());
  OPENSSL_cleanse(body->data(), body->size());
  auto pair = fromRawSeed(static_cast<KeyType>(prefix), raw);
  OPENSSL_cleanse(raw.data(), raw.size());
  return pair;
}

Result<KeyPair> KeyPair::fromRawSeed(KeyType type, const std::array<uint8_t, 32>& raw_seed) {
  detail::PkeyPtr key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, raw_seed.data(), raw_seed.size()));
  if (!key) {
    return fail(ErrorKind::kInternal, detail::opensslError("EVP_PKEY_new_raw_private_key failed"));
  }
  std::string public_raw(kKeySize, '\0');
  size_t length = public_raw.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), reinterpret_cast<unsigned char*>(public_raw.data()), &length) != 1 ||
      length != kKeySize) {
    return fail(ErrorKind::kInternal, detail::opensslError("EVP_PKEY_get_raw_public_key failed"));
  }
  KeyPair pair;
  pair.type_ = type;
  pair.raw_seed_ = raw_seed;
  pair.public_key_ = withChecksum(std::string(1, static_cast<char>(type)) + public_raw);
  return pair;
}

KeyPair::~KeyPair() {
  OPENSSL_cleanse(raw_seed_.data(), raw_seed_.size());
}

std::string KeyPair::seed() const {
  auto prefix = static_cast<uint8_t>(type_);
  std::string raw;
  raw.push_back(static_cast<char>(kSeedPrefix | (prefix >> 5)));
  raw.push_back(static_cast<char>((prefix & 31) << 3));
  raw.append(reinterpret_cast<const char*>(raw_seed_.data()), raw_seed_.size());
  std::string encoded = withChecksum(raw);
  OPENSSL_cleanse(raw.data(), raw.size());
  return encoded;
}

Result<std::string> KeyPair::sign(std::string_view data) const {
  detail::PkeyPtr key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, raw_seed_.data(), raw_seed_.size()));
  detail::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!key || !ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return fail(ErrorKind::kInternal, detail::opensslError("Ed25519 sign init failed"));
  }
  std::string signature(64, '\0');
  size_t length = signature.size();
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &length,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1 ||
      length != signature.size()) {
    return fail(ErrorKind::kInternal, detail::opensslError("Ed25519 sign failed"));
  }
  return signature;
}

Result<KeyPair> generateClientUserKey() {
  constexpr int kAttempts = 16;  // one refusal in thousands: 16 in a row do not happen
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto pair = KeyPair::generate(KeyType::kUser);
    FLOTILLA_TRY(pair);
    std::string seed = pair->seed();
    unsigned char* signature = nullptr;
    int length = 0;
    natsStatus status = nats_Sign(seed.c_str(), "flotilla", &signature, &length);
    std::free(signature);  // NOLINT(cppcoreguidelines-no-malloc): libnats allocates it with malloc
    OPENSSL_cleanse(seed.data(), seed.size());
    if (status == NATS_OK) {
      return pair;
    }
  }
  return fail(ErrorKind::kInternal, "libnats refused " + std::to_string(kAttempts) + " generated user seeds in a row");
}

Status verifySignature(std::string_view encoded_public_key, std::string_view data, std::string_view signature) {
  auto type = publicKeyType(encoded_public_key);
  FLOTILLA_TRY(type);
  auto raw = decodePublicKey(encoded_public_key, *type);
  FLOTILLA_TRY(raw);
  detail::PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                                  reinterpret_cast<const unsigned char*>(raw->data()), raw->size()));
  detail::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!key || !ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return fail(ErrorKind::kInternal, detail::opensslError("Ed25519 verify init failed"));
  }
  int verdict = EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                                 reinterpret_cast<const unsigned char*>(data.data()), data.size());
  ERR_clear_error();
  if (verdict != 1) {
    return fail(ErrorKind::kInvalid, "signature does not match " + std::string(keyTypeName(*type)) + " key " +
                                         std::string(encoded_public_key));
  }
  return {};
}

}  // namespace flotilla::identity
