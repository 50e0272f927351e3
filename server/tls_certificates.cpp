#include "server/tls_certificates.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "server/log.h"

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

bool ReadFile(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
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

std::string CertificateStore::Load(std::shared_ptr<const Pair>& out) {
  std::string certPem, keyPem;
  if (!ReadFile(certFile_, certPem)) return "cannot read certificate file " + certFile_;
  if (!ReadFile(keyFile_, keyPem)) return "cannot read private key file " + keyFile_;
  auto pair = std::make_shared<Pair>();
  std::unique_ptr<BIO, BioFree> certBio(
      BIO_new_mem_buf(certPem.data(), static_cast<int>(certPem.size())));
  pair->leaf.reset(PEM_read_bio_X509(certBio.get(), nullptr, nullptr, nullptr));
  if (!pair->leaf)
    return "certificate file " + certFile_ + " holds no PEM certificate: " + OpenSslError();
  pair->chain.reset(sk_X509_new_null());
  while (X509* extra = PEM_read_bio_X509(certBio.get(), nullptr, nullptr, nullptr)) {
    sk_X509_push(pair->chain.get(), extra);
  }
  ERR_clear_error();  // the loop above ends on "no start line"
  std::unique_ptr<BIO, BioFree> keyBio(
      BIO_new_mem_buf(keyPem.data(), static_cast<int>(keyPem.size())));
  pair->key.reset(PEM_read_bio_PrivateKey(keyBio.get(), nullptr, nullptr, nullptr));
  if (!pair->key)
    return "private key file " + keyFile_ + " holds no PEM private key: " + OpenSslError();
  if (X509_check_private_key(pair->leaf.get(), pair->key.get()) != 1) {
    ERR_clear_error();
    return "private key in " + keyFile_ + " does not match the certificate in " + certFile_;
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
  return {};
}

std::string CertificateStore::LoadInitial() {
  certStamp_ = Stamp(certFile_);
  keyStamp_ = Stamp(keyFile_);
  std::shared_ptr<const Pair> pair;
  std::string err = Load(pair);
  if (!err.empty()) return err;
  std::lock_guard lock(mu_);
  current_ = std::move(pair);
  return {};
}

bool CertificateStore::ReloadIfChanged() {
  FileStamp c = Stamp(certFile_), k = Stamp(keyFile_);
  if (c == certStamp_ && k == keyStamp_) return false;
  certStamp_ = c;
  keyStamp_ = k;
  std::string oldCert = certBytes_, oldKey = keyBytes_;
  std::shared_ptr<const Pair> pair;
  std::string err = Load(pair);
  if (!err.empty()) {
    // The files may be mid-swap; the stamp is remembered so the same broken pair is reported
    // once, and any later change is tried again.
    metrics_.certificateReloadErrors.fetch_add(1);
    log::Error("certificate reload refused; serving the last good certificate",
               {{"error", err}, {"fingerprint", Fingerprint()}});
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
  {
    std::lock_guard lock(store->mu_);
    pair = store->current_;
  }
  if (!pair) return 0;
  // SSL_use_cert_and_key takes its own references.
  return SSL_use_cert_and_key(ssl, pair->leaf.get(), pair->key.get(), pair->chain.get(), 1) == 1
             ? 1
             : 0;
}

std::string CertificateStore::ConfigureContext(SSL_CTX& ctx, const std::string& clientCaFile) {
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(
      &ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // TLS 1.2: forward-secret AEAD suites only (what Go's crypto/tls prefers). TLS 1.3 suites are
  // all AEAD and keep OpenSSL's defaults.
  if (SSL_CTX_set_cipher_list(&ctx,
                              "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                              "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                              "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305") != 1) {
    return "cannot set TLS cipher list: " + OpenSslError();
  }
  SSL_CTX_set_cert_cb(&ctx, &CertificateStore::SelectCertificate, this);
  // No ALPN callback: a client offering only http/1.1 (the API server) negotiates no ALPN
  // protocol and speaks HTTP/1.1, which is all this server serves.
  if (!clientCaFile.empty()) {
    if (SSL_CTX_load_verify_locations(&ctx, clientCaFile.c_str(), nullptr) != 1) {
      return "cannot load client CA file " + clientCaFile + ": " + OpenSslError();
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(clientCaFile.c_str());
    if (names != nullptr) SSL_CTX_set_client_CA_list(&ctx, names);
    SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return {};
}

}  // namespace iw::tls
