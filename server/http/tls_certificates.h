// The serving certificate, re-read from disk when its files change (including the `..data`
// symlink swap of a Kubernetes Secret volume), and the TLS settings of the webhook listener.
// A new pair that does not load, or whose key does not match, is refused with a log line and
// the last good pair keeps serving. The client CA of --client-ca-file reloads the same way (each
// handshake verifies against the CA installed when it started). TLS resumption: a session id
// context is set (OpenSSL refuses to resume a session with a verified client certificate
// without one), and session tickets are encrypted with keys that rotate every
// `ticketKeyRotation`: a ticket issued before one rotation still resumes (and is renewed),
// after two it does not (DESIGN.md §9.7).
//
// Thread safety: LoadInitial() and ConfigureContext() from the owner's thread, before
// StartWatching(); StartWatching() at most once; StopWatching() joins (idempotent; the destructor
// calls it). ReloadIfChanged() from one thread at a time: the watcher's while it runs, else the
// owner's (the file stamps and bytes it compares are unguarded). HasCertificate(), Fingerprint()
// and RotateTicketKeys() from any thread. The certificate and ticket-key callbacks run on the
// HTTP worker threads during handshakes: `mu_` guards the installed pair and client CA (a
// handshake takes its own references), `ticketMu_` the ticket keys, `watchMu_` the watcher's
// stop flag. A configured SSL_CTX points to the store, which must outlive it.
#pragma once

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "lib/status.h"
#include "server/process/metrics.h"

namespace iw::tls {

struct FileStamp {
  unsigned long long dev = 0, ino = 0, size = 0;
  long long mtimeNanos = 0;
  bool exists = false;
  bool operator==(const FileStamp&) const = default;
};

class CertificateStore {
 public:
  CertificateStore(std::string certFile, std::string keyFile, metrics::Registry& metrics);
  ~CertificateStore();
  CertificateStore(const CertificateStore&) = delete;
  CertificateStore& operator=(const CertificateStore&) = delete;

  // Loads the pair once (the server refuses to start on failure). With `allowMissing`, files
  // that do not exist yet are no error: no certificate is served (handshakes fail,
  // HasCertificate() is false) until they appear (--manage-certificates: the Secret is filled
  // after the pod starts). Failure: IOError when a file cannot be read, InvalidArgument when it
  // holds no PEM certificate or key, or the key is not the certificate's; the message names the
  // file.
  Status LoadInitial(bool allowMissing = false);
  bool HasCertificate() const;

  // Starts a thread that checks the files every `interval` and reloads on change.
  void StartWatching(std::chrono::milliseconds interval);
  void StopWatching();

  // Checks the files now; reloads if they changed. Returns true if a new pair was installed.
  bool ReloadIfChanged();

  // Configures `ctx` for the webhook: TLS >= 1.2, modern AEAD ciphers, ALPN tolerant of
  // http/1.1-only clients, the certificate chosen per handshake from this store, and (when
  // `clientCaFile` is set) required and verified client certificates. Failure: IOError when
  // OpenSSL refuses a setting or the client CA file cannot be read, InvalidArgument when that
  // file holds no PEM certificate; `ctx` is then partly configured and must not serve.
  Status ConfigureContext(SSL_CTX& ctx, const std::string& clientCaFile,
                          std::chrono::seconds ticketKeyRotation = std::chrono::hours(1));

  // Replaces the session ticket keys now, as the periodic rotation does (tests).
  void RotateTicketKeys();

  // SHA-256 fingerprint of the serving certificate now installed (for logs and tests).
  std::string Fingerprint() const;

 private:
  struct Pair;
  struct ClientCa;
  struct TicketKey {
    unsigned char name[16], aes[32], hmac[32];
  };
  static int SelectCertificate(SSL* ssl, void* self);
  static int TicketKeyCallback(SSL* ssl, unsigned char* name, unsigned char* iv,
                               EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac, int encrypt);
  // Reads and checks the pair into `out` (and the bytes read); failure as LoadInitial's.
  Status Load(std::shared_ptr<const Pair>& out);
  // Reads clientCaFile_ into `out`; failure as ConfigureContext's for the client CA.
  Status LoadClientCa(std::shared_ptr<const ClientCa>& out);
  bool ReloadClientCaIfChanged();
  void RotateTicketKeysLocked(std::chrono::steady_clock::time_point now);

  std::string certFile_, keyFile_;
  metrics::Registry& metrics_;
  mutable std::mutex mu_;
  std::shared_ptr<const Pair> current_;
  FileStamp certStamp_, keyStamp_;
  std::string certBytes_, keyBytes_;

  std::string clientCaFile_;
  std::shared_ptr<const ClientCa> clientCa_;  // under mu_
  FileStamp clientCaStamp_;
  std::string clientCaBytes_;

  std::mutex ticketMu_;
  TicketKey ticketKeys_[2]{};  // [0] encrypts; [1] (the one before) still decrypts
  bool havePreviousTicketKey_ = false;
  std::chrono::seconds ticketKeyRotation_{3600};
  std::chrono::steady_clock::time_point ticketKeyRotatedAt_{};

  std::mutex watchMu_;
  std::condition_variable watchCv_;
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace iw::tls
