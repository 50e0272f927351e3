#include "hooks/cert_rotation.h"

#include <algorithm>

namespace iw::certs {

namespace {

void Soonest(int64_t& at, int64_t candidate, int64_t now) {
  if (candidate <= now) return;
  if (at == 0 || candidate < at) at = candidate;
}

// Times are whole seconds, truncated: a stamp of T means the step happened in [T, T+1). The
// overlap after a step has surely passed only once the clock reads T + overlap + 1 (at
// T + overlap it may have run for overlap - 1 s and a little, h07's 19.4 s of a 20 s overlap).
int64_t OverlapOver(int64_t stampedAt, const Policy& p) {
  return stampedAt + p.overlap + 1;
}

}  // namespace

int64_t ServingNotAfter(const Policy& policy, int64_t now, int64_t caNotAfter) {
  return std::min(now + policy.servingValidity, caNotAfter);
}

Decision Decide(const State& s, const Policy& p, int64_t now) {
  if (!s.ca.present) return {Action::kCreateCa, "no usable CA in the Secret", 0};
  if (now >= s.ca.notAfter) return {Action::kCreateCa, "the CA has expired", 0};
  int64_t recheck = 0;
  if (s.nextCa.present) {
    if (now >= s.nextCa.notAfter) return {Action::kStageNextCa, "the staged CA has expired", 0};
    if (s.bundlePublished && now >= OverlapOver(s.stagedAt, p))
      return {Action::kPromoteNextCa,
              "the bundle with the staged CA has been published for the overlap", 0};
    Soonest(recheck, OverlapOver(s.stagedAt, p), now);
  } else if (s.previous.present) {
    if (s.bundlePublished && now >= OverlapOver(s.promotedAt, p))
      return {Action::kDropPrevious, "the overlap after the CA promotion has passed", 0};
    Soonest(recheck, OverlapOver(s.promotedAt, p), now);
  } else if (!s.rotateRequested.empty() && s.rotateRequested != s.rotateDone) {
    return {Action::kStageNextCa, "CA rotation requested (inplace-webhook.io/rotate-ca)", 0};
  } else if (now >= s.ca.notAfter - p.caRenewBefore) {
    return {Action::kStageNextCa, "the CA is within its renewal window", 0};
  } else {
    Soonest(recheck, s.ca.notAfter - p.caRenewBefore, now);
  }
  if (!s.serving.present) return {Action::kIssueServing, "no usable serving certificate", 0};
  if (!s.servingSignedByCa)
    return {Action::kIssueServing, "the serving certificate is not signed by the current CA", 0};
  if (!s.servingNamesOk)
    return {Action::kIssueServing, "the serving certificate lacks a DNS name of the Service", 0};
  const int64_t renewAt = s.serving.notAfter - p.servingRenewBefore;
  if (now >= renewAt && ServingNotAfter(p, now, s.ca.notAfter) > s.serving.notAfter)
    return {Action::kIssueServing, "the serving certificate is within its renewal window", 0};
  Soonest(recheck, renewAt, now);
  // A renewal window that cannot extend the certificate (the CA ends first) waits for the CA's.
  return {Action::kNone, "", recheck};
}

std::string_view ActionName(Action action) {
  switch (action) {
    case Action::kNone:
      return "none";
    case Action::kCreateCa:
      return "create-ca";
    case Action::kStageNextCa:
      return "stage-ca";
    case Action::kPromoteNextCa:
      return "promote-ca";
    case Action::kDropPrevious:
      return "drop-previous-ca";
    case Action::kIssueServing:
      return "issue-serving";
  }
  return "unknown";
}

}  // namespace iw::certs
