#include "server/http/tls_certificates.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "lib/file.h"
#include "server/process/log.h"

namespace iw::tls {

namespace {

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PKeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct ChainFree {
  void operator()(STACK_OF(X509) * s) const { sk_X509_pop_free(s, X509_free); }
};

FileStamp Stamp(const std::string& path) {
  struct stat st {};
  FileStamp s;
  if (::stat(path.c_str(), &st) != 0) return s;  // stat follows symlinks: a `..data` swap shows
  s.exists = true;
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.size = static_cast<unsigned long long>(st.st_size);
  s.mtimeNanos = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  return s;
}

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

}  // namespace

struct CertificateStore::ClientCa {
  X509_STORE* store = nullptr;
  STACK_OF(X509_NAME) * names = nullptr;
  ClientCa() = default;
  ClientCa(const ClientCa&) = delete;
  ClientCa& operator=(const ClientCa&) = delete;
  ~ClientCa() {
    X509_STORE_free(store);
    sk_X509_NAME_pop_free(names, X509_NAME_free);
  }
};

struct CertificateStore::Pair {
  std::unique_ptr<X509, X509Free> leaf;
  std::unique_ptr<EVP_PKEY, PKeyFree> key;
  std::unique_ptr<STACK_OF(X509), ChainFree> chain;
  std::string fingerprint;
};

CertificateStore::CertificateStore(std::string certFile, std::string keyFile,
                                   metrics::Registry& metrics)
    : certFile_(std::move(certFile)), keyFile_(std::move(keyFile)), metrics_(metrics) {}

CertificateStore::~CertificateStore() {
  StopWatching();
}

Status CertificateStore::Load(std::shared_ptr<const Pair>& out) {
  StatusOr<std::string> certRead = ReadFile(certFile_);
  if (!certRead.ok()) return certRead.status().Prefixed("certificate file");
  StatusOr<std::string> keyRead = ReadFile(keyFile_);
  if (!keyRead.ok()) return keyRead.status().Prefixed("private key file");
  const std::string& certPem = *certRead;
  const std::string& keyPem = *keyRead;
  auto pair = std::make_shared<Pair>();
  std::unique_ptr<BIO, BioFree> certBio(
      BIO_new_mem_buf(certPem.data(), static_cast<int>(certPem.size())));
  pair->leaf.reset(PEM_read_bio_X509(certBio.get(), nullptr, nullptr, nullptr));
  if (!pair->leaf) {
    return Status::InvalidArgument("certificate file " + certFile_ +
                                   " holds no PEM certificate: " + OpenSslError());
  }
  pair->chain.reset(sk_X509_new_null());
  while (X509* extra = PEM_read_bio_X509(certBio.get(), nullptr, nullptr, nullptr)) {
    sk_X509_push(pair->chain.get(), extra);
  }
  ERR_clear_error();  // the loop above ends on "no start line"
  std::unique_ptr<BIO, BioFree> keyBio(
      BIO_new_mem_buf(keyPem.data(), static_cast<int>(keyPem.size())));
  pair->key.reset(PEM_read_bio_PrivateKey(keyBio.get(), nullptr, nullptr, nullptr));
  if (!pair->key) {
    return Status::InvalidArgument("private key file " + keyFile_ +
                                   " holds no PEM private key: " + OpenSslError());
  }
  if (X509_check_private_key(pair->leaf.get(), pair->key.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("private key in " + keyFile_ +
                                   " does not match the certificate in " + certFile_);
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdLen = 0;
  X509_digest(pair->leaf.get(), EVP_sha256(), md, &mdLen);
  static const char* kHex = "0123456789abcdef";
  for (unsigned i = 0; i < mdLen; ++i) {
    pair->fingerprint += kHex[md[i] >> 4];
    pair->fingerprint += kHex[md[i] & 15];
  }
  out = std::move(pair);
  certBytes_ = std::move(certPem);
  keyBytes_ = std::move(keyPem);
  return Status::Ok();
}

Status CertificateStore::LoadInitial(bool allowMissing) {
  certStamp_ = Stamp(certFile_);
  keyStamp_ = Stamp(keyFile_);
  if (allowMissing && (!certStamp_.exists || !keyStamp_.exists)) {
    log::Warn("no serving certificate yet; waiting for the files",
              {{"certFile", certFile_}, {"keyFile", keyFile_}});
    return Status::Ok();
  }
  std::shared_ptr<const Pair> pair;
  if (Status err = Load(pair); !err.ok()) return err;
  std::lock_guard lock(mu_);
  current_ = std::move(pair);
  return Status::Ok();
}

bool CertificateStore::HasCertificate() const {
  std::lock_guard lock(mu_);
  return current_ != nullptr;
}

Status CertificateStore::LoadClientCa(std::shared_ptr<const ClientCa>& out) {
  StatusOr<std::string> read = ReadFile(clientCaFile_);
  if (!read.ok()) return read.status().Prefixed("client CA file");
  const std::string& pem = *read;
  auto ca = std::make_shared<ClientCa>();
  ca->store = X509_STORE_new();
  ca->names = sk_X509_NAME_new_null();
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  int count = 0;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    std::unique_ptr<X509, X509Free> cert(x);
    if (X509_STORE_add_cert(ca->store, cert.get()) != 1) {
      ERR_clear_error();  // a duplicate
      continue;
    }
    if (X509_NAME* n = X509_NAME_dup(X509_get_subject_name(cert.get())))
      sk_X509_NAME_push(ca->names, n);
    ++count;
  }
  ERR_clear_error();
  if (count == 0) {
    return Status::InvalidArgument("client CA file " + clientCaFile_ + " holds no PEM certificate");
  }
  clientCaBytes_ = std::move(pem);
  out = std::move(ca);
  return Status::Ok();
}

bool CertificateStore::ReloadClientCaIfChanged() {
  if (clientCaFile_.empty()) return false;
  FileStamp st = Stamp(clientCaFile_);
  if (st == clientCaStamp_) return false;
  clientCaStamp_ = st;
  std::string old = clientCaBytes_;
  std::shared_ptr<const ClientCa> ca;
  if (Status err = LoadClientCa(ca); !err.ok()) {
    metrics_.certificateReloadErrors.fetch_add(1);
    log::Error("client CA reload refused; verifying with the last good CA",
               {{"error", err.message()}});
    return false;
  }
  if (clientCaBytes_ == old) return false;
  {
    std::lock_guard lock(mu_);
    clientCa_ = std::move(ca);
  }
  metrics_.certificateReloads.fetch_add(1);
  log::Info("client CA reloaded", {{"file", clientCaFile_}});
  return true;
}

bool CertificateStore::ReloadIfChanged() {
  bool caChanged = ReloadClientCaIfChanged();
  FileStamp c = Stamp(certFile_), k = Stamp(keyFile_);
  if (c == certStamp_ && k == keyStamp_) return caChanged;
  certStamp_ = c;
  keyStamp_ = k;
  std::string oldCert = certBytes_, oldKey = keyBytes_;
  std::shared_ptr<const Pair> pair;
  if (Status err = Load(pair); !err.ok()) {
    // The files may be mid-swap; the stamp is remembered so the same broken pair is reported
    // once, and any later change is tried again.
    metrics_.certificateReloadErrors.fetch_add(1);
    log::Error("certificate reload refused; serving the last good certificate",
               {{"error", err.message()}, {"fingerprint", Fingerprint()}});
    return false;
  }
  if (certBytes_ == oldCert && keyBytes_ == oldKey) return false;  // touched, same content
  {
    std::lock_guard lock(mu_);
    current_ = std::move(pair);
  }
  metrics_.certificateReloads.fetch_add(1);
  log::Info("serving certificate reloaded", {{"fingerprint", Fingerprint()}});
  return true;
}

void CertificateStore::StartWatching(std::chrono::milliseconds interval) {
  watcher_ = std::thread([this, interval] {
    std::unique_lock lock(watchMu_);
    while (!watchCv_.wait_for(lock, interval, [this] { return stopping_; })) {
      lock.unlock();
      try {
        ReloadIfChanged();
      } catch (const std::exception& e) {
        log::Error("certificate watcher failed", {{"error", e.what()}});
      }
      lock.lock();
    }
  });
}

void CertificateStore::StopWatching() {
  {
    std::lock_guard lock(watchMu_);
    stopping_ = true;
  }
  watchCv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

std::string CertificateStore::Fingerprint() const {
  std::lock_guard lock(mu_);
  return current_ ? current_->fingerprint : std::string();
}

int CertificateStore::SelectCertificate(SSL* ssl, void* self) {
  auto* store = static_cast<CertificateStore*>(self);
  std::shared_ptr<const Pair> pair;
  std::shared_ptr<const ClientCa> clientCa;
  {
    std::lock_guard lock(store->mu_);
    pair = store->current_;
    clientCa = store->clientCa_;
  }
  if (!pair) return 0;
  if (clientCa) {
    // The CA of this handshake: its own references, so a reload mid-handshake is harmless.
    if (SSL_set1_verify_cert_store(ssl, clientCa->store) != 1) return 0;
    SSL_set_client_CA_list(ssl, SSL_dup_CA_list(clientCa->names));
  }
  // SSL_use_cert_and_key takes its own references.
  return SSL_use_cert_and_key(ssl, pair->leaf.get(), pair->key.get(), pair->chain.get(), 1) == 1
             ? 1
             : 0;
}

void CertificateStore::RotateTicketKeysLocked(std::chrono::steady_clock::time_point now) {
  ticketKeys_[1] = ticketKeys_[0];
  havePreviousTicketKey_ = ticketKeyRotatedAt_ != std::chrono::steady_clock::time_point{};
  TicketKey& k = ticketKeys_[0];
  if (RAND_bytes(k.name, sizeof k.name) != 1 || RAND_bytes(k.aes, sizeof k.aes) != 1 ||
      RAND_bytes(k.hmac, sizeof k.hmac) != 1) {
    ERR_clear_error();
    throw std::runtime_error("RAND_bytes failed for a session ticket key");
  }
  ticketKeyRotatedAt_ = now;
}

void CertificateStore::RotateTicketKeys() {
  std::lock_guard lock(ticketMu_);
  RotateTicketKeysLocked(std::chrono::steady_clock::now());
}

namespace {
int StoreIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}
}  // namespace

int CertificateStore::TicketKeyCallback(SSL* ssl, unsigned char* name, unsigned char* iv,
                                        EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac, int encrypt) {
  auto* store =
      static_cast<CertificateStore*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), StoreIndex()));
  if (store == nullptr) return -1;
  std::lock_guard lock(store->ticketMu_);
  const auto now = std::chrono::steady_clock::now();
  int result = 1;
  const TicketKey* key = nullptr;
  try {
    if (now - store->ticketKeyRotatedAt_ >= store->ticketKeyRotation_)
      store->RotateTicketKeysLocked(now);
  } catch (const std::exception&) {
    return -1;
  }
  if (encrypt == 1) {
    key = &store->ticketKeys_[0];
    if (RAND_bytes(iv, EVP_MAX_IV_LENGTH) != 1) return -1;
    std::memcpy(name, key->name, sizeof key->name);
  } else {
    if (std::memcmp(name, store->ticketKeys_[0].name, 16) == 0) {
      key = &store->ticketKeys_[0];
    } else if (store->havePreviousTicketKey_ &&
               std::memcmp(name, store->ticketKeys_[1].name, 16) == 0) {
      key = &store->ticketKeys_[1];
      result = 2;  // valid, but issue a ticket under the current key
    } else {
      return 0;  // unknown (older than two rotations): full handshake
    }
  }
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, const_cast<unsigned char*>(key->hmac),
                                        sizeof key->hmac),
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>("SHA256"), 0),
      OSSL_PARAM_construct_end()};
  if (EVP_MAC_CTX_set_params(mac, params) != 1) return -1;
  if (encrypt == 1) {
    if (EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key->aes, iv) != 1) return -1;
  } else if (EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key->aes, iv) != 1) {
    return -1;
  }
  return result;
}

Status CertificateStore::ConfigureContext(SSL_CTX& ctx, const std::string& clientCaFile,
                                          std::chrono::seconds ticketKeyRotation) {
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(
      &ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // TLS 1.2: forward-secret AEAD suites only (what Go's crypto/tls prefers). TLS 1.3 suites are
  // all AEAD and keep OpenSSL's defaults.
  if (SSL_CTX_set_cipher_list(&ctx,
                              "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                              "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                              "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305") != 1) {
    return Status::IOError("cannot set TLS cipher list: " + OpenSslError());
  }
  SSL_CTX_set_cert_cb(&ctx, &CertificateStore::SelectCertificate, this);
  // No ALPN callback: a client offering only http/1.1 (the API server) negotiates no ALPN
  // protocol and speaks HTTP/1.1, which is all this server serves.
  // Resumption: a session is only resumed in the context it was made in; OpenSSL refuses to
  // resume one with a verified peer certificate when no context is set.
  static constexpr unsigned char kSessionContext[] = "inplace-webhook";
  SSL_CTX_set_session_id_context(&ctx, kSessionContext, sizeof kSessionContext - 1);
  {
    std::lock_guard lock(ticketMu_);
    ticketKeyRotation_ = std::max(ticketKeyRotation, std::chrono::seconds(1));
    RotateTicketKeysLocked(std::chrono::steady_clock::now());
    havePreviousTicketKey_ = false;
  }
  SSL_CTX_set_ex_data(&ctx, StoreIndex(), this);
  if (SSL_CTX_set_tlsext_ticket_key_evp_cb(&ctx, &CertificateStore::TicketKeyCallback) != 1)
    return Status::IOError("cannot set the session ticket key callback: " + OpenSslError());
  if (!clientCaFile.empty()) {
    clientCaFile_ = clientCaFile;
    clientCaStamp_ = Stamp(clientCaFile_);
    std::shared_ptr<const ClientCa> ca;
    if (Status err = LoadClientCa(ca); !err.ok()) return err;
    {
      std::lock_guard lock(mu_);
      clientCa_ = std::move(ca);
    }
    SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return Status::Ok();
}

}  // namespace iw::tls
