-- Argo CD health check for apps/v1 Deployments under inplace-webhook (Lua 5.1, as Argo CD's gopher-lua).
-- Install as argocd-cm `resource.customizations.health.apps_Deployment` (see the chart's README).
--
-- While an in-place update runs (annotation inplace-webhook.io/in-progress; the loop paused the
-- Deployment), Argo CD's own check would say Suspended. Instead:
--   Degraded     once Progressing is ProgressDeadlineExceeded (the loop sets it on a stall);
--   Progressing  otherwise, with the loop's condition inplace-webhook.io/Progressing ("n/m pods ...").
-- A Deployment the user paused (pausedByUs false) and every other Deployment get Argo CD's own logic
-- (gitops-engine pkg/health/health_deployment.go), written out below because a custom check replaces it.
local hs = {}

local function condition(conditionType)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == conditionType then
      return c
    end
  end
  return nil
end

local metadata = obj.metadata or {}
local annotations = metadata.annotations or {}
local spec = obj.spec or {}
local status = obj.status or {}
local progressing = condition("Progressing")
local record = annotations["inplace-webhook.io/in-progress"]

if record ~= nil and string.find(record, '"pausedByUs":false', 1, true) == nil then
  if progressing ~= nil and progressing.reason == "ProgressDeadlineExceeded" then
    hs.status = "Degraded"
    hs.message = progressing.message or "in-place update exceeded its progress deadline"
    return hs
  end
  local ours = condition("inplace-webhook.io/Progressing")
  hs.status = "Progressing"
  if ours ~= nil and ours.message ~= nil then
    hs.message = "in-place update: " .. ours.message
  else
    hs.message = "in-place update starting"
  end
  return hs
end

-- Argo CD's own Deployment health.
if spec.paused then
  hs.status = "Suspended"
  hs.message = "Deployment is paused"
  return hs
end
local generation = metadata.generation or 0
local observed = status.observedGeneration or 0
local updated = status.updatedReplicas or 0
if generation <= observed then
  if progressing ~= nil and progressing.reason == "ProgressDeadlineExceeded" then
    hs.status = "Degraded"
    hs.message = string.format("Deployment %q exceeded its progress deadline", metadata.name or "")
    return hs
  elseif spec.replicas ~= nil and updated < spec.replicas then
    hs.status = "Progressing"
    hs.message = string.format("Waiting for rollout to finish: %d out of %d new replicas have been updated...",
      updated, spec.replicas)
    return hs
  elseif (status.replicas or 0) > updated then
    hs.status = "Progressing"
    hs.message = string.format("Waiting for rollout to finish: %d old replicas are pending termination...",
      (status.replicas or 0) - updated)
    return hs
  elseif (status.availableReplicas or 0) < updated then
    hs.status = "Progressing"
    hs.message = string.format("Waiting for rollout to finish: %d of %d updated replicas are available...",
      status.availableReplicas or 0, updated)
    return hs
  end
else
  hs.status = "Progressing"
  hs.message = "Waiting for rollout to finish: observed deployment generation less then desired generation"
  return hs
end
hs.status = "Healthy"
hs.message = ""
return hs
