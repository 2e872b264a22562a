#include "flotilla/identity/auth_dir.h"

#include <filesystem>
#include <system_error>

#include "flotilla/core/util.h"
#include "flotilla/identity/secret_file.h"
#include "flotilla/identity/server_config.h"
#include "flotilla/identity/tls.h"

namespace flotilla::identity {

namespace {

namespace fs = std::filesystem;

struct Keys {
  KeyPair operator_key;
  KeyPair system_account;
  KeyPair account;
  KeyPair account_signing;
  KeyPair registrar_signing;  //!< the scheduler's, for agents' credentials (registration tokens)
};

Result<Keys> generateKeys() {
  auto op = KeyPair::generate(KeyType::kOperator);
  auto system = KeyPair::generate(KeyType::kAccount);
  auto account = KeyPair::generate(KeyType::kAccount);
  auto signing = KeyPair::generate(KeyType::kAccount);
  auto registrar = KeyPair::generate(KeyType::kAccount);
  for (const auto* generated : {&system, &account, &signing, &registrar}) {
    FLOTILLA_TRY(*generated);
  }
  FLOTILLA_TRY(op);
  return Keys{*op, *system, *account, *signing, *registrar};
}

//! Writes `content` under dir (a secret with mode 0600, else 0644) and records the relative path.
class Writer {
 public:
  explicit Writer(std::string dir) : dir_(std::move(dir)) {}
  Status write(const std::string& relative, std::string_view content, bool secret) {
    std::string path = dir_ + "/" + relative;
    FLOTILLA_TRY(secret ? writeSecretFile(path, content) : writeFile(path, content, 0644));
    files_.push_back(relative);
    return {};
  }
  void record(std::string relative) { files_.push_back(std::move(relative)); }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  std::vector<std::string> take() { return std::move(files_); }

 private:
  std::string dir_;
  std::vector<std::string> files_;
};

Status makeDir(const std::string& path) {
  std::error_code error;
  fs::create_directories(path, error);
  if (error) {
    return fail(ErrorKind::kPermanent, "cannot create " + path + ": " + error.message());
  }
  fs::permissions(path, fs::perms::owner_all, error);  // keys live here: no access for others
  return {};
}

Result<std::vector<AccountJwt>> accountJwts(const Keys& keys, Writer& out) {
  auto operator_jwt = issueOperatorJwt(
      keys.operator_key, {.base = {.name = "flotilla"}, .system_account = keys.system_account.publicKey()});
  auto system_jwt = issueAccountJwt(keys.operator_key, keys.system_account.publicKey(),
                                    {.base = {.name = "SYS"}, .jetstream = false});
  auto account_jwt = issueAccountJwt(
      keys.operator_key, keys.account.publicKey(),
      {.base = {.name = "flotilla"},
       .signing_keys = {keys.account_signing.publicKey()},
       // the registrar's key makes agents only (the server applies the agent template)
       .scoped_signing_keys = {
           {.key = keys.registrar_signing.publicKey(), .role = "agent", .permissions = agentTemplatePermissions()}}});
  for (const auto* jwt : {&operator_jwt, &system_jwt, &account_jwt}) {
    FLOTILLA_TRY(*jwt);
  }
  FLOTILLA_TRY(out.write("operator.nk", keys.operator_key.seed() + "\n", true));
  FLOTILLA_TRY(out.write("operator.jwt", *operator_jwt + "\n", false));
  FLOTILLA_TRY(out.write("system-account.nk", keys.system_account.seed() + "\n", true));
  FLOTILLA_TRY(out.write("system-account.jwt", *system_jwt + "\n", false));
  FLOTILLA_TRY(out.write("account.nk", keys.account.seed() + "\n", true));
  FLOTILLA_TRY(out.write("account.jwt", *account_jwt + "\n", false));
  FLOTILLA_TRY(out.write("account-signing.nk", keys.account_signing.seed() + "\n", true));
  FLOTILLA_TRY(out.write("registrar-signing.nk", keys.registrar_signing.seed() + "\n", true));
  return std::vector<AccountJwt>{{keys.system_account.publicKey(), *system_jwt},
                                 {keys.account.publicKey(), *account_jwt},
                                 {"", *operator_jwt}};  // last: the operator's, split off by the caller
}

Result<ServerTls> writeTls(const AuthInitOptions& options, Writer& out) {
  FLOTILLA_TRY(makeDir(out.dir() + "/tls"));
  auto ca = createCertificateAuthority("Flotilla NATS CA");
  FLOTILLA_TRY(ca);
  std::vector<std::string> names = options.alt_names;
  if (names.empty()) {
    names = {"localhost", "127.0.0.1"};
  }
  if (!options.server_name.empty()) {
    names.push_back(options.server_name);
  }
  auto server = issueCertificate(
      *ca, {.common_name = options.server_name.empty() ? names.front() : options.server_name, .alt_names = names});
  FLOTILLA_TRY(server);
  FLOTILLA_TRY(out.write("tls/ca.pem", ca->certificate, false));
  FLOTILLA_TRY(out.write("tls/ca-key.pem", ca->private_key, true));
  FLOTILLA_TRY(out.write("tls/server.pem", server->certificate, false));
  FLOTILLA_TRY(out.write("tls/server-key.pem", server->private_key, true));
  return ServerTls{.cert_file = out.dir() + "/tls/server.pem",
                   .key_file = out.dir() + "/tls/server-key.pem",
                   .ca_file = out.dir() + "/tls/ca.pem",
                   .verify = options.mutual_tls};
}

Result<PemPair> readCa(const std::string& dir) {
  auto cert = readFile(dir + "/tls/ca.pem");
  auto key = readFile(dir + "/tls/ca-key.pem");
  if (!cert.ok() || !key.ok()) {
    return fail(ErrorKind::kNotFound, dir + "/tls has no CA (tls/ca.pem and tls/ca-key.pem): run auth init --tls");
  }
  return PemPair{*cert, *key};
}

//! The JWT in dir/file, verified: {its subject, the JWT}.
Result<AccountJwt> readVerifiedJwt(const std::string& dir, const char* file, Clock::time_point now) {
  const std::string path = dir + "/" + file;
  auto text = readFile(path);
  if (!text.ok()) {
    return fail(ErrorKind::kNotFound, path + " is missing: run auth init --dir " + dir);
  }
  std::string jwt = trim(*text);
  auto verified = verifyJwt(jwt, now);
  if (!verified.ok()) {
    return fail(ErrorKind::kInvalid, path + ": " + verified.error().message);
  }
  return AccountJwt{verified->subject(), jwt};
}

}  // namespace

std::string identityName(const Role& role) {
  return role.subject.empty() ? role.name : role.name + "-" + role.subject;
}

std::string credsFileName(const Role& role) {
  return "creds/" + identityName(role) + ".creds";
}

Result<IssuedUser> issueUser(const KeyPair& account_signer, std::string_view account_public_key, const Role& role,
                             std::optional<std::chrono::seconds> ttl, Clock::time_point now) {
  auto user = generateClientUserKey();
  FLOTILLA_TRY(user);
  UserClaims claims{.base = {.name = identityName(role), .issued_at = now},
                    .permissions = role.permissions,
                    .tags = identityTags(role.name, role.subject)};
  if (ttl) {
    claims.base.expires = now + *ttl;
  }
  if (account_signer.publicKey() != account_public_key) {
    claims.issuer_account = std::string(account_public_key);
  }
  auto jwt = issueUserJwt(account_signer, user->publicKey(), claims);
  FLOTILLA_TRY(jwt);
  return IssuedUser{.jwt = *jwt, .public_key = user->publicKey(), .creds = credsFile(*jwt, *user)};
}

Result<IssuedUser> issueFromAuthDir(const std::string& dir, const Role& role, std::optional<std::chrono::seconds> ttl,
                                    Clock::time_point now) {
  auto seed = readFile(dir + "/account-signing.nk");
  auto account_jwt = readFile(dir + "/account.jwt");
  if (!seed.ok() || !account_jwt.ok()) {
    return fail(ErrorKind::kNotFound, dir + " has no account-signing.nk and account.jwt: run auth init --dir " + dir);
  }
  auto signer = KeyPair::fromSeed(trim(*seed));
  if (!signer.ok()) {
    return fail(ErrorKind::kInvalid, dir + "/account-signing.nk: " + signer.error().message);
  }
  auto account = verifyJwt(trim(*account_jwt), now);
  if (!account.ok()) {
    return fail(ErrorKind::kInvalid, dir + "/account.jwt: " + account.error().message);
  }
  return issueUser(*signer, account->subject(), role, ttl, now);
}

Status issueClientCertificate(const std::string& dir, const std::string& name) {
  auto ca = readCa(dir);
  FLOTILLA_TRY(ca);
  auto cert = issueCertificate(*ca, {.common_name = name, .use = CertificateUse::kClient});
  FLOTILLA_TRY(cert);
  return writePemPair(*cert, dir + "/tls/" + name + ".pem", dir + "/tls/" + name + "-key.pem");
}

Result<std::string> renderAuthDirAccounts(const std::string& dir, Clock::time_point now) {
  std::vector<AccountJwt> jwts;  // operator, system account, account: {subject, JWT}
  for (const char* file : {"operator.jwt", "system-account.jwt", "account.jwt"}) {
    auto jwt = readVerifiedJwt(dir, file, now);
    FLOTILLA_TRY(jwt);
    jwts.push_back(std::move(*jwt));
  }
  ServerConfig config{.operator_jwt = jwts[0].jwt,
                      .system_account = jwts[1].public_key,
                      .accounts = {jwts[1], jwts[2]},
                      .write_resolver = false,
                      .jetstream = false};
  return renderServerConfig(config);
}

Result<PemPair> issueServerCertificate(const std::string& dir, const std::vector<std::string>& names) {
  if (names.empty()) {
    return fail(ErrorKind::kInvalid, "a server certificate needs at least one name");
  }
  auto ca = readCa(dir);
  FLOTILLA_TRY(ca);
  return issueCertificate(*ca, {.common_name = names.front(), .alt_names = names});
}

Result<AuthInitResult> initAuthDir(const AuthInitOptions& options) {
  std::error_code error;
  std::string dir = fs::absolute(options.dir, error).lexically_normal().string();
  if (options.dir.empty() || error) {
    return fail(ErrorKind::kInvalid, "auth init needs a directory");
  }
  if (fs::exists(dir + "/operator.nk") || fs::exists(dir + "/account-signing.nk")) {
    return fail(ErrorKind::kConflict, dir + " already holds NATS keys (operator.nk); refusing to overwrite them");
  }
  FLOTILLA_TRY(makeDir(dir));
  FLOTILLA_TRY(makeDir(dir + "/creds"));
  Writer out(dir);
  auto keys = generateKeys();
  FLOTILLA_TRY(keys);
  auto jwts = accountJwts(*keys, out);
  FLOTILLA_TRY(jwts);
  ServerConfig config{.operator_jwt = jwts->back().jwt,
                      .system_account = keys->system_account.publicKey(),
                      .resolver_dir = options.resolver_dir.empty() ? dir + "/resolver" : options.resolver_dir,
                      .server_name = options.server_name};
  jwts->pop_back();
  config.accounts = std::move(*jwts);
  bool tls = options.tls || options.mutual_tls;
  if (tls) {
    auto server_tls = writeTls(options, out);
    FLOTILLA_TRY(server_tls);
    config.tls = *server_tls;
  }
  auto text = renderServerConfig(config);
  FLOTILLA_TRY(text);
  FLOTILLA_TRY(out.write("nats-auth.conf", *text, false));
  for (const auto& role : {pollerRole(), bundlerRole(), schedulerRole(), gatewayRole(), adminRole(), readonlyRole()}) {
    auto user = issueUser(keys->account_signing, keys->account.publicKey(), role, options.hub_ttl);
    FLOTILLA_TRY(user);
    FLOTILLA_TRY(out.write(credsFileName(role), user->creds, true));
    if (options.mutual_tls) {
      FLOTILLA_TRY(issueClientCertificate(dir, identityName(role)));
      out.record("tls/" + identityName(role) + ".pem");
      out.record("tls/" + identityName(role) + "-key.pem");
    }
  }
  return AuthInitResult{.files = out.take()};
}

}  // namespace flotilla::identity
