// flotilla/identity/nkeys.h
//
// NATS nkeys: Ed25519 key pairs encoded the way nats-server, nsc and every NATS client read them. An encoded key is
// base32 (RFC 4648 alphabet, no padding) of: prefix byte(s), the 32 key bytes, and a CRC16-XMODEM of both,
// little-endian. A public key has one prefix byte whose top five bits name its type, so it reads "O..." (operator),
// "A..." (account) or "U..." (user); a seed has two prefix bytes packing "S" and the type, so it reads "SO...",
// "SA...", "SU...". The seed is the Ed25519 private seed: whoever holds it is that identity.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "flotilla/core/result.h"

namespace flotilla::identity {

//! The key types Flotilla issues. The values are the nkeys prefix bytes (type index << 3).
enum class KeyType : uint8_t {
  kOperator = 14 << 3,  //!< 'O'
  kAccount = 0,         //!< 'A'
  kUser = 20 << 3,      //!< 'U'
};

//! "operator", "account", "user".
std::string_view keyTypeName(KeyType type);

//! RFC 4648 base32 without padding (what nkeys and JWT ids use).
std::string base32Encode(std::string_view bytes);
//! The reverse; kInvalid for a character outside the alphabet or leftover bits that are not zero.
Result<std::string> base32Decode(std::string_view text);
//! CRC-16/XMODEM (poly 0x1021, init 0), the nkeys checksum.
uint16_t crc16(std::string_view bytes);

//! The raw 32-byte Ed25519 public key of an encoded public key, after checking its CRC, length and type.
Result<std::string> decodePublicKey(std::string_view encoded, KeyType expected);

//! An Ed25519 key pair of one type. Holds the seed; the destructor wipes it. Copyable (the copies wipe their own).
class KeyPair {
 public:
  //! A fresh key pair from the OS CSPRNG.
  static Result<KeyPair> generate(KeyType type);
  //! From an encoded seed ("SU..."); kInvalid names what is wrong (characters, length, CRC, prefix).
  static Result<KeyPair> fromSeed(std::string_view encoded_seed);

  KeyPair(const KeyPair& other) = default;
  KeyPair& operator=(const KeyPair& other) = default;
  ~KeyPair();

  [[nodiscard]] KeyType type() const { return type_; }
  //! The encoded public key ("U...").
  [[nodiscard]] const std::string& publicKey() const { return public_key_; }
  //! The encoded seed ("SU..."): a secret.
  [[nodiscard]] std::string seed() const;
  //! The 64-byte Ed25519 signature of `data`.
  [[nodiscard]] Result<std::string> sign(std::string_view data) const;

 private:
  KeyPair() = default;
  static Result<KeyPair> fromRawSeed(KeyType type, const std::array<uint8_t, 32>& raw_seed);

  KeyType type_ = KeyType::kUser;
  std::array<uint8_t, 32> raw_seed_{};
  std::string public_key_;
};

//! A fresh user key pair that libnats can sign with. libnats 3.4.1 (Debian bookworm) refuses about one valid user
//! seed in a few thousand with "invalid seed" (its checksum and encoding are right: NkeysTest shows nats_Sign
//! failing on a seed this library decodes), and a client holding such a .creds file could never connect; so a key
//! libnats refuses is replaced by another before it is used. Every user JWT this library issues uses one.
Result<KeyPair> generateClientUserKey();

//! Checks `signature` (64 raw bytes) of `data` against an encoded public key of any Flotilla key type;
//! kInvalid when the key is malformed or the signature does not match.
Status verifySignature(std::string_view encoded_public_key, std::string_view data, std::string_view signature);

//! The type an encoded public key announces by its first letter; kInvalid for any other letter.
Result<KeyType> publicKeyType(std::string_view encoded_public_key);

}  // namespace flotilla::identity
